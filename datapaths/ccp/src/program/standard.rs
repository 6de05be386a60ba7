//! The standard program: the one datapath program every simple-API algorithm runs (the agent
//! compiles it from `agent/src/program.rs`). Its per-ACK fold is fixed (sums, minimum, maximum,
//! latest values, a report per RTT or per ACK and at once on loss or timeout), so a datapath
//! that can fold in the kernel recognises it here and runs that fold there instead of
//! interpreting it per ACK in user space.
//!
//! `standard_program.bin` is the agent's INSTALL_EXPR of it; the agent's tests check that what
//! it compiles is this program, with the register layout below (`CCSWITCH_BLESS=1` rewrites the
//! file after a deliberate change of the program).

use std::sync::OnceLock;

use super::{CcpFlow, Program};
use crate::wire::{self, Msg};

/// The INSTALL_EXPR message of the standard program (program uid as the agent compiled it).
pub const INSTALL_MESSAGE: &[u8] = include_bytes!("standard_program.bin");

/// Report register indices, in MEASURE order.
pub mod report {
    pub const ACKED: usize = 0;
    pub const LOST: usize = 1;
    pub const TIMEOUT: usize = 2;
    pub const ECN: usize = 3;
    pub const RTT: usize = 4;
    pub const MINRTT: usize = 5;
    pub const INFLIGHT: usize = 6;
    pub const RATE: usize = 7;
    pub const NOW: usize = 8;
    pub const COUNT: usize = 9;
}

/// Control register indices.
pub mod control {
    /// Non-zero: report on every ACK.
    pub const PER_ACK: usize = 0;
    /// Non-zero: report every this many µs instead of once per RTT.
    pub const PERIOD_US: usize = 1;
}

/// The minimum-RTT register's default: above any sample (µs).
pub const NO_RTT_SAMPLE_US: u64 = (1 << 31) - 1;

/// How a datapath that folds in the kernel runs the standard program for a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoldMode {
    /// A report per RTT, and at once on loss or timeout.
    PerRtt,
    /// A report on every ACK.
    PerAck,
}

fn program() -> &'static Program {
    static PROGRAM: OnceLock<Program> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let (msg, _) = wire::decode(INSTALL_MESSAGE).expect("standard_program.bin is a CCP frame");
        let Msg::InstallExpr(install) = msg else { panic!("standard_program.bin is not an INSTALL_EXPR") };
        Program::from_install(&install).expect("the standard program is valid")
    })
}

#[cfg(test)]
pub(crate) fn tests_program() -> Program {
    program().clone()
}

/// `prog` is the standard program (whatever uid the agent gave it).
pub fn is_standard(prog: &Program) -> bool {
    let std = program();
    prog.instrs == std.instrs && prog.exprs == std.exprs && prog.defaults == std.defaults
}

/// How `flow` would be folded in the kernel now: `None` unless it runs the standard program in
/// a mode the kernel folds (periodic reports stay in user space, where a timer drives them
/// when ACKs stop).
pub fn fold_mode(flow: &CcpFlow) -> Option<FoldMode> {
    let prog = flow.program()?;
    if !is_standard(prog) || flow.control(control::PERIOD_US) != 0 {
        return None;
    }
    Some(if flow.control(control::PER_ACK) != 0 { FoldMode::PerAck } else { FoldMode::PerRtt })
}
