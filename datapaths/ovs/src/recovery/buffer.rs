//! The segment buffer: every new server segment is kept, as the slab slot holding its frame,
//! until the client acknowledges it cumulatively, against a per-flow and a shared budget of
//! frame bytes; segments that reach the shim before the one preceding them wait in `early`.
//!
//! Every slot a [`Segment`] hands over ends in [`BufferPool::freed`] exactly once: when its
//! segment is acknowledged, when the flow falls back or is released, or at once when the
//! segment is not kept (not new, or its flow already fell back). The shim gives those slots
//! back to the port (`OvsDatapath::free_frames`).

use super::{FallbackReason, SenderFlow};
use super::scoreboard::{Seg, Tally};
use crate::events::{FrameSlot, Resent, Segment, UnbufferedReason};

/// Segments held while the one before them is missing (ring records out of order).
pub const MAX_EARLY_SEGMENTS: usize = 64;

/// Frame bytes buffered by all flows, against one limit, and the slab slots no longer needed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferPool {
    limit: u64,
    used: u64,
    freed: Vec<u32>,
}

impl BufferPool {
    pub fn new(limit: u64) -> Self {
        Self { limit, used: 0, freed: Vec::new() }
    }
    /// Slots no longer needed and not yet given back to the port.
    pub fn freed(&self) -> &[u32] {
        &self.freed
    }
    /// The freed slots were given back (the list keeps its capacity: this runs per ring record).
    pub fn clear_freed(&mut self) {
        self.freed.clear();
    }
    /// A slot whose frame was never accounted (not kept): only handed back.
    pub fn discard(&mut self, frame: FrameSlot) {
        self.freed.push(frame.index);
    }
    /// A kept frame's bytes back to the budget, and its slot handed back.
    pub(super) fn give_frame(&mut self, frame: FrameSlot) {
        self.give(u64::from(frame.len));
        self.freed.push(frame.index);
    }
    pub fn used(&self) -> u64 {
        self.used
    }
    pub fn limit(&self) -> u64 {
        self.limit
    }
    pub(super) fn try_take(&mut self, n: u64) -> bool {
        if self.used + n > self.limit {
            return false;
        }
        self.used += n;
        true
    }
    pub(super) fn give(&mut self, n: u64) {
        debug_assert!(n <= self.used, "pool accounting");
        self.used = self.used.saturating_sub(n);
    }
}

impl SenderFlow {
    /// A new segment from the server. Returns the reason if the flow falls back now (its
    /// buffer is then freed); a flow that fell back keeps buffering from `protect_from` on,
    /// so that it can rejoin.
    pub fn on_segment(&mut self, seg: Segment, pool: &mut BufferPool) -> Option<FallbackReason> {
        self.saw_tsval(seg.tsval);
        if self.uncopyable {
            pool.discard(seg.frame);
            return None;
        }
        self.last_activity_ns = self.last_activity_ns.max(seg.ts_ns);
        let start = self.unwrap(seg.seq);
        let end = start + u64::from(seg.len);
        if self.fallback.is_some() && start > self.nxt {
            // A hole the shim was not told of (its record was lost to a full ring): an
            // unprotected flow does not wait for it, its buffer starts again here.
            self.release(pool);
            self.protect_from = start;
            self.nxt = start;
        }
        if end <= self.nxt {
            // Not new after all (the BPF side saw a higher end first): a retransmission.
            pool.discard(seg.frame);
            let r = Resent { flow_id: seg.flow_id, ts_ns: seg.ts_ns, seq: seg.seq, len: seg.len, tsval: None };
            return self.on_resent(&r, pool);
        }
        let size = u64::from(seg.frame.len);
        if self.buffered_bytes + size > self.cfg.flow_buffer_bytes {
            pool.discard(seg.frame);
            return self.fall_back(FallbackReason::FlowBudget, end, pool);
        }
        if !pool.try_take(size) {
            pool.discard(seg.frame);
            return self.fall_back(FallbackReason::GlobalBudget, end, pool);
        }
        self.buffered_bytes += size;
        if start > self.nxt {
            // Records from different CPUs can reach the ring out of order: hold this one
            // until the segment before it arrives (or give up, see `on_tick`).
            if self.early.len() >= MAX_EARLY_SEGMENTS {
                // still counted in buffered_bytes: the fallback gives it back with the rest
                pool.discard(seg.frame);
                let hole_end = self.early_end().max(end);
                return self.fall_back(FallbackReason::Gap, hole_end, pool);
            }
            let i = self.early.partition_point(|e| self.unwrap(e.seq) <= start);
            self.early.insert(i, seg);
            return None;
        }
        self.append(seg, start, end);
        while self.early.first().is_some_and(|e| self.unwrap(e.seq) <= self.nxt) {
            let e = self.early.remove(0);
            let start = self.unwrap(e.seq);
            let end = start + u64::from(e.len);
            if end <= self.nxt {
                self.buffered_bytes -= u64::from(e.frame.len);
                pool.give_frame(e.frame);
                let r = Resent { flow_id: e.flow_id, ts_ns: e.ts_ns, seq: e.seq, len: e.len, tsval: None };
                self.on_resent(&r, pool);
            } else {
                self.append(e, start, end);
            }
        }
        None
    }

    /// Buffer a segment that starts at or below `snd_nxt` and ends beyond it (budget taken).
    fn append(&mut self, seg: Segment, start: u64, end: u64) {
        let start = start.max(self.nxt);
        if self.nxt == self.una {
            // Nothing outstanding: a new flight starts (tcp_rate_skb_sent) and the timer runs.
            self.first_tx_ns = seg.ts_ns;
            self.delivered_ns = seg.ts_ns;
            self.rto_since_ns = Some(seg.ts_ns);
        }
        if self.rack_xmit_ns != 0 && super::sent_after(self.rack_xmit_ns, seg.ts_ns, self.rack_end, end) {
            // Stamped before a segment already delivered (frames crossing the port on two
            // CPUs): RACK may time it, which no pass has seen yet.
            self.rack_timeout_ns = 0;
        }
        let pkts = u64::from(seg.len).div_ceil(self.mss).max(1);
        self.segs.push_back(Seg {
            start,
            end,
            frame: seg.frame,
            pkts,
            sent_ns: seg.ts_ns,
            tx: Some(self.tx_state()),
            sacked: false,
            lost: None,
            retrans_out: false,
            retransmitted: false,
            echoes_pending: 0,
        });
        self.pkts_out += pkts;
        self.nxt = end;
    }

    /// Stop protecting the flow until the client acknowledges `hole_end` (unwrapped): data
    /// below it was not all kept. The buffer is freed and starts again there. Returns the
    /// reason if the flow was protected until now (a fallback to count); a flow that had
    /// fallen back already only moves its hole.
    pub fn fall_back(&mut self, reason: FallbackReason, hole_end: u64, pool: &mut BufferPool) -> Option<FallbackReason> {
        self.release(pool);
        self.protect_from = self.protect_from.max(self.nxt).max(hole_end);
        self.nxt = self.protect_from;
        self.dupacks = 0;
        self.recovery_point = None;
        self.lost_since_ack = 0;
        self.timeout_pending = false;
        self.backoff = 0;
        if reason == FallbackReason::Unbuffered(UnbufferedReason::FrameTooLarge) {
            self.uncopyable = true;
        }
        if self.fallback.is_some() {
            return None;
        }
        self.fallback = Some(reason);
        Some(reason)
    }

    /// The port could not hand over a segment: nothing up to `hole_end` (a raw sequence
    /// number, exclusive) can be protected. See [`fall_back`](Self::fall_back).
    pub fn on_unbuffered(&mut self, reason: UnbufferedReason, hole_end: u32, pool: &mut BufferPool) -> Option<FallbackReason> {
        let hole_end = self.unwrap(hole_end);
        self.fall_back(FallbackReason::Unbuffered(reason), hole_end, pool)
    }

    /// Take a fallen-back flow under protection again if the cause has cleared: the client
    /// acknowledged the hole, so every byte outstanding is in the buffer again. Returns
    /// whether it rejoined.
    pub fn try_rejoin(&mut self) -> bool {
        if self.fallback.is_none() || self.uncopyable || self.una < self.protect_from || !self.early.is_empty() {
            return false;
        }
        self.fallback = None;
        // No loss detection ran while it was left to the server: the next tick runs one.
        self.rack_timeout_ns = 0;
        true
    }

    /// The end of the highest segment waiting for the one before it (0: none).
    pub(super) fn early_end(&self) -> u64 {
        self.early.iter().map(|e| self.unwrap(e.seq) + u64::from(e.len)).max().unwrap_or(0)
    }

    /// Return the buffer to the pool, slots included (before dropping the flow).
    pub fn release(&mut self, pool: &mut BufferPool) {
        pool.give(self.buffered_bytes);
        self.buffered_bytes = 0;
        pool.freed.extend(self.segs.drain(..).map(|s| s.frame.index));
        pool.freed.extend(self.early.drain(..).map(|e| e.frame.index));
        self.pkts_out = 0;
        self.tally = Tally::default();
        self.rto_since_ns = None;
        self.rack_timeout_ns = u64::MAX;
    }

    /// Server data at or below the highest sequence seen: one of the shim's injected copies
    /// coming back past the port, or the server's own retransmission.
    ///
    /// Data at or beyond `snd_nxt` reported this way lies in a hole before held segments:
    /// the port saw a later segment first (frames from the server can cross it out of order
    /// when sent from two CPUs) and handed this one over without its frame, so it cannot be
    /// retransmitted and the flow falls back (returned).
    pub fn on_resent(&mut self, r: &Resent, pool: &mut BufferPool) -> Option<FallbackReason> {
        self.saw_tsval(r.tsval);
        if self.fallback.is_some() {
            return None;
        }
        self.last_activity_ns = self.last_activity_ns.max(r.ts_ns);
        let start = self.unwrap(r.seq);
        let end = start + u64::from(r.len);
        if start >= self.nxt && !self.early.is_empty() {
            let hole_end = self.early_end().max(end);
            return self.fall_back(FallbackReason::Gap, hole_end, pool);
        }
        if end <= self.una || start >= self.nxt {
            return None;
        }
        let first = self.index_after(start);
        // An injected frame ends where its segment ends.
        if let Some(i) = (first..self.segs.len())
            .take_while(|&i| self.segs[i].start < end)
            .find(|&i| self.segs[i].end == end && self.segs[i].echoes_pending > 0)
        {
            let seg = &mut self.segs[i];
            seg.echoes_pending -= 1;
            seg.sent_ns = seg.sent_ns.max(r.ts_ns);
            return None;
        }
        // The server's own retransmission: RACK times these segments (and may now look past
        // them) by their new send time, which no pass has seen yet.
        self.rack_timeout_ns = 0;
        let mut i = first;
        while i < self.segs.len() && self.segs[i].start < end {
            self.update(i, |s| {
                s.retransmitted = true;
                s.sent_ns = s.sent_ns.max(r.ts_ns);
                if s.lost.is_some() && !s.sacked {
                    s.retrans_out = true;
                }
            });
            i += 1;
        }
        None
    }
}
