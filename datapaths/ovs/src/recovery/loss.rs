//! Loss detection: RACK and the SACK threshold on SACK flows, duplicate ACKs and NewReno's
//! partial ACKs without SACK (see the model in `mod.rs`). The retransmission timer, the last
//! resort, is in `timers.rs`.

use super::{sent_after, SenderFlow};
use crate::events::Ack;

/// Duplicate ACKs (non-SACK), or segments' worth of SACKed data above a hole, that mark it lost.
pub const DUPACK_THRESHOLD: u64 = 3;

/// What marked a segment lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossKind {
    /// Duplicate ACKs, a NewReno partial ACK, or the SACK threshold.
    Fast,
    Rack,
    Timeout,
}

impl SenderFlow {
    /// Mark the first unSACKed segment lost; returns the packets newly marked. Only a
    /// timeout re-marks a segment already lost (its retransmission is presumed lost too).
    pub(super) fn mark_head_lost(&mut self, kind: LossKind) -> u64 {
        let Some(i) = self.segs.iter().position(|s| !s.sacked) else { return 0 };
        let was_lost = self.segs[i].lost.is_some();
        if was_lost && kind != LossKind::Timeout {
            return 0;
        }
        self.update(i, |s| {
            s.lost = Some(kind);
            s.retrans_out = false;
        });
        if was_lost { 0 } else { self.segs[i].pkts }
    }

    /// RACK and the SACK threshold (SACK flows); returns the packets newly marked lost, and
    /// sets `rack_timeout_ns` to when RACK would mark the next one if nothing else happened.
    pub(super) fn detect_losses(&mut self, now: u64) -> u64 {
        self.rack_timeout_ns = u64::MAX;
        if !self.sack || self.segs.is_empty() {
            return 0;
        }
        let reo_wnd = if self.min_rtt_ns == u64::MAX { 0 } else { self.min_rtt_ns / 4 };
        let threshold = DUPACK_THRESHOLD * self.mss;
        let mut sacked_above = self.tally.sacked_bytes;
        let mut newly = 0;
        for i in 0..self.segs.len() {
            let s = &self.segs[i];
            if s.sacked {
                sacked_above -= s.end - s.start;
                continue;
            }
            let before_delivered = self.rack_xmit_ns != 0
                && sent_after(self.rack_xmit_ns, s.sent_ns, self.rack_end, s.end);
            if !before_delivered && !s.retransmitted && sacked_above < threshold {
                // Every later segment was sent later still, and has less SACKed above it.
                break;
            }
            if s.lost.is_some() && !s.retrans_out {
                continue;
            }
            // RACK marks it once more than rack_rtt + reo_wnd has passed since it was sent.
            let rack_due = s.sent_ns.saturating_add(self.rack_rtt_ns + reo_wnd).saturating_add(1);
            let kind = if before_delivered && now >= rack_due {
                Some(LossKind::Rack)
            } else if s.lost.is_none() && !s.retrans_out && sacked_above >= threshold {
                Some(LossKind::Fast)
            } else {
                if before_delivered {
                    // Only time can change this one now: the timer wheel comes back for it.
                    self.rack_timeout_ns = self.rack_timeout_ns.min(rack_due);
                }
                None
            };
            if let Some(kind) = kind {
                if s.lost.is_none() {
                    newly += s.pkts;
                }
                self.update(i, |s| {
                    s.lost = Some(kind);
                    s.retrans_out = false;
                });
            }
        }
        newly
    }

    /// A duplicate ACK: nothing new acknowledged while data is outstanding, and no payload,
    /// no FIN and the same window (anything else is not a congestion signal).
    pub(super) fn is_dupack(&self, ack: &Ack, ack_seq: u64) -> bool {
        ack_seq == self.una
            && self.una < self.nxt
            && ack.payload_len == 0
            && !ack.fin
            && ack.window_bytes == self.last_window
    }

    /// Counts a duplicate ACK; without SACK the third marks the segment at `snd_una` lost and
    /// starts NewReno recovery. Returns the packets newly marked lost.
    pub(super) fn on_dupack(&mut self) -> u64 {
        self.dupacks += 1;
        let mut newly_lost = 0;
        if !self.sack && self.dupacks == DUPACK_THRESHOLD && self.recovery_point.is_none() {
            newly_lost += self.mark_head_lost(LossKind::Fast);
            self.recovery_point = Some(self.nxt);
        }
        newly_lost
    }

    /// `snd_una` advanced: recovery ends once its point is acknowledged; before that, without
    /// SACK, the ACK is partial. Returns the packets newly marked lost.
    pub(super) fn on_cumulative_progress(&mut self) -> u64 {
        let mut newly_lost = 0;
        if let Some(point) = self.recovery_point {
            if self.una >= point {
                self.recovery_point = None;
            } else if !self.sack {
                // NewReno: a partial ACK means the segment now at snd_una was lost too.
                newly_lost += self.mark_head_lost(LossKind::Fast);
            }
        }
        newly_lost
    }

    /// RACK: remember the most recently sent of the delivered segments, and its RTT.
    pub(super) fn rack_advance(&mut self, sent_ns: u64, end: u64, rtt: u64, retransmitted: bool) {
        // A retransmission acknowledged faster than any RTT was the original's delivery: it
        // says nothing about when the retransmission got through (tcp_rack_advance).
        let ambiguous = retransmitted && self.min_rtt_ns != u64::MAX && rtt < self.min_rtt_ns;
        if !ambiguous && sent_after(sent_ns, self.rack_xmit_ns, end, self.rack_end) {
            self.rack_xmit_ns = sent_ns;
            self.rack_end = end;
            self.rack_rtt_ns = rtt;
        }
    }
}
