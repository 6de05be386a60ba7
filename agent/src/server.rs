//! The IPC server: one thread per connected datapath, one controller per flow.
//!
//! Every flow is listed in the shared [`Registry`], where the operator interface reads it and
//! sets pins and the policy. A flow thread looks at pins and policy again only when the
//! registry's generation moved, so the per-report cost of the control plane is one atomic load
//! and one short update of the flow's entry.
//!
//! Programs belong to a datapath (libccp keeps them in a per-datapath table), so they are
//! installed when a datapath says READY, or before its first CREATE if it never did. A
//! message that cannot be decoded is logged and skipped; only a broken framing (a length
//! that cannot be right) ends that datapath's connection. Other datapaths are unaffected.
//!
//! A connection whose first bytes are a Cap'n Proto segment table (someone pointed `ccswitch
//! operator` at this socket) is answered with an operator-protocol error that names the right
//! socket, then closed: no CCP message has a length below its 8-byte header, while a segment
//! table starts with a small segment count, which reads as a CCP length of 0.
//!
//! The socket files the agent creates are listed in [`OwnedSockets`] and removed when it
//! stops on SIGTERM or SIGINT.
//!
//! A datapath in the agent's own process ([`Agent::connect_in_process`]) gets the same
//! [`Connection`] as a socket's, driven on the datapath's thread: it hands over the bytes it
//! would have written and takes the answers back before the call returns.

use std::collections::HashSet;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{bail, Context, Result};
use ccswitch_algorithms::DatapathInfo;
use ccswitch_protocol::sid_table::SidTable;
use ccswitch_protocol::wire::{self, FrameReader, Msg};
use tracing::{debug, error, info, warn};

use crate::events::EventLog;
use crate::flow::{self, Answer, FlowController, ProgramCache, Handover};
use crate::memory::{Start, StartFrom};
use crate::program::{CompiledProgram, SimpleProgram};
use crate::python_guard::{self, PythonCounts};
use crate::registry::{Endpoints, FlowId, FlowRecord, Registry};
use crate::selector::policy::Policy;
use crate::selector::Selector;

pub struct Agent {
    simple: SimpleProgram,
    programs: ProgramCache,
    /// Algorithm spec for flows whose datapath does not ask for a known one (and the policy
    /// names no initial algorithm).
    default_algorithm: String,
    registry: Arc<Registry>,
    events: Option<EventLog>,
    next_datapath_id: AtomicU64,
}

impl Agent {
    pub fn new(default_algorithm: String, registry: Arc<Registry>, events: Option<EventLog>) -> Result<Arc<Self>> {
        Ok(Arc::new(Self {
            simple: SimpleProgram::compile()?,
            programs: ProgramCache::default(),
            default_algorithm,
            registry,
            events,
            next_datapath_id: AtomicU64::new(1),
        }))
    }

    /// Say where the agent serves and what a new flow will run: with a policy, its initial
    /// algorithm, not --algorithm.
    pub fn log_start(&self, socket: &str) {
        match self.registry.policy() {
            Some(p) => info!(
                socket, algorithm = %p.initial(), policy = %p.name(),
                memory = %self.registry.memory().state(Some(p.memory())).map_or_else(|why| format!("off: {why}"), |()| p.memory().to_string()),
                "agent listening; flows start on the policy's initial algorithm unless their datapath asks for a known one"
            ),
            None => info!(socket, algorithm = %self.default_algorithm, "agent listening"),
        }
    }

    pub fn serve(self: Arc<Self>, socket: &Path, mode: u32, owned: &OwnedSockets) -> Result<()> {
        let listener = bind(socket, mode, owned)?;
        self.log_start(&socket.display().to_string());
        self.accept_datapaths(listener)
    }

    /// Serve every datapath that connects to `listener`, each on a thread of its own.
    pub fn accept_datapaths(self: Arc<Self>, listener: UnixListener) -> Result<()> {
        for conn in listener.incoming() {
            match conn {
                Ok(stream) => {
                    let agent = Arc::clone(&self);
                    let id = self.next_datapath_id.fetch_add(1, Ordering::Relaxed);
                    std::thread::Builder::new()
                        .name(format!("datapath-{id}"))
                        .spawn(move || agent.serve_datapath(id, stream))?;
                }
                Err(e) => error!(error = %e, "accept failed"),
            }
        }
        Ok(())
    }

    fn serve_datapath(self: Arc<Self>, datapath: u64, mut stream: UnixStream) {
        info!(datapath, "datapath connected");
        let mut out = match stream.try_clone() {
            Ok(s) => s,
            Err(e) => return error!(datapath, error = %e, "cannot clone the stream"),
        };
        let mut conn = Connection::new(self, datapath);
        let reason = match conn.run(&mut stream, &mut out) {
            Ended::Closed(reason) => reason,
            Ended::OperatorClient => {
                crate::operator::drain_and_close(stream);
                "an operator request on the datapath socket".into()
            }
        };
        info!(datapath, flows = conn.flows.len(), reason = %reason, "datapath disconnected");
        conn.forget_flows();
    }
}

impl Agent {
    /// A connection for a datapath in this process, driven on the datapath's thread (see
    /// [`InProcessAgentConnection`]).
    pub fn connect_in_process(self: &Arc<Self>) -> InProcessAgentConnection {
        let datapath = self.next_datapath_id.fetch_add(1, Ordering::Relaxed);
        info!(datapath, in_process = true, "datapath connected");
        InProcessAgentConnection { conn: Connection::new(Arc::clone(self), datapath), frames: FrameReader::new(), failed: false }
    }
}

/// A datapath's connection in the agent's own process: what the datapath would write to the
/// socket goes to [`exchange`](ccswitch_ccp::agent_link::InProcessConnection::exchange), which
/// frames it, handles every message as the socket's connection does and hands back the
/// answers. A framing error or a panic in the agent's code ends the connection (the datapath
/// falls back and connects afresh) but not the process; dropping it closes its flows.
pub struct InProcessAgentConnection {
    conn: Connection,
    frames: FrameReader,
    failed: bool,
}

impl ccswitch_ccp::agent_link::InProcessConnection for InProcessAgentConnection {
    fn exchange(&mut self, sent: &[u8], answers: &mut Vec<u8>) -> Result<(), String> {
        if self.failed {
            return Err("the in-process agent connection failed before".into());
        }
        let Self { conn, frames, .. } = self;
        let handled = std::panic::catch_unwind(AssertUnwindSafe(|| {
            frames.push(sent);
            let framed = loop {
                match frames.next_frame() {
                    Ok(Some(frame)) => conn.on_frame(frame),
                    Ok(None) => break Ok(()),
                    Err(e) => {
                        error!(datapath = conn.datapath, error = %e, "unrecoverable framing error");
                        break Err(format!("framing error: {e}"));
                    }
                }
            };
            answers.extend_from_slice(&conn.queued);
            conn.queued.clear();
            framed
        }));
        let result = handled.unwrap_or_else(|panic| Err(format!("the agent panicked: {}", panic_message(&*panic))));
        self.failed = result.is_err();
        result
    }
}

impl Drop for InProcessAgentConnection {
    fn drop(&mut self) {
        let conn = &mut self.conn;
        info!(datapath = conn.datapath, flows = conn.flows.len(), in_process = true, "datapath disconnected");
        if std::panic::catch_unwind(AssertUnwindSafe(|| conn.forget_flows())).is_err() {
            error!(datapath = conn.datapath, "closing the flows of a failed in-process connection panicked");
        }
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

/// The socket files this agent bound, to be removed when it stops. A file is removed only if
/// it is still the one this agent bound (same device and inode), never a successor's.
#[derive(Default)]
pub struct OwnedSockets {
    files: Mutex<Vec<(PathBuf, u64, u64)>>,
}

impl OwnedSockets {
    /// Bind `path` and list it, under the list's lock so that a concurrent [`remove_all`]
    /// (a signal) sees the file either not yet created or listed.
    ///
    /// [`remove_all`]: OwnedSockets::remove_all
    fn bind(&self, path: &Path) -> Result<UnixListener> {
        let mut files = self.files.lock().expect("socket list poisoned");
        let listener = UnixListener::bind(path).with_context(|| format!("binding {}", path.display()))?;
        let meta = std::fs::symlink_metadata(path).with_context(|| format!("{} after binding", path.display()))?;
        files.push((path.to_path_buf(), meta.dev(), meta.ino()));
        Ok(listener)
    }

    /// Remove every socket file still ours; returns the paths removed.
    pub fn remove_all(&self) -> Vec<PathBuf> {
        let mut removed = Vec::new();
        for (path, dev, ino) in std::mem::take(&mut *self.files.lock().expect("socket list poisoned")) {
            let ours = std::fs::symlink_metadata(&path).is_ok_and(|m| m.dev() == dev && m.ino() == ino);
            if !ours {
                warn!(socket = %path.display(), "socket file replaced or gone; leaving it");
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => removed.push(path),
                Err(e) => warn!(socket = %path.display(), error = %e, "cannot remove the socket file"),
            }
        }
        removed
    }
}

/// Bind the socket, replacing a stale one left by a previous agent, and list it in `owned`.
pub fn bind(socket: &Path, mode: u32, owned: &OwnedSockets) -> Result<UnixListener> {
    if let Some(dir) = socket.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(socket) {
        if !meta.file_type().is_socket() {
            bail!("{} exists and is not a socket", socket.display());
        }
        if UnixStream::connect(socket).is_ok() {
            bail!("another agent is already listening on {}", socket.display());
        }
        std::fs::remove_file(socket)?;
    }
    let listener = owned.bind(socket)?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

/// What the agent answers, in the operator protocol, to an operator request on its datapath socket.
pub const DATAPATH_SOCKET_ANSWER: &str = "this is the agent's datapath socket (--socket), where CCP datapaths \
     connect, not its operator socket; use the path given to --operator-socket";

/// Whether the first bytes of a connection are a Cap'n Proto segment table rather than a CCP
/// header: a segment count below 2^16 makes the CCP length field (bytes 2-3) zero, which no
/// CCP message has, and the first segment is not empty.
fn looks_like_capnp(first: &[u8]) -> bool {
    first.len() >= 8
        && u16::from_le_bytes([first[2], first[3]]) == 0
        && u32::from_le_bytes([first[4], first[5], first[6], first[7]]) > 0
}

/// One flow of a connection: its controller, its record in the registry (which also holds its
/// endpoints) and what it last saw of the registry, and its Python algorithm's troubles so far.
struct ConnectionFlow {
    ctl: FlowController,
    record: Arc<FlowRecord>,
    generation: u64,
    policy: Option<Arc<Policy>>,
    /// Boxed, as few flows have any: a flow's memory is budgeted (tests/flow_memory.rs).
    python: Option<Box<PythonCounts>>,
}

impl ConnectionFlow {
    /// Add what its Python algorithm's last call counted.
    fn claim_python_counts(&mut self) {
        let counted = python_guard::take_counts();
        if !counted.is_zero() {
            **self.python.get_or_insert_with(Box::default) += counted;
        }
    }

    fn python_counts(&self) -> PythonCounts {
        self.python.as_deref().copied().unwrap_or_default()
    }
}

struct Connection {
    agent: Arc<Agent>,
    datapath: u64,
    /// Answers not yet written: everything answered to one read leaves in one write.
    queued: Vec<u8>,
    /// Each boxed, so that the table's spare slots hold a pointer rather than a controller.
    flows: SidTable<ConnectionFlow>,
    /// Programs installed on this datapath, by uid.
    installed: HashSet<u32>,
}

/// Why a connection's [`Connection::run`] returned.
enum Ended {
    /// The datapath went away, or its stream cannot be framed; says why.
    Closed(String),
    /// A operator client connected to the datapath socket and has been told so.
    OperatorClient,
}

impl Connection {
    fn new(agent: Arc<Agent>, datapath: u64) -> Self {
        Self { agent, datapath, queued: Vec::new(), flows: SidTable::new(), installed: HashSet::new() }
    }

    /// Serve until the datapath goes away: read what it sent, answer it in one write to `out`.
    fn run(&mut self, input: &mut impl Read, out: &mut impl Write) -> Ended {
        let mut frames = FrameReader::new();
        let mut framed = false;
        loop {
            match frames.read_from(input) {
                Ok(0) => return Ended::Closed("closed".into()),
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Ended::Closed(format!("read error: {e}")),
            }
            // Before the first frame, every byte received is still unread.
            if !framed && looks_like_capnp(frames.unread()) {
                warn!(datapath = self.datapath, "a operator client connected to the datapath socket; telling it which socket to use");
                let _ = out.write_all(&crate::operator::error_response(DATAPATH_SOCKET_ANSWER));
                return Ended::OperatorClient;
            }
            loop {
                match frames.next_frame() {
                    Ok(Some(frame)) => {
                        framed = true;
                        self.on_frame(frame);
                    }
                    Ok(None) => break,
                    Err(e) => {
                        error!(datapath = self.datapath, error = %e, "unrecoverable framing error");
                        self.flush(out);
                        return Ended::Closed(format!("framing error: {e}"));
                    }
                }
            }
            self.flush(out);
        }
    }

    fn flush(&mut self, out: &mut impl Write) {
        if self.queued.is_empty() {
            return;
        }
        if let Err(e) = out.write_all(&self.queued) {
            error!(datapath = self.datapath, error = %e, "failed to answer the datapath");
        }
        self.queued.clear();
    }

    fn on_frame(&mut self, frame: &[u8]) {
        let msg = match wire::decode(frame) {
            Ok((msg, _)) => msg,
            Err(e) => {
                return error!(datapath = self.datapath, error = %e, "rejected malformed message")
            }
        };
        if let Err(e) = self.on_message(msg) {
            error!(datapath = self.datapath, error = %e, "failed to answer the datapath");
        }
    }

    fn on_message(&mut self, msg: Msg) -> Result<()> {
        match msg {
            Msg::Ready(_) => {
                // A (re)started datapath: its program table and flows are gone.
                self.forget_flows();
                self.installed.clear();
                self.install(&Arc::clone(&self.agent.simple.program))
            }
            Msg::Create(c) => {
                if self.installed.is_empty() {
                    self.install(&Arc::clone(&self.agent.simple.program))?;
                }
                let key = self.key(c.sid);
                let endpoints = Endpoints {
                    src: ip(c.src_ip).into(),
                    sport: c.src_port as u16,
                    dst: ip(c.dst_ip).into(),
                    dport: c.dst_port as u16,
                };
                let registry = &self.agent.registry;
                let generation = registry.generation();
                let pinned = registry.pinned_for(key, &endpoints);
                let policy = registry.policy();
                let requested = c.cong_alg.trim_matches(char::from(0)).to_string();
                let mut start = match (&pinned, flow::instantiate(&requested)) {
                    (Some(spec), _) => Start::plain(StartFrom::Pinned, spec, "a pin covers the flow"),
                    (None, Ok(_)) if !requested.is_empty() => {
                        Start::plain(StartFrom::Datapath, &requested, "the datapath asked for it")
                    }
                    _ => match &policy {
                        // The destination's memory, else the policy's initial algorithm.
                        Some(p) => registry.memory().start(endpoints.dst, p.memory(), p.initial(), |a| {
                            a == p.initial() || p.algorithms().iter().any(|x| x == a)
                        }),
                        None => Start::plain(StartFrom::Algorithm, &self.agent.default_algorithm, "no policy: --algorithm"),
                    },
                };
                let instance = match flow::instantiate(&start.spec) {
                    // What the memory remembers ran before; should it fail now, start as if
                    // nothing were remembered.
                    Err(e) if start.from == StartFrom::Memory => {
                        let initial = policy.as_ref().map_or(self.agent.default_algorithm.as_str(), |p| p.initial());
                        start.reason = format!("{}, which fails now ({e:#})", start.reason);
                        start.from = StartFrom::Initial;
                        start.spec = initial.to_string();
                        flow::instantiate(initial)?
                    }
                    other => other?,
                };
                let spec = start.spec.as_str();
                let name = instance.name().to_string();
                let info = DatapathInfo {
                    sid: c.sid,
                    mss_bytes: c.mss,
                    init_cwnd_bytes: c.init_cwnd,
                    src_ip: c.src_ip,
                    src_port: c.src_port as u16,
                    dst_ip: c.dst_ip,
                    dst_port: c.dst_port as u16,
                };
                let (mut ctl, answer) =
                    FlowController::new(instance, info, &self.agent.simple, &self.agent.programs)?;
                if let Some(p) = &policy {
                    let mut selector = Selector::new(Arc::clone(p));
                    // The flow may start on something other than the policy's initial algorithm.
                    selector.note_handover(spec, 0);
                    ctl.set_selector(selector);
                }
                if let Some(spec) = &pinned {
                    ctl.pin(Some(spec))?;
                }
                info!(
                    datapath = self.datapath, sid = c.sid, algorithm = %name, mss = c.mss,
                    init_cwnd = c.init_cwnd, src = %endpoints.src, sport = c.src_port,
                    dst = %endpoints.dst, dport = c.dst_port,
                    policy = policy.as_ref().map(|p| p.name()), pinned = pinned.is_some(),
                    start = start.from.as_str(), start_reason = %start.reason, "flow created"
                );
                let record = registry.register(key, endpoints, &name);
                if let Some(ev) = &self.agent.events {
                    ev.flow(key, &endpoints, &name, c.mss, &start);
                }
                let mut entry = Box::new(ConnectionFlow { ctl, record, generation, policy, python: None });
                // A Python full-API algorithm's on_create / new_flow may have raised.
                entry.claim_python_counts();
                self.flows.insert(c.sid, entry);
                self.answer(c.sid, answer)
            }
            Msg::Measure(m) if m.fields.is_empty() => {
                if let Some(entry) = self.flows.remove(m.sid) {
                    self.closed(m.sid, &entry);
                }
                Ok(())
            }
            Msg::Measure(m) => {
                let key = self.key(m.sid);
                let agent = &*self.agent;
                let Some(entry) = self.flows.get_mut(m.sid) else {
                    debug!(datapath = self.datapath, sid = m.sid, "report for an unknown flow");
                    return Ok(());
                };
                if m.program_uid != entry.ctl.program_uid(&agent.simple) {
                    warn!(sid = m.sid, program = m.program_uid, "report from a program not the flow's");
                    return Ok(());
                }
                let pinned = refresh(entry, key, &agent.registry)?;
                let reported = entry.ctl.on_report(&m.fields, &agent.simple)?;
                entry.claim_python_counts();
                let ctl = &entry.ctl;
                for s in pinned.iter().chain(reported.handover.iter()) {
                    log_handover(agent, key, s);
                }
                if let Some(ev) = &agent.events {
                    let (cwnd, rate) = (ctl.cwnd_bytes(), ctl.pacing_rate_bytes_per_s());
                    ev.report(key, ctl.name(), &reported.measurement, cwnd, rate, entry.python_counts());
                }
                agent.registry.update(&entry.record, ctl.name(), ctl.features(), ctl.reports, ctl.handovers, ctl.cwnd_bytes());
                debug!(sid = m.sid, fields = ?m.fields, answer = ?reported.answer, "report answered");
                self.answer(m.sid, reported.answer)
            }
            other => {
                warn!(datapath = self.datapath, msg = ?other.msg_type(), "unexpected message from a datapath");
                Ok(())
            }
        }
    }

    fn key(&self, sid: u32) -> FlowId {
        FlowId { datapath: self.datapath, sid }
    }

    fn closed(&self, sid: u32, entry: &ConnectionFlow) {
        let key = self.key(sid);
        let ctl = &entry.ctl;
        // A flow the selector decided for tells the memory what its destination ended on.
        let registry = &self.agent.registry;
        let endpoints = registry.remove(key);
        let remembered = match (ctl.memory_vote(), registry.policy(), endpoints) {
            (Some(spec), Some(policy), Some(endpoints)) => {
                registry.memory().vote(endpoints.dst, spec, policy.memory()).map(|p| format!("{p} {spec}"))
            }
            _ => None,
        };
        info!(
            datapath = self.datapath, sid, algorithm = ctl.name(), reports = ctl.reports,
            handovers = ctl.handovers, cwnd = ctl.cwnd_bytes(), remembered, "flow closed"
        );
        if let Some(ev) = &self.agent.events {
            ev.close(key, ctl.name(), ctl.reports, ctl.handovers, entry.python_counts());
        }
    }

    /// Drop every flow of this datapath (it restarted or went away).
    fn forget_flows(&mut self) {
        for (sid, entry) in std::mem::take(&mut self.flows).drain() {
            self.closed(sid, &entry);
        }
    }

    fn install(&mut self, program: &CompiledProgram) -> Result<()> {
        self.queued.extend_from_slice(&program.install_message);
        self.installed.insert(program.uid);
        debug!(datapath = self.datapath, program = %program.name, uid = program.uid, "program installed");
        Ok(())
    }

    fn answer(&mut self, sid: u32, answer: Answer) -> Result<()> {
        match answer {
            Answer::ChangeProgram { program, updates } => {
                if !self.installed.contains(&program.uid) {
                    self.install(&program)?;
                }
                self.send(&Msg::ChangeProg(wire::ChangeProg { sid, program_uid: program.uid, updates }))
            }
            Answer::Update(updates) => self.send(&Msg::UpdateFields(wire::UpdateFields { sid, updates })),
        }
    }

    fn send(&mut self, msg: &Msg) -> Result<()> {
        msg.encode_into(&mut self.queued)?;
        Ok(())
    }
}

/// Apply what changed in the registry since the flow last looked: its pin (handing over at once)
/// and the policy its selector follows.
fn refresh(entry: &mut ConnectionFlow, key: FlowId, registry: &Registry) -> Result<Option<Handover>> {
    let generation = registry.generation();
    if generation == entry.generation {
        return Ok(None);
    }
    entry.generation = generation;
    let policy = registry.policy();
    if let Some(p) = &policy {
        let same = entry.policy.as_ref().is_some_and(|old| Arc::ptr_eq(old, p));
        if !same {
            match entry.ctl.selector_mut() {
                Some(sel) => sel.set_policy(Arc::clone(p)),
                None => entry.ctl.set_selector(Selector::new(Arc::clone(p))),
            }
            entry.policy = policy.clone();
        }
    }
    // The flow's endpoints from its own record: no lookup in the registry's table.
    let pinned = registry.pinned_for(key, &entry.record.endpoints);
    entry.ctl.pin(pinned.as_deref())
}

fn log_handover(agent: &Agent, key: FlowId, s: &Handover) {
    info!(
        datapath = key.datapath, sid = key.sid, from = %s.from, to = %s.to, kind = s.kind.as_str(),
        reason = %s.reason, cwnd = s.cwnd_bytes, pacing_rate = s.pacing_rate_bytes_per_s,
        features = %s.features.as_ref().map_or_else(String::new, |f| serde_json::to_string(f).unwrap_or_default()),
        "flow handed over to another algorithm"
    );
    if let Some(ev) = &agent.events {
        ev.handover(key, s);
    }
}

fn ip(addr: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(addr)
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::atomic::Ordering;

    use ccswitch_ccp::agent_link::Counted;
    use ccswitch_protocol::wire::{Create, Measure, Ready};

    use super::*;

    /// READY, `flows` CREATEs, one report per flow (every third with a loss, every fifth with
    /// a timeout) and the close of the first flow, encoded as a datapath sends them.
    fn datapath_batch(agent: &Agent, flows: u32) -> Vec<u8> {
        use ccswitch_protocol::standard::report;
        let fields = agent.simple.program.report_names.len();
        let uid = agent.simple.program.uid;
        let mut batch = Vec::new();
        Msg::Ready(Ready { id: 1 }).encode_into(&mut batch).unwrap();
        for sid in 1..=flows {
            let create = Create { sid, init_cwnd: 14_480, mss: 1448, src_ip: 1, src_port: 80, dst_ip: 2, dst_port: 40_000 + sid, cong_alg: String::new() };
            Msg::Create(create).encode_into(&mut batch).unwrap();
        }
        for sid in 1..=flows {
            let mut fields = vec![0; fields];
            fields[report::ACKED] = 14_480;
            fields[report::RTT] = 20_000;
            fields[report::LOST] = u64::from(sid % 3 == 0);
            fields[report::TIMEOUT] = u64::from(sid % 5 == 0);
            Msg::Measure(Measure { sid, program_uid: uid, fields }).encode_into(&mut batch).unwrap();
        }
        Msg::Measure(Measure { sid: 1, program_uid: 0, fields: vec![] }).encode_into(&mut batch).unwrap();
        batch
    }

    fn decode_all(mut bytes: &[u8]) -> Vec<Msg> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (msg, used) = wire::decode(bytes).unwrap();
            out.push(msg);
            bytes = &bytes[used..];
        }
        out
    }

    /// What a datapath reads back from the agent's socket for `batch`.
    fn answers_over_the_socket(agent: &Arc<Agent>, batch: &[u8]) -> Vec<u8> {
        let (mut datapath, sock) = UnixStream::pair().unwrap();
        datapath.write_all(batch).unwrap();
        datapath.shutdown(std::net::Shutdown::Write).unwrap();
        let mut conn = Connection::new(Arc::clone(agent), 1);
        conn.run(&mut sock.try_clone().unwrap(), &mut sock.try_clone().unwrap());
        conn.forget_flows();
        drop((conn, sock));
        let mut answers = Vec::new();
        datapath.read_to_end(&mut answers).unwrap();
        answers
    }

    #[test]
    fn an_in_process_exchange_answers_as_the_socket_does() {
        let agent = Agent::new("cubic".into(), Arc::new(Registry::new(None)), None).unwrap();
        let batch = datapath_batch(&agent, 30);
        let over_socket = answers_over_the_socket(&agent, &batch);
        let mut conn = agent.connect_in_process();
        let mut in_process = Vec::new();
        ccswitch_ccp::agent_link::InProcessConnection::exchange(&mut conn, &batch, &mut in_process).unwrap();
        assert!(!over_socket.is_empty());
        assert_eq!(decode_all(&in_process), decode_all(&over_socket));
        assert_eq!(in_process, over_socket, "byte for byte");
    }

    #[test]
    fn an_in_process_connection_answers_message_by_message_as_in_one_batch() {
        let agent = Agent::new("reno".into(), Arc::new(Registry::new(None)), None).unwrap();
        let batch = datapath_batch(&agent, 12);
        let mut whole = Vec::new();
        ccswitch_ccp::agent_link::InProcessConnection::exchange(&mut agent.connect_in_process(), &batch, &mut whole).unwrap();
        let mut conn = agent.connect_in_process();
        let mut pieces = Vec::new();
        let mut rest = &batch[..];
        while !rest.is_empty() {
            let len = wire::peek_header(rest).unwrap().len;
            let before = pieces.len();
            ccswitch_ccp::agent_link::InProcessConnection::exchange(&mut conn, &rest[..len], &mut pieces).unwrap();
            // Answers are appended, never overwritten.
            assert!(pieces.len() >= before);
            rest = &rest[len..];
        }
        assert_eq!(decode_all(&pieces), decode_all(&whole));
    }

    #[test]
    fn an_in_process_connection_lists_its_flows_until_dropped_and_fails_for_good_on_broken_framing() {
        let registry = Arc::new(Registry::new(None));
        let agent = Agent::new("reno".into(), Arc::clone(&registry), None).unwrap();
        let mut conn = agent.connect_in_process();
        let mut answers = Vec::new();
        let batch = datapath_batch(&agent, 5);
        ccswitch_ccp::agent_link::InProcessConnection::exchange(&mut conn, &batch, &mut answers).unwrap();
        // Five created, the first closed.
        assert_eq!(registry.list().len(), 4);
        drop(conn);
        assert!(registry.list().is_empty(), "a dropped connection's flows are gone");

        let mut conn = agent.connect_in_process();
        // A length below the header's: no framing can follow.
        let garbage = [0u8, 0, 2, 0, 0, 0, 0, 0];
        let err = ccswitch_ccp::agent_link::InProcessConnection::exchange(&mut conn, &garbage, &mut answers).unwrap_err();
        assert!(err.contains("framing"), "{err}");
        assert!(ccswitch_ccp::agent_link::InProcessConnection::exchange(&mut conn, &batch, &mut answers).is_err());
    }

    #[test]
    fn a_batch_of_a_hundred_reports_is_read_in_one_call_and_answered_in_one_write() {
        let agent = Agent::new("reno".into(), Arc::new(Registry::new(None)), None).unwrap();
        let (mut datapath, sock) = UnixStream::pair().unwrap();
        let fields = agent.simple.program.report_names.len();
        let uid = agent.simple.program.uid;
        let mut batch = Vec::new();
        Msg::Ready(Ready { id: 1 }).encode_into(&mut batch).unwrap();
        for sid in 1..=100 {
            let create = Create { sid, init_cwnd: 14_480, mss: 1448, src_ip: 1, src_port: 80, dst_ip: 2, dst_port: 40_000, cong_alg: String::new() };
            Msg::Create(create).encode_into(&mut batch).unwrap();
        }
        for sid in 1..=100 {
            let mut report = vec![0; fields];
            report[ccswitch_protocol::standard::report::ACKED] = 14_480;
            Msg::Measure(Measure { sid, program_uid: uid, fields: report }).encode_into(&mut batch).unwrap();
        }
        datapath.write_all(&batch).unwrap();
        datapath.shutdown(std::net::Shutdown::Write).unwrap();

        let mut input = Counted::new(sock.try_clone().unwrap());
        let mut out = Counted::new(sock);
        let mut conn = Connection::new(Arc::clone(&agent), 1);
        assert!(matches!(conn.run(&mut input, &mut out), Ended::Closed(reason) if reason == "closed"));
        // One read for the batch, one that finds the end of the stream.
        assert_eq!(input.reads.load(Ordering::Relaxed), 2);
        assert_eq!(out.writes.load(Ordering::Relaxed), 1);
        drop((conn, input, out));

        let mut frames = FrameReader::new();
        while frames.read_from(&mut datapath).unwrap() > 0 {}
        let mut answers = Vec::new();
        while let Some(frame) = frames.next_frame().unwrap() {
            answers.push(wire::decode(frame).unwrap().0);
        }
        let count = |t| answers.iter().filter(|m| m.msg_type() == t).count();
        assert_eq!(answers.len(), 201, "{answers:?}");
        assert_eq!(count(wire::MsgType::InstallExpr), 1);
        assert_eq!(count(wire::MsgType::ChangeProg), 100);
        assert_eq!(count(wire::MsgType::UpdateFields), 100);
    }
}
