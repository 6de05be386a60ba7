//! The standard program: the one datapath program every simple-API algorithm runs (the agent
//! compiles it from `agent/src/program.rs`). Its per-ACK fold is fixed (sums, minimum, maximum,
//! latest values, a report per RTT or per ACK and at once on loss or timeout), so a datapath
//! that can fold in the kernel recognises it here and runs that fold there instead of
//! interpreting it per ACK in user space.
//!
//! Reports only when a report can change a decision. A report per RTT lets the algorithm move
//! the window; that matters only while the window is what holds the flow back. The program
//! reports once the RTT has passed only on an ACK where the window limits the flow: before
//! the ACK, more than `Control.window_use_pct` % of `Cwnd` was in flight
//! (`Flow.bytes_in_flight + Ack.bytes_acked`; 50 % by default, the kernel's own test in slow
//! start, `tcp_is_cwnd_limited`: `cwnd < 2 * max_packets_out`, and a margin below the full
//! window for TSO deferral in congestion avoidance), or the flow is paced (`Rate > 0`: its
//! rate is the decision, and a pacing-limited flow keeps well under its window, BBR's at half
//! of it), or ECN marked it in the interval. A flow held by its receiver's window or by its
//! application does not qualify and reports only on loss or timeout (at once, as always) or
//! every `Control.idle_report_us` (1 s by default). Why 1 s: it is TCP's own horizon for an
//! unused window (RFC 6298's initial RTO; RFC 2861 revalidates a window unused for an RTO),
//! long enough that 10k receiver-held flows cost 10k reports/s rather than one per ACK, short
//! enough that the agent's RTT and rate estimates, its features and its liveness view stay
//! fresh. A flow whose window starts to bind again reports on its first such ACK once the RTT
//! has passed, so the interval never delays a decision that matters.
//!
//! A loss is answered on the ACK that reveals it. The agent pre-sets, with each answer, the
//! window its algorithm would choose on a loss (`Control.loss_cwnd`, 0 for none: the flow is
//! already recovering, or its algorithm does not cut); an ACK that reveals a loss sets `Cwnd`
//! to it, and the report that loss triggers reaches the agent, whose answer refines the
//! window. Until that answer, further losses set the same window again, never a lower one.
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
    /// Per RTT, report only if more than this % of the window was in flight before the ACK
    /// (or the flow is paced, or ECN marked it).
    pub const WINDOW_USE_PCT: usize = 2;
    /// Otherwise report every this many µs (and on loss or timeout).
    pub const IDLE_REPORT_US: usize = 3;
    /// Non-zero: the window (bytes) to set on an ACK that reveals a loss, pre-set by the
    /// agent so that the loss is answered at once; its answer to the loss's report refines it.
    pub const LOSS_CWND: usize = 4;
}

/// Default of `Control.window_use_pct`.
pub const WINDOW_USE_PCT: u64 = 50;
/// Default of `Control.idle_report_us`.
pub const IDLE_REPORT_US: u64 = 1_000_000;

/// The minimum-RTT register's default: above any sample (µs).
pub const NO_RTT_SAMPLE_US: u64 = (1 << 31) - 1;

/// How a datapath that folds in the kernel runs the standard program for a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoldMode {
    pub reporting: FoldReporting,
    /// `Control.loss_cwnd`: the window (bytes) an ACK that reveals a loss sets; 0 = none.
    pub loss_cwnd_bytes: u32,
}

/// When the folded program reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FoldReporting {
    /// At once on loss or timeout; per RTT while the window limits the flow (more than
    /// `window_use_pct` % of it in flight before an ACK), it is paced or ECN marked it;
    /// otherwise every `idle_report_us`.
    PerRtt { window_use_pct: u32, idle_report_us: u64 },
    /// A report on every ACK.
    PerAck,
}

impl FoldMode {
    /// Per RTT with the program's defaults, no window pre-set for a loss.
    pub const PER_RTT: FoldMode = FoldMode {
        reporting: FoldReporting::PerRtt { window_use_pct: WINDOW_USE_PCT as u32, idle_report_us: IDLE_REPORT_US },
        loss_cwnd_bytes: 0,
    };
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
/// when ACKs stop, and so do a window share or a loss window beyond 32 bits, which the kernel
/// does not carry).
pub fn fold_mode(flow: &CcpFlow) -> Option<FoldMode> {
    let prog = flow.program()?;
    if !is_standard(prog) || flow.control(control::PERIOD_US) != 0 {
        return None;
    }
    let reporting = if flow.control(control::PER_ACK) != 0 {
        FoldReporting::PerAck
    } else {
        FoldReporting::PerRtt {
            window_use_pct: u32::try_from(flow.control(control::WINDOW_USE_PCT)).ok()?,
            idle_report_us: flow.control(control::IDLE_REPORT_US),
        }
    };
    Some(FoldMode { reporting, loss_cwnd_bytes: u32::try_from(flow.control(control::LOSS_CWND)).ok()? })
}
