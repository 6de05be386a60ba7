//! The shim's half of the standard program's fold.
//!
//! The egress program folds the ACKs it can (those that only move forward, while the shim
//! recovers no loss) with `ccsw_std_fold_ack` (`datapaths/bpf/std_fold.bpf.h`) and sends up
//! only the program's reports. The ACKs the shim must see itself (loss signals, the end of a
//! flow, every ACK while it recovers a loss) still go up, each preceded by the registers the
//! egress program had folded so far; the shim folds those ACKs on the same registers, here,
//! with the same semantics, and reports when the program would. So the agent receives the
//! reports the shim's interpreter would have sent, whichever side folded each ACK; the fold
//! tests compare both sides with the interpreter.
//!
//! One difference: the program's Micros restarts at each report, and the egress program
//! does not hear of a report the shim made (after a loss), so its next report may come up to
//! one RTT early.

use ccswitch_ccp::program::standard::{report, NO_RTT_SAMPLE_US};
use ccswitch_ccp::Primitives;

use crate::events::Folded;

/// libccp's "+infinity": what the program reads as the RTT before any sample.
pub const RTT_INFINITY: u64 = 0xffff_ffff;

/// A folded flow's registers on the shim's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShimFold {
    regs: [u64; report::COUNT],
    micros_zero_us: u64,
    start_us: u64,
    per_ack: bool,
}

fn reset(regs: &mut [u64; report::COUNT]) {
    *regs = [0; report::COUNT];
    regs[report::MINRTT] = NO_RTT_SAMPLE_US;
}

impl ShimFold {
    /// The program (re)started at `start_us`.
    pub fn new(start_us: u64, per_ack: bool) -> Self {
        let mut regs = [0; report::COUNT];
        reset(&mut regs);
        Self { regs, micros_zero_us: start_us, start_us, per_ack }
    }

    pub fn start_us(&self) -> u64 {
        self.start_us
    }

    pub fn per_ack(&self) -> bool {
        self.per_ack
    }

    /// The reporting mode changed without a restart.
    pub fn set_per_ack(&mut self, per_ack: bool) {
        self.per_ack = per_ack;
    }

    /// One ACK the shim measured (its sender model's primitives; `rtt_sample_us` is the latest
    /// sample, carried over, 0 before the first). Returns the report if the program reports.
    pub fn fold_ack(&mut self, p: &Primitives) -> Option<[u64; report::COUNT]> {
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
        let due = r[report::TIMEOUT] != 0
            || r[report::LOST] > 0
            || self.per_ack
            || p.now.wrapping_sub(self.micros_zero_us) > rtt;
        due.then(|| self.take(p.now))
    }

    /// Registers the egress program folded, after those folded here (they are newer): summed,
    /// minimised, maximised or replaced as the program does. Returns the report if they are
    /// one. Registers of another program start are dropped (the interpreter would have reset).
    pub fn merge(&mut self, f: &Folded) -> Option<[u64; report::COUNT]> {
        if f.start_us != self.start_us {
            return None;
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
        f.reported.then(|| self.take(b[report::NOW]))
    }

    /// The report, and the registers start over with Micros at `now_us`.
    fn take(&mut self, now_us: u64) -> [u64; report::COUNT] {
        let out = self.regs;
        reset(&mut self.regs);
        self.micros_zero_us = now_us;
        out
    }
}
