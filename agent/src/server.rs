//! The IPC server: one thread per connected datapath, one controller per flow.
//!
//! Programs belong to a datapath (libccp keeps them in a per-datapath table), so they are
//! installed when a datapath says READY, or before its first CREATE if it never did. A
//! message that cannot be decoded is logged and skipped; only a broken framing (a length
//! that cannot be right) ends that datapath's connection. Other datapaths are unaffected.

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use ccswitch_ccp::wire::{self, FrameReader, Msg};
use tracing::{debug, error, info, warn};

use crate::flow::{Directive, FlowController};
use crate::program::SimpleProgram;

pub struct Agent {
    program: SimpleProgram,
    default_algorithm: String,
    next_datapath_id: AtomicU64,
}

impl Agent {
    pub fn new(default_algorithm: String) -> Result<Arc<Self>> {
        Ok(Arc::new(Self {
            program: SimpleProgram::compile()?,
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
            programs_installed: false,
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
    programs_installed: bool,
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
                self.flows.clear();
                self.install_programs()
            }
            Msg::Create(c) => {
                if !self.programs_installed {
                    self.install_programs()?;
                }
                let requested = c.cong_alg.trim_matches(char::from(0)).to_string();
                let (name, algorithm) = match ccswitch_algorithms::by_name(&requested) {
                    Some(a) => (requested, a),
                    None => {
                        let a = ccswitch_algorithms::by_name(&self.agent.default_algorithm)
                            .expect("default algorithm checked at start");
                        (self.agent.default_algorithm.clone(), a)
                    }
                };
                info!(
                    datapath = self.datapath, sid = c.sid, algorithm = %name, mss = c.mss,
                    init_cwnd = c.init_cwnd, src = %ip(c.src_ip), sport = c.src_port,
                    dst = %ip(c.dst_ip), dport = c.dst_port, "flow created"
                );
                let flow = FlowController::new(algorithm, c.mss, c.init_cwnd);
                let directive = flow.directive();
                self.flows.insert(c.sid, flow);
                self.send(&wire::Msg::ChangeProg(wire::ChangeProg {
                    sid: c.sid,
                    program_uid: self.agent.program.uid,
                    updates: directive_fields(&directive),
                }))
            }
            Msg::Measure(m) if m.fields.is_empty() => {
                if let Some(flow) = self.flows.remove(&m.sid) {
                    info!(
                        datapath = self.datapath, sid = m.sid, algorithm = flow.algorithm.name(),
                        reports = flow.reports, cwnd = flow.state.cwnd_bytes, "flow closed"
                    );
                }
                Ok(())
            }
            Msg::Measure(m) => {
                let Some(flow) = self.flows.get_mut(&m.sid) else {
                    debug!(datapath = self.datapath, sid = m.sid, "report for an unknown flow");
                    return Ok(());
                };
                if m.program_uid != self.agent.program.uid {
                    warn!(sid = m.sid, program = m.program_uid, "report from a program not ours");
                    return Ok(());
                }
                let Some(measurement) = self.agent.program.measurement(&m.fields) else {
                    warn!(sid = m.sid, fields = m.fields.len(), "report with too few fields");
                    return Ok(());
                };
                let directive = flow.on_report(&measurement);
                debug!(
                    sid = m.sid, acked = measurement.acked_bytes, lost = measurement.lost_packets,
                    rtt_us = measurement.rtt_us, cwnd = directive.cwnd_bytes,
                    rate = ?directive.pacing_rate_bytes_per_s, "directive sent"
                );
                // Sent even when nothing changed: an answered report is how the shim knows
                // the agent is alive (an unanswered one past its timeout means fallback).
                self.send(&wire::Msg::UpdateFields(wire::UpdateFields {
                    sid: m.sid,
                    updates: directive_fields(&directive),
                }))
            }
            other => {
                warn!(datapath = self.datapath, msg = ?other.msg_type(), "unexpected message from a datapath");
                Ok(())
            }
        }
    }

    fn install_programs(&mut self) -> Result<()> {
        self.out.write_all(&self.agent.program.install_message)?;
        self.programs_installed = true;
        debug!(datapath = self.datapath, program = self.agent.program.uid, "program installed");
        Ok(())
    }

    fn send(&mut self, msg: &Msg) -> Result<()> {
        self.out.write_all(&msg.encode()?)?;
        Ok(())
    }
}

/// Register type of the implicit registers and the indices of `Cwnd` and `Rate` among them,
/// as portus's compiler numbers them.
const IMPLICIT_REG_TYPE: u8 = 2;
const CWND_REG_INDEX: u32 = 4;
const RATE_REG_INDEX: u32 = 5;

fn directive_fields(d: &Directive) -> Vec<wire::UpdateField> {
    let mut fields = vec![wire::UpdateField {
        reg_type: IMPLICIT_REG_TYPE,
        reg_index: CWND_REG_INDEX,
        value: u64::from(d.cwnd_bytes),
    }];
    if let Some(rate) = d.pacing_rate_bytes_per_s {
        fields.push(wire::UpdateField {
            reg_type: IMPLICIT_REG_TYPE,
            reg_index: RATE_REG_INDEX,
            value: rate,
        });
    }
    fields
}

fn ip(addr: u32) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::from(addr)
}
