//! Recognising the standard program (`ccswitch_protocol::standard`, which explains what it
//! does) so that a datapath that can fold in the kernel runs its fixed per-ACK fold there
//! instead of interpreting it per ACK in user space: [`is_standard`] and, per flow,
//! [`fold_mode`].

use std::sync::OnceLock;

use ccswitch_protocol::standard::{control, GROW_RATE_UNIT, IDLE_REPORT_US, INSTALL_MESSAGE, WINDOW_USE_PCT};
use ccswitch_protocol::wire::{self, Msg};

use super::{CcpFlow, Program};

/// How a datapath that folds in the kernel runs the standard program for a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoldMode {
    pub reporting: FoldReporting,
    /// `Control.loss_cwnd`: the window (bytes) an ACK that reveals a loss sets; 0 = none.
    pub loss_cwnd_bytes: u32,
    /// The pre-set step of growth: `Control.grow_cwnd`, `grow_after` and `grow_from`.
    pub growth: FoldGrowth,
    /// `Control.agg_rate`: the rate ACK aggregation is measured against (bytes per
    /// `AGG_RATE_UNIT_US`); 0 = none.
    pub agg_rate: u32,
}

/// The standard program's growth clauses (`ccswitch_protocol::standard`), counted from the
/// report at `from_us` over the reports since (the program's own `Control.chain_*`, which a
/// datapath that folds keeps itself): once more than `after_bytes` have been acknowledged
/// since, the window becomes `cwnd_bytes` (0: no step) plus `rate` bytes per
/// `GROW_RATE_UNIT` acknowledged beyond `after_bytes`, and a loss sets `loss_cwnd_bytes` (if
/// not 0) instead of the mode's loss window, and with `not_before_us` (not 0) only on an ACK
/// later than it; in slow start (`slow_start_cwnd_bytes` not 0), the window becomes that plus
/// the bytes acknowledged since, at most `after_bytes` (the program's `Control.grow_after`
/// holds slow start's threshold then).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FoldGrowth {
    pub cwnd_bytes: u32,
    pub after_bytes: u32,
    pub from_us: u64,
    pub loss_cwnd_bytes: u32,
    pub rate: u32,
    pub slow_start_cwnd_bytes: u32,
    /// `Control.grow_not_before`'s low 32 bits, which the kernel's directive holds and
    /// compares (0: none).
    pub not_before_us: u32,
}

impl FoldGrowth {
    /// A step of growth is pre-set (its window, or its loss window).
    pub fn has_step(&self) -> bool {
        self.cwnd_bytes > 0 || self.loss_cwnd_bytes > 0
    }
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
        growth: FoldGrowth {
            cwnd_bytes: 0,
            after_bytes: 0,
            from_us: 0,
            loss_cwnd_bytes: 0,
            rate: 0,
            slow_start_cwnd_bytes: 0,
            not_before_us: 0,
        },
        agg_rate: 0,
    };
}

fn program() -> &'static Program {
    static PROGRAM: OnceLock<Program> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        let (msg, _) = wire::decode(INSTALL_MESSAGE).expect("standard_program.bin is a CCP frame");
        let Msg::InstallExpr(install) = msg else { panic!("standard_program.bin is not an INSTALL_EXPR") };
        let mut prog = Program::decode(&install).expect("the standard program is valid");
        prog.standard = true;
        prog
    })
}

#[cfg(test)]
pub(crate) fn tests_program() -> Program {
    program().clone()
}

/// `prog` is the standard program (whatever uid the agent gave it).
pub fn is_standard(prog: &Program) -> bool {
    prog.standard
}

/// The comparison [`Program::from_install`] makes once.
pub(super) fn same_as_standard(prog: &Program) -> bool {
    let std = program();
    prog.instrs == std.instrs && prog.exprs == std.exprs && prog.defaults == std.defaults
}

/// How `flow` would be folded in the kernel now: `None` unless it runs the standard program in
/// a mode the kernel folds (periodic reports stay in user space, where a timer drives them
/// when ACKs stop, and so do a window share or a loss window beyond 32 bits, which the kernel
/// does not carry, nor a growth step's or slow start's window or byte count beyond 32 bits,
/// nor an ACK-aggregation rate beyond 32 bits, nor a step's rate past it above one byte per
/// byte (with a 32-bit rate the product leaves 64 bits from 4 GiB past the step, where the
/// interpreter stops the clause and the fold's product would wrap; at one unit, from 16 GiB),
/// nor a step and slow start at once, which the agent never pre-sets and the kernel's
/// directive has room for one of, nor, for the same reason, a step with both a rate past it
/// and a time to wait for, nor one whose time's low 32 bits, all the directive holds, are 0).
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
    let rate = flow.control(control::GROW_RATE);
    if rate > GROW_RATE_UNIT {
        return None;
    }
    let after_bytes = u32::try_from(flow.control(control::GROW_AFTER)).ok()?;
    let slow_start_cwnd_bytes = u32::try_from(flow.control(control::SS_CWND)).ok()?;
    let not_before = flow.control(control::GROW_NOT_BEFORE);
    let growth = FoldGrowth {
        cwnd_bytes: u32::try_from(flow.control(control::GROW_CWND)).ok()?,
        after_bytes,
        from_us: flow.control(control::GROW_FROM),
        loss_cwnd_bytes: u32::try_from(flow.control(control::GROW_LOSS_CWND)).ok()?,
        rate: rate as u32,
        slow_start_cwnd_bytes,
        not_before_us: not_before as u32,
    };
    // A time whose low 32 bits are 0 would read as none.
    let timed = not_before > 0;
    if growth.has_step() && (growth.slow_start_cwnd_bytes > 0 || (timed && (growth.rate > 0 || growth.not_before_us == 0))) {
        return None;
    }
    Some(FoldMode {
        reporting,
        loss_cwnd_bytes: u32::try_from(flow.control(control::LOSS_CWND)).ok()?,
        growth,
        agg_rate: u32::try_from(flow.control(control::AGG_RATE)).ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standard_install() -> wire::InstallExpr {
        let (msg, _) = wire::decode(INSTALL_MESSAGE).expect("a CCP frame");
        let Msg::InstallExpr(install) = msg else { panic!("not an INSTALL_EXPR") };
        install
    }

    #[test]
    fn installing_decides_once_whether_a_program_is_the_standard_one() {
        let mut install = standard_install();
        install.program_uid = 77;
        assert!(is_standard(&Program::from_install(&install).unwrap()), "any uid");

        // The same program with one immediate changed is another program.
        let i = install
            .instructions
            .iter()
            .position(|r| r.right.reg_type == ccswitch_protocol::lang::reg_type::IMMEDIATE && r.right.value > 1)
            .expect("the standard program has an immediate operand");
        install.instructions[i].right.value -= 1;
        assert!(!is_standard(&Program::from_install(&install).unwrap()));
    }
}
