//! The IPC server: one thread per connected datapath, one controller per flow.
//!
//! Programs belong to a datapath (libccp keeps them in a per-datapath table), so they are
//! installed when a datapath says READY, or before its first CREATE if it never did. A
//! message that cannot be decoded is logged and skipped; only a broken framing (a length
//! that cannot be right) ends that datapath's connection. Other datapaths are unaffected.

use std::collections::{HashMap, HashSet};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use ccswitch_ccp::wire::{self, FrameReader, Msg};
use tracing::{debug, error, info, warn};

use crate::flow::{self, Answer, FlowController, ProgramCache};
use crate::program::{CompiledProgram, SimpleProgram};

pub struct Agent {
    simple: SimpleProgram,
    programs: ProgramCache,
    /// Algorithm spec for flows whose datapath does not ask for a known one.
    default_algorithm: String,
    next_datapath_id: AtomicU64,
}

impl Agent {
    pub fn new(default_algorithm: String) -> Result<Arc<Self>> {
        Ok(Arc::new(Self {
            simple: SimpleProgram::compile()?,
            programs: ProgramCache::default(),
            default_algorithm,
            next_datapath_id: AtomicU64::new(1),
        }))
    }

    pub fn serve(self: Arc<Self>, socket: &Path, mode: u32) -> Result<()> {
        let listener = bind(socket, mode)?;
        info!(socket = %socket.display(), algorithm = %self.default_algorithm, "agent listening");
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

    fn serve_datapath(&self, datapath: u64, stream: UnixStream) {
        info!(datapath, "datapath connected");
        let mut conn = Connection {
            agent: self,
            datapath,
            out: match stream.try_clone() {
                Ok(s) => s,
                Err(e) => return error!(datapath, error = %e, "cannot clone the stream"),
            },
            flows: HashMap::new(),
            installed: HashSet::new(),
        };
        let reason = conn.run(stream);
        info!(datapath, flows = conn.flows.len(), reason = %reason, "datapath disconnected");
    }
}

/// Bind the socket, replacing a stale one left by a previous agent.
fn bind(socket: &Path, mode: u32) -> Result<UnixListener> {
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
    let listener =
        UnixListener::bind(socket).with_context(|| format!("binding {}", socket.display()))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(mode))?;
    Ok(listener)
}

struct Connection<'a> {
    agent: &'a Agent,
    datapath: u64,
    out: UnixStream,
    flows: HashMap<u32, FlowController>,
    /// Programs installed on this datapath, by uid.
    installed: HashSet<u32>,
}

impl Connection<'_> {
    /// Serve until the datapath goes away; returns why.
    fn run(&mut self, mut stream: UnixStream) -> String {
        let mut frames = FrameReader::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match stream.read(&mut buf) {
                Ok(0) => return "closed".into(),
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return format!("read error: {e}"),
            };
            frames.push(&buf[..n]);
            loop {
                match frames.next_frame() {
                    Ok(Some(frame)) => self.on_frame(&frame),
                    Ok(None) => break,
                    Err(e) => {
                        error!(datapath = self.datapath, error = %e, "unrecoverable framing error");
                        return format!("framing error: {e}");
                    }
                }
            }
        }
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
                self.flows.clear();
                self.installed.clear();
                self.install(&Arc::clone(&self.agent.simple.program))
            }
            Msg::Create(c) => {
                if self.installed.is_empty() {
                    self.install(&Arc::clone(&self.agent.simple.program))?;
                }
                let requested = c.cong_alg.trim_matches(char::from(0)).to_string();
                let instance = match flow::instantiate(&requested) {
                    Ok(a) if !requested.is_empty() => a,
                    _ => flow::instantiate(&self.agent.default_algorithm)?,
                };
                let name = instance.name().to_string();
                let (flow, answer) = FlowController::new(
                    instance, c.mss, c.init_cwnd, &self.agent.simple, &self.agent.programs,
                )?;
                info!(
                    datapath = self.datapath, sid = c.sid, algorithm = %name, mss = c.mss,
                    init_cwnd = c.init_cwnd, src = %ip(c.src_ip), sport = c.src_port,
                    dst = %ip(c.dst_ip), dport = c.dst_port, "flow created"
                );
                self.flows.insert(c.sid, flow);
                self.answer(c.sid, answer)
            }
            Msg::Measure(m) if m.fields.is_empty() => {
                if let Some(flow) = self.flows.remove(&m.sid) {
                    info!(
                        datapath = self.datapath, sid = m.sid, algorithm = flow.name(),
                        reports = flow.reports, cwnd = flow.cwnd_bytes(), "flow closed"
                    );
                }
                Ok(())
            }
            Msg::Measure(m) => {
                let Some(flow) = self.flows.get_mut(&m.sid) else {
                    debug!(datapath = self.datapath, sid = m.sid, "report for an unknown flow");
                    return Ok(());
                };
                if m.program_uid != flow.program_uid(&self.agent.simple) {
                    warn!(sid = m.sid, program = m.program_uid, "report from a program not the flow's");
                    return Ok(());
                }
                let answer = flow.on_report(&m.fields, &self.agent.simple)?;
                debug!(sid = m.sid, fields = ?m.fields, answer = ?answer, "report answered");
                self.answer(m.sid, answer)
            }
            other => {
                warn!(datapath = self.datapath, msg = ?other.msg_type(), "unexpected message from a datapath");
                Ok(())
            }
        }
    }

    fn install(&mut self, program: &CompiledProgram) -> Result<()> {
        self.out.write_all(&program.install_message)?;
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
        self.out.write_all(&msg.encode()?)?;
        Ok(())
    }
}

fn ip(addr: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(addr)
}
