//! The operator interface: a unix socket through which an operator (or `ccswitch operator`)
//! lists flows, pins flows, ports and prefixes to algorithms, loads a policy, and lists or
//! clears the per-destination memory (crate::memory).
//!
//! Requests and responses are Cap'n Proto messages (schema: proto/operator.capnp,
//! shared with the Python client), each in the standard stream framing: a segment table
//! (segment count - 1, then each segment's size in words, all u32 little endian, padded to a
//! word) followed by the segments. Every request gets exactly one response, in order, and a
//! connection carries any number of requests.
//!
//! Errors are answers, not disconnections: a request that is framed correctly but is not a
//! valid Request (garbage inside the frame, an unknown union member, a bad prefix, an unknown
//! algorithm or flow, a policy that does not parse) gets `Response.error` saying what is
//! wrong, and the connection goes on. Only a broken framing (a segment table announcing more
//! than [`MAX_REQUEST_BYTES`] or more than 64 segments, or the peer closing mid-message) ends
//! the connection, after an error response, since the next message boundary is then unknown.
//!
//! One thread accepts, one thread serves each client (at most [`MAX_CLIENTS`] at a time). All
//! state lives in the shared [`Registry`]; [`handle`] is the whole protocol on bytes.

use std::io::{self, ErrorKind, Read, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use capnp::message::{Builder, ReaderOptions};
use capnp::serialize;
use tracing::{debug, error, info, warn};

use crate::memory::{self, MemorySettings, MemorySnapshot, Prefix};
use crate::registry::{FlowId, FlowSnapshot, PinTarget, Registry};
use crate::server::OwnedSockets;
use crate::selector::features::Features;
use crate::selector::policy::Policy;

#[allow(clippy::all, unused_qualifications)]
pub mod operator_capnp {
    include!(concat!(env!("OUT_DIR"), "/operator_capnp.rs"));
}

use operator_capnp::{memory_scope, policy_source, request, response, target};

/// Largest request accepted, segment table included (1 MiB: a policy file is a few KiB).
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// Most segments a request may have (the Cap'n Proto library's own limit is 512).
const MAX_SEGMENTS: usize = 64;
const BYTES_PER_WORD: usize = 8;
/// Clients served at once; more are answered with an error and closed.
pub const MAX_CLIENTS: usize = 16;
/// How long to wait for a misbehaving client's remaining bytes before closing on it.
const DRAIN_TIMEOUT: Duration = Duration::from_millis(200);

/// Listen on `path` (replacing a stale socket, with permissions `mode`; listed in `owned`) and serve clients
/// from a thread of its own. Returns once the socket is bound.
pub fn serve(registry: Arc<Registry>, path: &Path, mode: u32, owned: &OwnedSockets) -> Result<()> {
    let listener = crate::server::bind(path, mode, owned).context("operator socket")?;
    info!(socket = %path.display(), "operator interface listening");
    let clients = Arc::new(AtomicUsize::new(0));
    std::thread::Builder::new().name("operator".into()).spawn(move || {
        for conn in listener.incoming() {
            match conn {
                Ok(stream) => accept(&registry, &clients, stream),
                Err(e) => error!(error = %e, "operator: accept failed"),
            }
        }
    })?;
    Ok(())
}

fn accept(registry: &Arc<Registry>, clients: &Arc<AtomicUsize>, mut stream: UnixStream) {
    if clients.fetch_add(1, Ordering::AcqRel) >= MAX_CLIENTS {
        clients.fetch_sub(1, Ordering::AcqRel);
        warn!(max = MAX_CLIENTS, "operator: too many clients, refusing one");
        let msg = format!("too many operator clients (at most {MAX_CLIENTS} at a time)");
        let _ = stream.write_all(&error_response(&msg));
        drain_and_close(stream);
        return;
    }
    let (registry, clients) = (Arc::clone(registry), Arc::clone(clients));
    let spawned = std::thread::Builder::new().name("operator-client".into()).spawn(move || {
        let reason = serve_client(&registry, stream);
        clients.fetch_sub(1, Ordering::AcqRel);
        debug!(reason = %reason, "operator client gone");
    });
    if let Err(e) = spawned {
        error!(error = %e, "operator: cannot start a client thread");
    }
}

/// Answer requests until the client goes away or breaks the framing; returns why it ended.
fn serve_client(registry: &Registry, mut stream: UnixStream) -> String {
    loop {
        let request = match read_frame(&mut stream) {
            Ok(Some(bytes)) => bytes,
            Ok(None) => return "closed".into(),
            Err(FrameError::Io(e)) => return format!("read error: {e}"),
            Err(FrameError::Broken(why)) => {
                warn!(error = %why, "operator: broken framing, closing the connection");
                let msg = format!("malformed request framing: {why}; closing the connection");
                let _ = stream.write_all(&error_response(&msg));
                drain_and_close(stream);
                return format!("framing error: {why}");
            }
        };
        let response = handle(registry, &request);
        if let Err(e) = stream.write_all(&response) {
            return format!("write error: {e}");
        }
    }
}

/// Close after an error response without losing it: a unix socket closed with unread data
/// resets the connection, and the peer's pending read fails before it sees the response. So
/// stop writing, then discard what the peer already sent (a bounded amount, briefly).
pub(crate) fn drain_and_close(mut stream: UnixStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let _ = stream.set_read_timeout(Some(DRAIN_TIMEOUT));
    let mut sink = [0u8; 4096];
    let mut budget = MAX_REQUEST_BYTES;
    while budget > 0 {
        match stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(n) => budget = budget.saturating_sub(n),
        }
    }
}

#[derive(Debug)]
enum FrameError {
    Io(io::Error),
    /// The bytes cannot be a framed message (within our limits).
    Broken(String),
}

/// Read one framed message (segment table and segments) whole. `Ok(None)` at a clean end of
/// stream, before the first byte of a message.
fn read_frame(r: &mut impl Read) -> Result<Option<Vec<u8>>, FrameError> {
    let mut first = [0u8; 4];
    if !read_all(r, &mut first, true)? {
        return Ok(None);
    }
    let segments = u64::from(u32::from_le_bytes(first)) + 1;
    if segments > MAX_SEGMENTS as u64 {
        return Err(FrameError::Broken(format!(
            "the segment table announces {segments} segments (at most {MAX_SEGMENTS}); \
             is this a Cap'n Proto message in the standard (unpacked) stream framing?"
        )));
    }
    let segments = segments as usize;
    // The table: the count and one size per segment, u32 each, padded to a whole word.
    let table_bytes = (4 * (1 + segments)).next_multiple_of(BYTES_PER_WORD);
    let mut frame = vec![0u8; table_bytes];
    frame[..4].copy_from_slice(&first);
    read_all(r, &mut frame[4..], false)?;
    let words: u64 = frame[4..4 + 4 * segments]
        .chunks_exact(4)
        .map(|c| u64::from(u32::from_le_bytes(c.try_into().expect("4 bytes"))))
        .sum();
    let total = table_bytes as u64 + words * BYTES_PER_WORD as u64;
    if total > MAX_REQUEST_BYTES as u64 {
        return Err(FrameError::Broken(format!(
            "the request announces {total} bytes, more than the limit of {MAX_REQUEST_BYTES}"
        )));
    }
    frame.resize(total as usize, 0);
    read_all(r, &mut frame[table_bytes..], false)?;
    Ok(Some(frame))
}

/// Fill `buf`. Returns false if the stream ended before the first byte and `eof_ok`.
fn read_all(r: &mut impl Read, buf: &mut [u8], eof_ok: bool) -> Result<bool, FrameError> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) if got == 0 && eof_ok => return Ok(false),
            Ok(0) => {
                return Err(FrameError::Broken(
                    "the connection closed in the middle of a message".into(),
                ))
            }
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(true)
}

/// The protocol: one framed request in, one framed response out. Never fails; whatever is
/// wrong with the request is the response's error text.
pub fn handle(registry: &Registry, request: &[u8]) -> Vec<u8> {
    match decode_and_run(registry, request) {
        Ok(reply) => encode(&reply),
        Err(e) => {
            debug!(error = %format!("{e:#}"), "operator: request refused");
            error_response(&format!("{e:#}"))
        }
    }
}

/// What a successful request answers.
enum Reply {
    Ok(String),
    Flows(Vec<FlowSnapshot>),
    Pins(Vec<(PinTarget, String, usize)>),
    Policy(Option<Arc<Policy>>),
    Memory(MemoryListing),
}

/// The destination memory as `listMemory` answers it.
struct MemoryListing {
    /// Ok if it works, else why not.
    state: Result<(), &'static str>,
    settings: MemorySettings,
    entries: Vec<MemorySnapshot>,
}

fn decode_and_run(registry: &Registry, bytes: &[u8]) -> Result<Reply> {
    let options = *ReaderOptions::new().traversal_limit_in_words(Some(MAX_REQUEST_BYTES / BYTES_PER_WORD));
    let mut slice = bytes;
    let message = serialize::read_message(&mut slice, options)
        .map_err(|e| anyhow!("malformed request: not a Cap'n Proto message ({e})"))?;
    if !slice.is_empty() {
        bail!("malformed request: {} bytes after the end of the message", slice.len());
    }
    let req = message
        .get_root::<request::Reader>()
        .map_err(|e| anyhow!("malformed request: {e}"))?;
    run(registry, req).map_err(|e| {
        // Schema violations inside the message read as Cap'n Proto errors; say so.
        match e.downcast_ref::<capnp::Error>() {
            Some(c) => anyhow!("malformed request: {c}"),
            None => e,
        }
    })
}

fn run(registry: &Registry, req: request::Reader) -> Result<Reply> {
    use request::Which;
    let which = req.which().map_err(|capnp::NotInSchema(n)| {
        anyhow!(
            "unknown request (member {n} of the Request union); this agent knows listFlows, \
             pin, unpin, loadPolicy, listPins, getPolicy, listMemory and clearMemory"
        )
    })?;
    match which {
        Which::ListFlows(()) => Ok(Reply::Flows(registry.list())),
        Which::Pin(pin) => {
            let pin = pin?;
            let target = read_target(pin.get_target()?)?;
            let algorithm = read_text(pin.get_algorithm()?, "algorithm")?;
            if algorithm.is_empty() {
                bail!("pin {target}: the algorithm is empty");
            }
            let matched = registry.pin(target.clone(), algorithm).with_context(|| format!("pin {target}"))?;
            info!(target = %target, algorithm, flows = matched, "operator: pinned");
            Ok(Reply::Ok(format!("pinned {target} to {algorithm} ({} now)", flows(matched))))
        }
        Which::Unpin(target) => {
            let target = read_target(target?)?;
            let matched = registry.unpin(&target)?;
            info!(target = %target, flows = matched, "operator: unpinned");
            Ok(Reply::Ok(format!("unpinned {target} ({} now)", flows(matched))))
        }
        Which::LoadPolicy(source) => load_policy(registry, source?),
        Which::ListPins(()) => {
            let pins = registry.pins();
            Ok(Reply::Pins(
                pins.into_iter()
                    .map(|(t, a)| {
                        let n = registry.count_matching(&t);
                        (t, a, n)
                    })
                    .collect(),
            ))
        }
        Which::GetPolicy(()) => Ok(Reply::Policy(registry.policy())),
        Which::ListMemory(()) => {
            let policy = registry.policy();
            let settings = policy.as_ref().map_or_else(MemorySettings::default, |p| p.memory().clone());
            Ok(Reply::Memory(MemoryListing {
                state: registry.memory().state(policy.as_ref().map(|p| p.memory())),
                entries: registry.memory().list(&settings),
                settings,
            }))
        }
        Which::ClearMemory(scope) => clear_memory(registry, scope?),
    }
}

fn clear_memory(registry: &Registry, scope: memory_scope::Reader) -> Result<Reply> {
    use memory_scope::Which;
    let which = scope.which().map_err(|capnp::NotInSchema(n)| {
        anyhow!("unknown memory scope (member {n} of the MemoryScope union); this agent knows all and prefix")
    })?;
    let within = match which {
        Which::All(()) => None,
        Which::Prefix(text) => match PinTarget::parse_prefix(read_text(text?, "prefix")?)? {
            PinTarget::Prefix(network, len) => Some(Prefix { network, len }),
            other => bail!("not a prefix: {other}"),
        },
    };
    let gone = registry.memory().clear(within.as_ref());
    let listed = match gone.len() {
        0 => String::new(),
        n if n <= 8 => format!(" ({})", gone.iter().map(Prefix::to_string).collect::<Vec<_>>().join(", ")),
        _ => format!(" ({}, ...)", gone[..8].iter().map(Prefix::to_string).collect::<Vec<_>>().join(", ")),
    };
    info!(within = within.map(|p| p.to_string()), forgotten = gone.len(), "operator: destination memory cleared");
    match (within, gone.len()) {
        (Some(w), 0) => bail!("the destination memory holds no prefix inside {w}"),
        (Some(w), n) => Ok(Reply::Ok(format!("forgot {} inside {w}{listed}", prefixes(n)))),
        (None, n) => Ok(Reply::Ok(format!("forgot all {}{listed}", prefixes(n)))),
    }
}

fn prefixes(n: usize) -> String {
    match n {
        1 => "1 prefix".into(),
        n => format!("{n} prefixes"),
    }
}

fn flows(n: usize) -> String {
    match n {
        1 => "1 flow".into(),
        n => format!("{n} flows"),
    }
}

fn read_text<'a>(t: capnp::text::Reader<'a>, what: &str) -> Result<&'a str> {
    t.to_str().map_err(|e| anyhow!("malformed request: {what} is not UTF-8 ({e})"))
}

fn read_target(t: target::Reader) -> Result<PinTarget> {
    use target::Which;
    let which = t.which().map_err(|capnp::NotInSchema(n)| {
        anyhow!("unknown pin target (member {n} of the Target union); this agent knows flow, port and prefix")
    })?;
    match which {
        Which::Flow(id) => {
            let id = id?;
            Ok(PinTarget::Flow(FlowId { datapath: id.get_datapath(), sid: id.get_sid() }))
        }
        Which::Port(0) => bail!("port 0 is not a port a flow can use"),
        Which::Port(p) => Ok(PinTarget::Port(p)),
        Which::Prefix(text) => PinTarget::parse_prefix(read_text(text?, "prefix")?),
    }
}

fn load_policy(registry: &Registry, source: policy_source::Reader) -> Result<Reply> {
    use policy_source::Which;
    let which = source.which().map_err(|capnp::NotInSchema(n)| {
        anyhow!("unknown policy source (member {n} of the PolicySource union); this agent knows spec and toml")
    })?;
    let policy = match which {
        Which::Spec(spec) => {
            let spec = read_text(spec?, "spec")?;
            Policy::load(spec)?
        }
        Which::Toml(text) => {
            let text = read_text(text?, "toml")?;
            Policy::parse(text, OPERATOR_ORIGIN)?
        }
    };
    let name = policy.name().to_string();
    registry.set_policy(Arc::new(policy));
    let all = registry.list();
    let pinned = all.iter().filter(|f| f.pinned.is_some()).count();
    info!(policy = %name, flows = all.len(), pinned, "operator: policy loaded");
    Ok(Reply::Ok(format!(
        "loaded policy {name} ({} to choose for, {pinned} pinned)",
        flows(all.len() - pinned)
    )))
}

/// Where a policy sent as text came from, for its error messages and its summary.
const OPERATOR_ORIGIN: &str = "sent through the operator interface";

fn encode(reply: &Reply) -> Vec<u8> {
    let mut message = Builder::new_default();
    let mut resp = message.init_root::<response::Builder>();
    match reply {
        Reply::Ok(text) => resp.set_ok(text.as_str()),
        Reply::Flows(flows) => {
            let mut list = resp.init_flows(flows.len() as u32);
            for (i, f) in flows.iter().enumerate() {
                write_flow(list.reborrow().get(i as u32), f);
            }
        }
        Reply::Pins(pins) => {
            let mut list = resp.init_pins(pins.len() as u32);
            for (i, (t, algorithm, n)) in pins.iter().enumerate() {
                let mut p = list.reborrow().get(i as u32);
                write_target(p.reborrow().init_target(), t);
                p.set_algorithm(algorithm.as_str());
                p.set_flows(*n as u32);
            }
        }
        Reply::Policy(policy) => {
            let mut out = resp.init_policy();
            out.set_loaded(policy.is_some());
            if let Some(p) = policy {
                out.set_name(p.name());
                out.set_description(p.description());
                out.set_origin(p.origin());
                out.set_summary(p.to_string().trim_end());
            }
        }
        Reply::Memory(m) => write_memory(resp.init_memory(), m),
    }
    serialize::write_message_to_words(&message)
}

fn write_memory(mut out: operator_capnp::memory_info::Builder, m: &MemoryListing) {
    out.set_enabled(m.state.is_ok());
    out.set_why(m.state.err().unwrap_or(""));
    out.set_prefix_v4(m.settings.prefix_v4);
    out.set_prefix_v6(m.settings.prefix_v6);
    out.set_half_life_s(m.settings.half_life_s);
    out.set_min_score(m.settings.min_score);
    out.set_capacity(m.settings.capacity.min(memory::MAX_CAPACITY) as u32);
    let mut list = out.init_entries(m.entries.len() as u32);
    for (i, e) in m.entries.iter().enumerate() {
        let mut entry = list.reborrow().get(i as u32);
        entry.set_prefix(e.prefix.to_string().as_str());
        entry.set_age_s(e.age.as_secs_f64());
        let mut scores = entry.init_scores(e.scores.len() as u32);
        for (j, (algorithm, score)) in e.scores.iter().enumerate() {
            let mut s = scores.reborrow().get(j as u32);
            s.set_algorithm(algorithm.as_str());
            s.set_score(*score);
        }
    }
}

fn write_flow(mut out: operator_capnp::flow_info::Builder, f: &FlowSnapshot) {
    out.set_datapath(f.key.datapath);
    out.set_sid(f.key.sid);
    out.set_src(f.endpoints.src.to_string().as_str());
    out.set_sport(f.endpoints.sport);
    out.set_dst(f.endpoints.dst.to_string().as_str());
    out.set_dport(f.endpoints.dport);
    out.set_algorithm(f.algorithm.as_str());
    out.set_pinned(f.pinned.as_deref().unwrap_or(""));
    out.set_reports(f.reports);
    out.set_handovers(f.handovers);
    out.set_cwnd_bytes(f.cwnd_bytes.unwrap_or(0));
    if let Some(features) = &f.features {
        write_features(out, features);
    }
}

fn write_features(out: operator_capnp::flow_info::Builder, features: &Features) {
    let present: Vec<(&str, f64)> =
        Features::NAMES.iter().filter_map(|&n| features.get(n).map(|v| (n, v))).collect();
    let mut list = out.init_features(present.len() as u32);
    for (i, (name, value)) in present.into_iter().enumerate() {
        let mut entry = list.reborrow().get(i as u32);
        entry.set_name(name);
        entry.set_value(value);
    }
}

fn write_target(mut out: target::Builder, t: &PinTarget) {
    match *t {
        PinTarget::Flow(k) => {
            let mut id = out.init_flow();
            id.set_datapath(k.datapath);
            id.set_sid(k.sid);
        }
        PinTarget::Port(p) => out.set_port(p),
        PinTarget::Prefix(net, len) => out.set_prefix(format!("{net}/{len}").as_str()),
    }
}

pub(crate) fn error_response(text: &str) -> Vec<u8> {
    let mut message = Builder::new_default();
    message.init_root::<response::Builder>().set_error(text);
    serialize::write_message_to_words(&message)
}

#[cfg(test)]
mod tests {
    use std::net::IpAddr;
    use std::os::unix::fs::PermissionsExt;

    use capnp::message::ReaderSegments;

    use super::*;
    use crate::registry::{Endpoints, FlowRecord};
    use operator_capnp::flow_info;

    fn request(build: impl FnOnce(request::Builder)) -> Vec<u8> {
        let mut message = Builder::new_default();
        build(message.init_root::<request::Builder>());
        serialize::write_message_to_words(&message)
    }

    /// What `handle` answered, as text: "error: ...", "ok: ..." or a summary of the lists.
    fn answer(registry: &Registry, bytes: &[u8]) -> String {
        summarize(&handle(registry, bytes))
    }

    fn summarize(bytes: &[u8]) -> String {
        let message = serialize::read_message(&mut &bytes[..], ReaderOptions::new()).unwrap();
        summarize_message(&message)
    }

    fn summarize_message<S: ReaderSegments>(message: &capnp::message::Reader<S>) -> String {
        let resp = message.get_root::<response::Reader>().unwrap();
        match resp.which().unwrap() {
            response::Error(t) => format!("error: {}", t.unwrap().to_str().unwrap()),
            response::Ok(t) => format!("ok: {}", t.unwrap().to_str().unwrap()),
            response::Flows(list) => {
                let flows: Vec<String> = list.unwrap().iter().map(|f| flow_line(f)).collect();
                format!("flows: [{}]", flows.join("; "))
            }
            response::Pins(list) => {
                let pins: Vec<String> = list
                    .unwrap()
                    .iter()
                    .map(|p| {
                        let t = read_target(p.get_target().unwrap()).unwrap();
                        format!("{t} -> {} ({})", p.get_algorithm().unwrap().to_str().unwrap(), p.get_flows())
                    })
                    .collect();
                format!("pins: [{}]", pins.join("; "))
            }
            response::Policy(p) => {
                let p = p.unwrap();
                let text = |t: capnp::Result<capnp::text::Reader>| t.unwrap().to_str().unwrap().to_string();
                let summary = text(p.get_summary());
                let first_line = summary.lines().next().unwrap_or("");
                format!("policy: loaded={} name={} origin={} summary={first_line}", p.get_loaded(), text(p.get_name()), text(p.get_origin()))
            }
            response::Memory(m) => {
                let m = m.unwrap();
                let entries: Vec<String> = m
                    .get_entries()
                    .unwrap()
                    .iter()
                    .map(|e| {
                        let scores: Vec<String> = e
                            .get_scores()
                            .unwrap()
                            .iter()
                            .map(|s| format!("{} {:.2}", s.get_algorithm().unwrap().to_str().unwrap(), s.get_score()))
                            .collect();
                        format!("{} [{}]", e.get_prefix().unwrap().to_str().unwrap(), scores.join(", "))
                    })
                    .collect();
                format!(
                    "memory: enabled={} why={:?} /{} /{} half_life={} min_score={} capacity={} entries=[{}]",
                    m.get_enabled(), m.get_why().unwrap().to_str().unwrap(), m.get_prefix_v4(), m.get_prefix_v6(),
                    m.get_half_life_s(), m.get_min_score(), m.get_capacity(), entries.join("; ")
                )
            }
        }
    }

    fn flow_line(f: flow_info::Reader) -> String {
        let text = |t: capnp::Result<capnp::text::Reader>| t.unwrap().to_str().unwrap().to_string();
        format!(
            "{}:{} {}:{}->{}:{} {} pinned={:?} reports={} handovers={} cwnd={} features={}",
            f.get_datapath(), f.get_sid(), text(f.get_src()), f.get_sport(), text(f.get_dst()),
            f.get_dport(), text(f.get_algorithm()), text(f.get_pinned()), f.get_reports(),
            f.get_handovers(), f.get_cwnd_bytes(), f.get_features().unwrap().len()
        )
    }

    /// A registry with flow 1:5, and its record.
    fn registry_with_flow() -> (Registry, Arc<FlowRecord>) {
        let r = Registry::new(None);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let e = Endpoints { src: ip("192.168.1.1"), sport: 80, dst: ip("2001:db8::7"), dport: 40_000 };
        let record = r.register(FlowId { datapath: 1, sid: 5 }, e, "reno");
        (r, record)
    }

    fn pin_port(port: u16, algorithm: &str) -> Vec<u8> {
        request(|r| {
            let mut p = r.init_pin();
            p.set_algorithm(algorithm);
            p.init_target().set_port(port);
        })
    }

    fn pin_prefix(prefix: &str, algorithm: &str) -> Vec<u8> {
        request(|r| {
            let mut p = r.init_pin();
            p.set_algorithm(algorithm);
            p.init_target().set_prefix(prefix);
        })
    }

    fn pin_flow(datapath: u64, sid: u32, algorithm: &str) -> Vec<u8> {
        request(|r| {
            let mut p = r.init_pin();
            p.set_algorithm(algorithm);
            let mut id = p.init_target().init_flow();
            id.set_datapath(datapath);
            id.set_sid(sid);
        })
    }

    fn list_flows() -> Vec<u8> {
        request(|mut r| r.set_list_flows(()))
    }

    fn list_pins() -> Vec<u8> {
        request(|mut r| r.set_list_pins(()))
    }

    /// A hand-made request: a root struct of one data word and one pointer whose union tag
    /// (the data word's first u16) is `tag`.
    fn request_with_tag(tag: u16) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&0u32.to_le_bytes()); // one segment
        bytes.extend_from_slice(&3u32.to_le_bytes()); // of three words
        bytes.extend_from_slice(&0u32.to_le_bytes()); // struct pointer, offset 0
        bytes.extend_from_slice(&(1u32 | 1 << 16).to_le_bytes()); // 1 data word, 1 pointer
        bytes.extend_from_slice(&u64::from(tag).to_le_bytes());
        bytes.extend_from_slice(&0u64.to_le_bytes()); // null pointer
        bytes
    }

    #[test]
    fn list_flows_shows_each_flow_with_its_pin() {
        let r = Registry::new(None);
        assert_eq!(answer(&r, &list_flows()), "flows: []");
        let (r, record) = registry_with_flow();
        r.update(&record, "cubic", None, 4, 1, Some(14_480));
        assert_eq!(
            answer(&r, &list_flows()),
            "flows: [1:5 192.168.1.1:80->2001:db8::7:40000 cubic pinned=\"\" reports=4 handovers=1 cwnd=14480 features=0]"
        );
        assert_eq!(answer(&r, &pin_port(80, "bbr")), "ok: pinned port 80 to bbr (1 flow now)");
        assert!(answer(&r, &list_flows()).contains("cubic pinned=\"bbr\""));
    }

    #[test]
    fn features_are_listed_by_name() {
        let (r, record) = registry_with_flow();
        let features = Features { min_rtt_ms: 20.0, samples: 8, ..Features::default() };
        r.update(&record, "reno", Some(features), 9, 0, Some(1));
        let bytes = handle(&r, &list_flows());
        let message = serialize::read_message(&mut &bytes[..], ReaderOptions::new()).unwrap();
        let response::Flows(flows) = message.get_root::<response::Reader>().unwrap().which().unwrap() else {
            panic!("not a flow list");
        };
        let listed: Vec<(String, f64)> = flows
            .unwrap()
            .get(0)
            .get_features()
            .unwrap()
            .iter()
            .map(|f| (f.get_name().unwrap().to_string().unwrap(), f.get_value()))
            .collect();
        assert_eq!(listed.len(), Features::NAMES.len());
        assert!(listed.contains(&("min_rtt_ms".to_string(), 20.0)), "{listed:?}");
        assert!(listed.contains(&("samples".to_string(), 8.0)), "{listed:?}");
    }

    #[test]
    fn pins_are_set_listed_and_removed() {
        let (r, _) = registry_with_flow();
        assert_eq!(answer(&r, &pin_prefix("2001:db8::/32", "cubic")), "ok: pinned prefix 2001:db8::/32 to cubic (1 flow now)");
        assert_eq!(answer(&r, &pin_prefix("10.0.0.0/8", "vegas")), "ok: pinned prefix 10.0.0.0/8 to vegas (0 flows now)");
        assert_eq!(answer(&r, &pin_flow(1, 5, "bbr")), "ok: pinned flow 1:5 to bbr (1 flow now)");
        assert_eq!(
            answer(&r, &list_pins()),
            "pins: [flow 1:5 -> bbr (1); prefix 10.0.0.0/8 -> vegas (0); prefix 2001:db8::/32 -> cubic (1)]"
        );
        let unpin = request(|r| r.init_unpin().set_prefix("10.0.0.0/8"));
        assert_eq!(answer(&r, &unpin), "ok: unpinned prefix 10.0.0.0/8 (0 flows now)");
        assert_eq!(answer(&r, &unpin), "error: no pin on prefix 10.0.0.0/8");
    }

    #[test]
    fn bad_requests_get_clear_errors() {
        let (r, _) = registry_with_flow();
        let e = answer(&r, &pin_port(80, "nosuch"));
        assert!(e.starts_with("error: pin port 80: algorithm \"nosuch\": unknown algorithm"), "{e}");
        let e = answer(&r, &pin_prefix("10.1.2.3/8", "bbr"));
        assert!(e.starts_with("error: bad prefix \"10.1.2.3/8\": host bits are set"), "{e}");
        assert_eq!(answer(&r, &pin_flow(3, 1, "bbr")), "error: pin flow 3:1: no flow 3:1 (datapath 3, socket id 1)");
        assert_eq!(answer(&r, &pin_port(0, "bbr")), "error: port 0 is not a port a flow can use");
        assert_eq!(answer(&r, &pin_port(80, "")), "error: pin port 80: the algorithm is empty");
        let e = answer(&r, &request_with_tag(99));
        assert!(e.starts_with("error: unknown request (member 99 of the Request union)"), "{e}");
        let e = answer(&r, &request(|r| r.init_unpin().set_port(9)));
        assert_eq!(e, "error: no pin on port 9");
        assert!(r.pins().is_empty());
    }

    #[test]
    fn bytes_that_are_no_request_are_answered_with_an_error() {
        let (r, _) = registry_with_flow();
        for garbage in [&b""[..], b"hello", &[0, 0, 0, 0, 9, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]] {
            let e = answer(&r, garbage);
            assert!(e.starts_with("error: malformed request: not a Cap'n Proto message"), "{garbage:?}: {e}");
        }
        // A well-framed message whose root pointer points far outside its segment.
        let mut wild = vec![0, 0, 0, 0, 1, 0, 0, 0];
        wild.extend_from_slice(&(0x7fff_fffcu32).to_le_bytes());
        wild.extend_from_slice(&(1u32).to_le_bytes());
        let e = answer(&r, &wild);
        assert!(e.starts_with("error: malformed request:"), "{e}");
        // A request followed by stray bytes.
        let mut trailing = list_flows();
        trailing.extend_from_slice(&[0; 8]);
        assert_eq!(answer(&r, &trailing), "error: malformed request: 8 bytes after the end of the message");
    }

    #[test]
    fn policies_load_by_spec_or_text_and_errors_say_why() {
        let (r, _) = registry_with_flow();
        let get = request(|mut r| r.set_get_policy(()));
        assert_eq!(answer(&r, &get), "policy: loaded=false name= origin= summary=");
        let load = request(|r| r.init_load_policy().set_spec("mystique"));
        assert_eq!(answer(&r, &load), "ok: loaded policy mystique (1 flow to choose for, 0 pinned)");
        let summary = Policy::load("mystique").unwrap().to_string();
        let mystique = format!(
            "policy: loaded=true name=mystique origin=built-in mystique summary={}",
            summary.lines().next().unwrap()
        );
        assert_eq!(answer(&r, &get), mystique);
        let g = r.generation();
        let e = answer(&r, &request(|r| r.init_load_policy().set_spec("nosuch-policy")));
        assert!(e.starts_with("error: no built-in policy \"nosuch-policy\""), "{e}");
        let e = answer(&r, &request(|r| r.init_load_policy().set_toml("name = [unclosed")));
        assert!(e.starts_with("error: policy sent through the operator interface: "), "{e}");
        let e = answer(&r, &request(|r| r.init_load_policy().set_toml(r#"name = "x""#)));
        assert!(e.starts_with("error: policy sent through the operator interface: "), "{e}");
        assert_eq!(r.generation(), g, "failed loads change nothing");
        assert_eq!(answer(&r, &get), mystique);
        let text = include_str!("../policies/mystique.toml").replace("name = \"mystique\"", "name = \"mine\"");
        assert_eq!(
            answer(&r, &request(|r| r.init_load_policy().set_toml(&text))),
            "ok: loaded policy mine (1 flow to choose for, 0 pinned)"
        );
        let e = answer(&r, &get);
        assert!(e.starts_with("policy: loaded=true name=mine origin=sent through the operator interface"), "{e}");
    }

    fn list_memory() -> Vec<u8> {
        request(|mut r| r.set_list_memory(()))
    }

    fn clear_memory_within(prefix: &str) -> Vec<u8> {
        request(|r| r.init_clear_memory().set_prefix(prefix))
    }

    #[test]
    fn the_memory_is_listed_with_its_settings_and_state() {
        let r = Registry::new(None);
        assert_eq!(
            answer(&r, &list_memory()),
            "memory: enabled=false why=\"no policy is loaded (flows start on --algorithm)\" /24 /64 half_life=600 min_score=1 capacity=4096 entries=[]"
        );
        let text = include_str!("../policies/mystique.toml").to_string() + "\n[memory]\nprefix_v4 = 16\nhalf_life_s = 60\n";
        r.set_policy(Arc::new(Policy::parse(&text, "test").unwrap()));
        let settings = r.policy().unwrap().memory().clone();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        r.memory().vote(ip("10.1.2.3"), "bbr", &settings).unwrap();
        r.memory().vote(ip("10.1.200.3"), "hybla", &settings).unwrap();
        r.memory().vote(ip("10.1.9.9"), "hybla", &settings).unwrap();
        r.memory().vote(ip("2001:db8::1"), "illinois", &settings).unwrap();
        let listed = answer(&r, &list_memory());
        assert!(listed.starts_with("memory: enabled=true why=\"\" /16 /64 half_life=60 min_score=1 capacity=4096 entries=["), "{listed}");
        assert!(listed.ends_with("entries=[10.1.0.0/16 [hybla 2.00, bbr 1.00]; 2001:db8::/64 [illinois 1.00]]"), "{listed}");
        r.memory().switch_off();
        assert!(answer(&r, &list_memory()).starts_with("memory: enabled=false why=\"switched off by the agent's --no-destination-memory\""));
    }

    #[test]
    fn the_memory_is_cleared_whole_or_inside_a_prefix() {
        let r = Registry::new(None);
        let settings = MemorySettings::default();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for a in ["10.1.2.3", "10.1.3.3", "192.0.2.1", "2001:db8::1"] {
            r.memory().vote(ip(a), "bbr", &settings).unwrap();
        }
        assert_eq!(answer(&r, &clear_memory_within("10.1.0.0/16")), "ok: forgot 2 prefixes inside 10.1.0.0/16 (10.1.2.0/24, 10.1.3.0/24)");
        assert_eq!(answer(&r, &clear_memory_within("10.1.0.0/16")), "error: the destination memory holds no prefix inside 10.1.0.0/16");
        let e = answer(&r, &clear_memory_within("10.1.2.3/16"));
        assert!(e.starts_with("error: bad prefix \"10.1.2.3/16\": host bits are set"), "{e}");
        assert_eq!(answer(&r, &clear_memory_within("192.0.2.0/24")), "ok: forgot 1 prefix inside 192.0.2.0/24 (192.0.2.0/24)");
        assert_eq!(answer(&r, &request(|r| r.init_clear_memory().set_all(()))), "ok: forgot all 1 prefix (2001:db8::/64)");
        assert_eq!(answer(&r, &request(|r| r.init_clear_memory().set_all(()))), "ok: forgot all 0 prefixes");
        assert!(answer(&r, &list_memory()).ends_with("entries=[]"));
    }

    #[test]
    fn a_connection_carries_many_requests_and_survives_bad_ones() {
        let (r, _) = registry_with_flow();
        let (mut client, server) = UnixStream::pair().unwrap();
        let served = std::thread::scope(|s| {
            let handle = s.spawn(|| serve_client(&r, server));
            // Two requests in one write, then a bad one, then a good one.
            let mut batch = pin_port(80, "bbr");
            batch.extend(list_pins());
            batch.extend(request_with_tag(42));
            batch.extend(list_flows());
            client.write_all(&batch).unwrap();
            let mut answers = Vec::new();
            for _ in 0..4 {
                let frame = read_frame(&mut client).unwrap().unwrap();
                answers.push(summarize(&frame));
            }
            client.shutdown(std::net::Shutdown::Write).unwrap();
            (answers, handle.join().unwrap())
        });
        let (answers, reason) = served;
        assert_eq!(answers[0], "ok: pinned port 80 to bbr (1 flow now)");
        assert_eq!(answers[1], "pins: [port 80 -> bbr (1)]");
        assert!(answers[2].starts_with("error: unknown request (member 42"), "{}", answers[2]);
        assert!(answers[3].starts_with("flows: [1:5 "), "{}", answers[3]);
        assert_eq!(reason, "closed");
    }

    #[test]
    fn a_broken_framing_is_answered_then_the_connection_closes() {
        let (r, _) = registry_with_flow();
        for (bytes, why) in [
            (b"GET / HTTP/1.0\r\n\r\n".to_vec(), "segments (at most 64)"),
            // One segment of 2^20 words: 8 MiB.
            ([0u32, 1 << 20].iter().flat_map(|w| w.to_le_bytes()).collect(), "more than the limit of 1048576"),
            // Half a segment table, then the end of the stream.
            (vec![0, 0, 0], "closed in the middle of a message"),
        ] {
            let (mut client, server) = UnixStream::pair().unwrap();
            client.write_all(&bytes).unwrap();
            client.shutdown(std::net::Shutdown::Write).unwrap();
            let reason = serve_client(&r, server);
            assert!(reason.starts_with("framing error:") && reason.contains(why), "{reason}");
            let mut rest = Vec::new();
            client.read_to_end(&mut rest).unwrap();
            let answer = summarize(&rest);
            assert!(answer.starts_with("error: malformed request framing:") && answer.contains(why), "{answer}");
            assert!(answer.ends_with("closing the connection"), "{answer}");
        }
    }

    #[test]
    fn the_socket_serves_clients_after_a_broken_one() {
        let dir = std::env::temp_dir().join(format!("ccswitch-operator-test-{}", std::process::id()));
        let path = dir.join("operator.sock");
        let r = Arc::new(registry_with_flow().0);
        serve(Arc::clone(&r), &path, 0o600, &OwnedSockets::default()).unwrap();
        let mut bad = UnixStream::connect(&path).unwrap();
        bad.write_all(&[0xff; 16]).unwrap();
        let mut rest = Vec::new();
        bad.read_to_end(&mut rest).unwrap();
        assert!(summarize(&rest).starts_with("error: malformed request framing"));
        let mut good = UnixStream::connect(&path).unwrap();
        good.write_all(&list_pins()).unwrap();
        assert_eq!(summarize(&read_frame(&mut good).unwrap().unwrap()), "pins: []");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn clients_beyond_the_limit_are_told_so() {
        let dir = std::env::temp_dir().join(format!("ccswitch-operator-limit-{}", std::process::id()));
        let path = dir.join("operator.sock");
        serve(Arc::new(Registry::new(None)), &path, 0o600, &OwnedSockets::default()).unwrap();
        let mut held: Vec<UnixStream> = (0..MAX_CLIENTS).map(|_| UnixStream::connect(&path).unwrap()).collect();
        // Every held connection is served (so counted) once it answers.
        for c in &mut held {
            c.write_all(&list_pins()).unwrap();
            assert_eq!(summarize(&read_frame(c).unwrap().unwrap()), "pins: []");
        }
        let mut refused = UnixStream::connect(&path).unwrap();
        let mut rest = Vec::new();
        refused.read_to_end(&mut rest).unwrap();
        assert_eq!(summarize(&rest), format!("error: too many operator clients (at most {MAX_CLIENTS} at a time)"));
        drop(held.pop());
        // The freed slot is taken back once the server notices the close.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let mut again = UnixStream::connect(&path).unwrap();
            again.write_all(&list_pins()).unwrap();
            again.shutdown(Shutdown::Write).unwrap();
            let mut frame = Vec::new();
            again.read_to_end(&mut frame).ok();
            if summarize(&frame) == "pins: []" {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "the slot was not freed");
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
