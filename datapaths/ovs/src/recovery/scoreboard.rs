//! The scoreboard: each buffered segment's state, like a Linux skb (SACKed, lost and why,
//! retransmission outstanding, ever retransmitted), the sums over all of them kept in step
//! with every change, and the SACK blocks that mark segments delivered.

use super::measure::{Delivery, TxState};
use super::loss::LossKind;
use super::SenderFlow;
use crate::events::{Ack, FrameSlot};

#[derive(Debug)]
pub(super) struct Seg {
    /// Accounted range `[start, end)`, unwrapped; the frame may also hold bytes below `start`
    /// (a repacketized retransmission that added new data, or a partially acknowledged head).
    pub(super) start: u64,
    pub(super) end: u64,
    /// The slab slot holding the frame.
    pub(super) frame: FrameSlot,
    pub(super) pkts: u64,
    /// Latest transmission (BPF time of the original or of a retransmission's echo).
    pub(super) sent_ns: u64,
    /// Rate state at the latest transmission; taken once the segment counts as delivered.
    pub(super) tx: Option<TxState>,
    pub(super) sacked: bool,
    pub(super) lost: Option<LossKind>,
    /// A retransmission of this lost segment is in flight.
    pub(super) retrans_out: bool,
    /// Ever retransmitted (by the shim or the server): no RTT samples (Karn).
    pub(super) retransmitted: bool,
    /// Injected copies whose `Resent` record has not come back yet.
    pub(super) echoes_pending: u32,
}

/// Scoreboard sums over the buffered segments, kept in step with every state change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Tally {
    pub(super) sacked_bytes: u64,
    pub(super) sacked_pkts: u64,
    pub(super) lost_bytes: u64,
    pub(super) lost_pkts: u64,
    pub(super) retrans_bytes: u64,
    pub(super) retrans_pkts: u64,
    /// Lost, not SACKed, no retransmission in flight: waiting to be retransmitted.
    pub(super) pending_pkts: u64,
}

impl Seg {
    pub(super) fn tally(&self) -> Tally {
        let bytes = self.end - self.start;
        let mut t = Tally::default();
        if self.sacked {
            t.sacked_bytes = bytes;
            t.sacked_pkts = self.pkts;
            return t;
        }
        if self.lost.is_some() {
            t.lost_bytes = bytes;
            t.lost_pkts = self.pkts;
            if self.retrans_out {
                t.retrans_bytes = bytes;
                t.retrans_pkts = self.pkts;
            } else {
                t.pending_pkts = self.pkts;
            }
        }
        t
    }
}

impl Tally {
    pub(super) fn add(&mut self, o: Tally) {
        self.sacked_bytes += o.sacked_bytes;
        self.sacked_pkts += o.sacked_pkts;
        self.lost_bytes += o.lost_bytes;
        self.lost_pkts += o.lost_pkts;
        self.retrans_bytes += o.retrans_bytes;
        self.retrans_pkts += o.retrans_pkts;
        self.pending_pkts += o.pending_pkts;
    }
    pub(super) fn sub(&mut self, o: Tally) {
        self.sacked_bytes -= o.sacked_bytes;
        self.sacked_pkts -= o.sacked_pkts;
        self.lost_bytes -= o.lost_bytes;
        self.lost_pkts -= o.lost_pkts;
        self.retrans_bytes -= o.retrans_bytes;
        self.retrans_pkts -= o.retrans_pkts;
        self.pending_pkts -= o.pending_pkts;
    }
}

impl SenderFlow {
    /// Change segment `i`'s state with the tally kept in step.
    pub(super) fn update(&mut self, i: usize, f: impl FnOnce(&mut Seg)) {
        let seg = &mut self.segs[i];
        self.tally.sub(seg.tally());
        f(seg);
        self.tally.add(seg.tally());
    }

    /// Index of the first segment that ends after `seq`.
    pub(super) fn index_after(&self, seq: u64) -> usize {
        self.segs.partition_point(|s| s.end <= seq)
    }

    /// Marks the SACKed segments; returns whether the first block reports a duplicate the
    /// client received (a D-SACK, RFC 2883: below the cumulative ACK or inside the second
    /// block): data sent twice, one copy of which was not needed.
    pub(super) fn apply_sack(&mut self, ack: &Ack, now: u64, d: &mut Delivery) -> bool {
        let mut dsack = false;
        for (k, b) in ack.sack.iter().enumerate() {
            let start = self.unwrap(b.start);
            let end = self.unwrap(b.end);
            if k == 0 && start < end && start < self.una {
                dsack = true;
            }
            // Below snd_una is a D-SACK (or stale); beyond snd_nxt is not ours to believe.
            if start >= end || start < self.una || end > self.nxt {
                continue;
            }
            if k == 0 {
                if let Some(next) = ack.sack.get(1) {
                    let (ns, ne) = (self.unwrap(next.start), self.unwrap(next.end));
                    if ns <= start && end <= ne {
                        dsack = true;
                        continue; // D-SACK inside the next block: a duplicate, not new data.
                    }
                }
            }
            let mut i = self.segs.partition_point(|s| s.start < start);
            while i < self.segs.len() && self.segs[i].end <= end {
                if !self.segs[i].sacked {
                    let tx = self.segs[i].tx.take();
                    self.update(i, |s| {
                        s.sacked = true;
                        s.lost = None;
                        s.retrans_out = false;
                    });
                    let s = &self.segs[i];
                    let (sent, seg_end, bytes, pkts, retrans) =
                        (s.sent_ns, s.end, s.end - s.start, s.pkts, s.retransmitted);
                    self.record_delivery(sent, seg_end, bytes, pkts, retrans, tx, now, d);
                }
                i += 1;
            }
        }
        dsack
    }
}
