//! The shim's half of the standard program's fold.
//!
//! The egress program folds the ACKs it can (those that only move forward, while the shim
//! recovers no loss) with `ccsw_std_fold_ack` (`datapaths/bpf/std_fold.bpf.h`) and sends up
//! the program's reports, and, to free the slab, the registers it holds once half a window
//! has been acknowledged. The ACKs the shim must see itself (loss signals, the end of a flow,
//! every ACK while it recovers a loss) still go up, each preceded by the registers the egress
//! program had folded so far; the shim folds those ACKs on the same registers, here, with the
//! same semantics, and reports when the program would. Registers are sums, minima, maxima and
//! latest values, so folding them in two places and merging (the port's are always the newer)
//! gives the interpreter's report. What the two sides must share beyond the registers is in
//! the directive: the program's window and rate, its reporting controls, and when the shim
//! last reported (where the program's Micros restarted). ECN marks, which only ACKs the shim
//! sees carry, make the shim hold every ACK until it reports them.
//!
//! The program's loss clause (an ACK that reveals a loss sets Cwnd to `Control.loss_cwnd`) is
//! the shim's: only it detects losses ([`ShimFold::fold_ack`] returns the window to set).
//!
//! The growth clauses (the agent's next step of growth, and slow start, pre-set) are not
//! folded per ACK: the port folds most ACKs on registers it sends up half a window at a time,
//! so neither side holds the program's `Report.acked` on every ACK. The step is not folded at
//! all (a folded flow's window moves with the agent's answers in congestion avoidance, a
//! round trip later than the kernel datapath's); slow start is, at the shim's grain: on every
//! ACK the shim sees and every batch of registers the port sends up, the window becomes what
//! the program's slow start would have set by then ([`ShimFold::fold_ack`],
//! [`ShimFold::merge`]), so it doubles in two or more steps a round, not once a round.
//!
//! The ACK-aggregation clauses are not folded either: they keep an epoch ACK by ACK, which
//! neither side holds alone. A flow whose agent sets `Control.agg_rate` is not folded (the
//! shim's `set_fold` declines it) and its program runs in the session's interpreter; a folded
//! flow reports the aggregation registers as 0, as they are unless an agent measured
//! aggregation earlier under the same program start (the epoch's registers then differ from
//! the interpreter's; no algorithm reads them).

use ccswitch_ccp::program::fold::{FoldMode, FoldReporting};
use ccswitch_protocol::standard::{report, NO_RTT_SAMPLE_US};
use ccswitch_ccp::Primitives;

use crate::events::Folded;

/// libccp's "+infinity": what the program reads as the RTT before any sample.
pub const RTT_INFINITY: u64 = 0xffff_ffff;

/// What one ACK the shim folded did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FoldStep {
    /// The program reported: its fields.
    pub report: Option<[u64; report::COUNT]>,
    /// The loss clause set Cwnd to this.
    pub loss_cwnd: Option<u32>,
    /// Slow start's window (the program's `Control.ss_high`): Cwnd is at least this.
    pub slow_start_cwnd: Option<u32>,
}

/// The program's growth registers (`Control.chain_from`, `chain_acked`, `ss_high`), kept as
/// the kernel's fold keeps them: the chain anchored at reports only (the agent's `grow_from`
/// only moves forward, never past the latest report).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct GrowthRegs {
    chain_from_us: u64,
    /// `chain_acked` less the current registers' `Report.acked`.
    chain_reported_bytes: u64,
    ss_high_bytes: u64,
}

/// A folded flow's registers on the shim's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimFold {
    regs: [u64; report::COUNT],
    micros_zero_us: u64,
    /// A report was taken under this start (Micros restarted at one, not at the start).
    reported: bool,
    start_us: u64,
    mode: FoldMode,
    growth: GrowthRegs,
}

fn reset(regs: &mut [u64; report::COUNT]) {
    *regs = [0; report::COUNT];
    regs[report::MINRTT] = NO_RTT_SAMPLE_US;
}

impl ShimFold {
    /// The program (re)started at `start_us`.
    pub fn new(start_us: u64, mode: FoldMode) -> Self {
        let mut regs = [0; report::COUNT];
        reset(&mut regs);
        Self { regs, micros_zero_us: start_us, reported: false, start_us, mode, growth: GrowthRegs::default() }
    }

    pub fn start_us(&self) -> u64 {
        self.start_us
    }

    pub fn mode(&self) -> FoldMode {
        self.mode
    }

    /// The controls changed without a restart.
    pub fn set_mode(&mut self, mode: FoldMode) {
        self.mode = mode;
    }

    /// When the program's Micros last restarted (µs).
    pub fn micros_zero_us(&self) -> u64 {
        self.micros_zero_us
    }

    /// When the latest report under this start was taken (µs; its own or the port's), if
    /// there was one: what the port restarts Micros at. Not the start: the session stamps it
    /// when the agent's restart arrives, which can be after the ACKs folded under it, so the
    /// port cannot tell a late start from a later report by time.
    pub fn reported_at_us(&self) -> Option<u64> {
        self.reported.then_some(self.micros_zero_us)
    }

    /// ECN marks are folded here and not reported yet: the port, which never sees them, must
    /// not fold (its test of a binding window would miss them).
    pub fn holds_ecn(&self) -> bool {
        self.regs[report::ECN] > 0
    }

    /// One ACK the shim measured (its sender model's primitives; `rtt_sample_us` is the latest
    /// sample, carried over, 0 before the first), with the program's window and rate.
    pub fn fold_ack(&mut self, p: &Primitives, cwnd_bytes: u32, rate: u64) -> FoldStep {
        let r = &mut self.regs;
        let rtt = if p.rtt_sample_us == 0 { RTT_INFINITY } else { p.rtt_sample_us };
        r[report::ACKED] += p.bytes_acked;
        r[report::LOST] += p.lost_pkts_sample;
        r[report::TIMEOUT] = u64::from(p.was_timeout);
        r[report::ECN] += p.ecn_packets;
        r[report::RTT] = rtt;
        r[report::MINRTT] = r[report::MINRTT].min(rtt);
        r[report::INFLIGHT] = p.bytes_in_flight;
        r[report::RATE] = r[report::RATE].max(p.rate_incoming);
        r[report::NOW] = p.now;
        let micros = p.now.wrapping_sub(self.micros_zero_us);
        let loss_cwnd = (p.lost_pkts_sample > 0 && self.mode.loss_cwnd_bytes > 0).then_some(self.mode.loss_cwnd_bytes);
        let due = match self.mode.reporting {
            FoldReporting::PerAck => true,
            FoldReporting::PerRtt { window_use_pct, idle_report_us } => {
                let binds = r[report::ECN] > 0
                    || rate > 0
                    || u128::from(p.bytes_in_flight + p.bytes_acked) * 100 > u128::from(cwnd_bytes) * u128::from(window_use_pct);
                r[report::TIMEOUT] != 0 || r[report::LOST] > 0 || (micros > rtt && binds) || micros > idle_report_us
            }
        };
        let slow_start_cwnd = self.slow_start(p.lost_pkts_sample > 0 || p.was_timeout);
        FoldStep { report: due.then(|| self.take(p.now)), loss_cwnd, slow_start_cwnd }
    }

    /// Registers the egress program folded, after those folded here (they are newer): summed,
    /// minimised, maximised or replaced as the program does; the report if they are one, and
    /// slow start's window by their last ACK. Registers of another program start are dropped
    /// (the interpreter would have reset).
    pub fn merge(&mut self, f: &Folded) -> FoldStep {
        if f.start_us != self.start_us {
            return FoldStep::default();
        }
        let (r, b) = (&mut self.regs, &f.fields);
        if f.acks > 0 {
            r[report::ACKED] += b[report::ACKED];
            r[report::LOST] += b[report::LOST];
            r[report::TIMEOUT] = b[report::TIMEOUT];
            r[report::ECN] += b[report::ECN];
            r[report::RTT] = b[report::RTT];
            r[report::MINRTT] = r[report::MINRTT].min(b[report::MINRTT]);
            r[report::INFLIGHT] = b[report::INFLIGHT];
            r[report::RATE] = r[report::RATE].max(b[report::RATE]);
            r[report::NOW] = b[report::NOW];
        }
        let slow_start_cwnd = self.slow_start(self.regs[report::LOST] > 0 || self.regs[report::TIMEOUT] != 0);
        FoldStep { report: f.reported.then(|| self.take(b[report::NOW])), loss_cwnd: None, slow_start_cwnd }
    }

    /// The program's slow-start clauses on the registers as they are now: `Control.ss_high`
    /// rises to `ss_cwnd` plus the bytes acknowledged since the report at `grow_from`, at most
    /// the threshold (in `grow_after`), and Cwnd to it (returned); a loss or timeout (`cut`)
    /// clears it, its window the loss clause's.
    fn slow_start(&mut self, cut: bool) -> Option<u32> {
        let (g, acked) = (self.mode.growth, self.regs[report::ACKED]);
        if cut {
            self.growth.ss_high_bytes = 0;
            return None;
        }
        if g.slow_start_cwnd_bytes == 0 {
            return None;
        }
        let (counts, since) = if self.micros_zero_us == g.from_us {
            (true, acked)
        } else {
            (self.growth.chain_from_us == g.from_us, self.growth.chain_reported_bytes + acked)
        };
        if counts {
            let grown = (u64::from(g.slow_start_cwnd_bytes) + since).min(u64::from(g.after_bytes));
            self.growth.ss_high_bytes = self.growth.ss_high_bytes.max(grown);
        }
        let high = u32::try_from(self.growth.ss_high_bytes).unwrap_or(u32::MAX);
        (high > 0).then_some(high)
    }

    /// The report, and the registers start over with Micros at `now_us`; the chain moves
    /// (anchored at this report if the growth counts from the one before, else summed on;
    /// broken by a loss or a timeout).
    fn take(&mut self, now_us: u64) -> [u64; report::COUNT] {
        let g = &mut self.growth;
        if self.micros_zero_us == self.mode.growth.from_us {
            g.chain_from_us = self.mode.growth.from_us;
            g.chain_reported_bytes = self.regs[report::ACKED];
        } else {
            g.chain_reported_bytes += self.regs[report::ACKED];
        }
        if self.regs[report::LOST] > 0 || self.regs[report::TIMEOUT] != 0 {
            g.chain_from_us = 1; // no report's time: broken
        }
        let out = self.regs;
        reset(&mut self.regs);
        self.micros_zero_us = now_us;
        self.reported = true;
        out
    }
}
