//! Helpers shared by the integration tests: compile programs with portus and push them
//! through portus's own serializers, so every test also exercises wire compatibility.
#![allow(dead_code)] // each test binary uses a subset

use std::collections::HashMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;

use anyhow::Result;
use ccswitch_ccp::program::fold::FoldMode;
use ccswitch_ccp::session::SessionDatapath;

use ccswitch_ccp::{CcpFlow, ProgramTable, Step};
use ccswitch_protocol::wire::{self, FrameReader, InstallExpr, Measure, Msg};
use portus::lang::{self, Reg as PReg, Scope, Type};
use portus::serialize as ps;

/// Decodes bytes that must hold exactly one message.
pub fn decode_all(bytes: &[u8]) -> Msg {
    let (msg, used) = wire::decode(bytes).expect("decode");
    assert_eq!(used, bytes.len(), "decode consumed the whole frame");
    msg
}

/// Compiles `src` with portus and returns portus's INSTALL_EXPR bytes and the scope.
pub fn portus_install_bytes(src: &str) -> (Vec<u8>, Scope) {
    let (bin, scope) = lang::compile(src.as_bytes(), &[]).expect("portus compiles the program");
    let msg = ps::install::Msg {
        sid: 0,
        program_uid: scope.program_uid,
        num_events: bin.events.len() as u32,
        num_instrs: bin.instrs.len() as u32,
        instrs: bin,
    };
    (ps::serialize(&msg).expect("portus serializes"), scope)
}

/// Compiles `src` with portus and decodes it into our INSTALL_EXPR.
pub fn compile(src: &str) -> (InstallExpr, Scope) {
    let (bytes, scope) = portus_install_bytes(src);
    match decode_all(&bytes) {
        Msg::InstallExpr(m) => (m, scope),
        other => panic!("expected INSTALL_EXPR, got {other:?}"),
    }
}

/// Compiles and installs `src` into `table`; returns the scope.
pub fn install(table: &mut ProgramTable, src: &str) -> Scope {
    let (msg, scope) = compile(src);
    table.install_msg(&msg).expect("install");
    scope
}

/// Portus's CHANGE_PROG for `scope`'s program with the given updates, decoded and applied.
pub fn change_prog(
    flow: &mut CcpFlow,
    table: &ProgramTable,
    scope: &Scope,
    updates: Vec<(PReg, u64)>,
    now_us: u64,
) -> Step {
    let msg = ps::changeprog::Msg {
        sid: flow.sid(),
        program_uid: scope.program_uid,
        num_fields: updates.len() as u32,
        fields: updates,
    };
    let msg = decode_all(&ps::serialize(&msg).expect("portus serializes"));
    flow.handle(&msg, table, now_us).expect("change_prog")
}

/// Portus's UPDATE_FIELDS, decoded and applied.
pub fn update_fields(flow: &mut CcpFlow, table: &ProgramTable, updates: Vec<(PReg, u64)>) -> Step {
    let msg = ps::update_field::Msg {
        sid: flow.sid(),
        num_fields: updates.len() as u8,
        fields: updates,
    };
    let msg = decode_all(&ps::serialize(&msg).expect("portus serializes"));
    flow.handle(&msg, table, 0).expect("update_fields")
}

/// The value of report field `name` (e.g. "Report.acked") in `m`, located through the scope.
pub fn field(scope: &Scope, m: &Measure, name: &str) -> u64 {
    assert_eq!(
        m.program_uid, scope.program_uid,
        "report comes from this program"
    );
    match scope.get(name) {
        Some(PReg::Report(i, _, _)) => m.fields[usize::from(*i)],
        other => panic!("{name} is not a report field: {other:?}"),
    }
}

/// The register of `name` in `scope` (for UPDATE_FIELDS / CHANGE_PROG).
pub fn reg(scope: &Scope, name: &str) -> PReg {
    scope
        .get(name)
        .unwrap_or_else(|| panic!("{name} not in scope"))
        .clone()
}

pub fn cwnd_reg() -> PReg {
    PReg::Implicit(4, Type::Num(None))
}

pub fn rate_reg() -> PReg {
    PReg::Implicit(5, Type::Num(None))
}

/// The agent's end of a session's connection: sends messages, reads what the shim sent.
pub struct AgentEnd {
    pub stream: UnixStream,
    pub frames: FrameReader,
}

impl AgentEnd {
    /// A non-blocking end.
    pub fn new(stream: UnixStream) -> Self {
        stream.set_nonblocking(true).unwrap();
        Self { stream, frames: FrameReader::new() }
    }

    pub fn send(&mut self, msgs: impl IntoIterator<Item = Msg>) {
        let mut bytes = Vec::new();
        for m in msgs {
            m.encode_into(&mut bytes).unwrap();
        }
        self.stream.write_all(&bytes).unwrap();
    }

    /// Every message the shim has sent since the last call.
    pub fn received(&mut self) -> Vec<Msg> {
        let mut buf = [0u8; 65536];
        loop {
            match self.stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.frames.push(&buf[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => panic!("{e}"),
            }
        }
        let mut got = Vec::new();
        while let Some(frame) = self.frames.next_frame().unwrap() {
            got.push(wire::decode(frame).unwrap().0);
        }
        got
    }
}

/// A datapath that folds the standard program of every flow the session asks it to, and
/// remembers what it was told.
#[derive(Default)]
pub struct Folding {
    pub folds: HashMap<u32, (FoldMode, u64)>,
    pub fold_calls: usize,
    /// Every fold set, in order.
    pub fold_starts: Vec<u64>,
    pub valid_until_ns: u64,
}

impl SessionDatapath for Folding {
    fn set_directive(&mut self, _sid: u32, _cwnd: u32, _rate: Option<u64>) -> Result<()> {
        Ok(())
    }
    fn clear_directive(&mut self, sid: u32) -> Result<()> {
        self.folds.remove(&sid);
        Ok(())
    }
    fn set_valid_until(&mut self, deadline_ns: u64) -> Result<()> {
        self.valid_until_ns = deadline_ns;
        Ok(())
    }
    fn set_fold(&mut self, sid: u32, fold: Option<(FoldMode, u64)>) -> Result<bool> {
        self.fold_calls += 1;
        self.fold_starts.extend(fold.map(|(_, start)| start));
        match fold {
            Some(f) => self.folds.insert(sid, f),
            None => self.folds.remove(&sid),
        };
        Ok(true)
    }
}
