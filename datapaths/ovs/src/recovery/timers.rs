//! Timers: the retransmission timer (RFC 6298 with a low variance floor, exponential backoff
//! until progress resumes), RACK's reordering timeout, and the wait for a segment that
//! reached the shim after the ones following it.

use super::loss::LossKind;
use super::{BufferPool, FallbackReason, SenderFlow};

/// RTO before the first RTT sample (RFC 6298).
pub const INITIAL_RTO_NS: u64 = 1_000_000_000;
/// Floor of the RTO's variance term: a Linux server's is 200 ms, ours must fire first.
pub const RTO_VARIANCE_FLOOR_NS: u64 = 10_000_000;
pub const MAX_RTO_NS: u64 = 60_000_000_000;
/// How long a missing segment may take to show up before the flow gives up (falls back).
pub const EARLY_WAIT_NS: u64 = 20_000_000;

/// The result of a timer tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickOutcome {
    pub newly_lost_pkts: u64,
    pub timed_out: bool,
    /// The flow fell back on this tick (a missing segment never showed up).
    pub fell_back: Option<FallbackReason>,
}

impl SenderFlow {
    /// Current retransmission timeout, backoff included.
    pub fn rto_ns(&self) -> u64 {
        let base = if self.srtt_ns == 0 {
            INITIAL_RTO_NS
        } else {
            self.srtt_ns + (4 * self.rttvar_ns).max(RTO_VARIANCE_FLOOR_NS)
        };
        base.checked_shl(self.backoff).unwrap_or(u64::MAX).min(MAX_RTO_NS)
    }

    /// Timer: RACK's reordering timeout and the retransmission timer.
    pub fn on_tick(&mut self, now_ns: u64, pool: &mut BufferPool) -> TickOutcome {
        if self.fallback.is_some() {
            return TickOutcome::default();
        }
        if self.early.first().is_some_and(|e| now_ns.saturating_sub(e.ts_ns) > EARLY_WAIT_NS) {
            let hole_end = self.early_end();
            let fell_back = self.fall_back(FallbackReason::Gap, hole_end, pool);
            return TickOutcome { fell_back, ..TickOutcome::default() };
        }
        if self.segs.is_empty() {
            return TickOutcome::default();
        }
        let mut out = TickOutcome { newly_lost_pkts: self.detect_losses(now_ns), ..TickOutcome::default() };
        if let Some(since) = self.rto_since_ns {
            if now_ns.saturating_sub(since) >= self.rto_ns() {
                out.timed_out = true;
                out.newly_lost_pkts += self.mark_head_lost(LossKind::Timeout);
                self.backoff = (self.backoff + 1).min(16);
                self.rto_since_ns = Some(now_ns);
                self.timeout_pending = true;
                if !self.sack {
                    // Partial ACKs after the timeout retransmission recover the rest.
                    self.recovery_point = Some(self.nxt);
                }
            }
        }
        self.lost_since_ack += out.newly_lost_pkts;
        out
    }

    /// The earliest time at which [`on_tick`](Self::on_tick) or idle expiry can change this
    /// flow, given its state now: the idle deadline, the end of the wait for a missing
    /// segment, the retransmission timer, RACK's reordering timeout of the first segment it
    /// is timing (found by the last loss detection pass), and `now_ns` (the next tick) while a
    /// retransmission is waiting to be sent. Every event that changes the flow may bring it
    /// earlier; the caller asks again then.
    pub fn next_timer_ns(&self, now_ns: u64) -> u64 {
        let idle = self.last_activity_ns.saturating_add(self.cfg.idle_timeout_ns);
        if self.fallback.is_some() {
            return idle;
        }
        let mut at = idle;
        if let Some(e) = self.early.first() {
            at = at.min(e.ts_ns.saturating_add(EARLY_WAIT_NS + 1));
        }
        if self.segs.is_empty() {
            return at;
        }
        if let Some(since) = self.rto_since_ns {
            at = at.min(since.saturating_add(self.rto_ns()));
        }
        if self.tally.pending_pkts > 0 {
            at = at.min(now_ns);
        }
        if self.sack {
            at = at.min(self.rack_timeout_ns);
        }
        at
    }

    /// Progress (data cumulatively acknowledged or SACKed): the backoff ends and the timer
    /// restarts, or stops if nothing is outstanding.
    pub(super) fn restart_rto(&mut self, now: u64) {
        self.backoff = 0;
        self.rto_since_ns = (self.una < self.nxt).then_some(now);
    }
}
