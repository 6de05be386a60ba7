//! Per-flow sender model: what the server's TCP would know about its own connection, rebuilt
//! from what crosses the switch port, so the shim can recover losses on the server's behalf
//! and measure the flow for the agent.
//!
//! Model. Sequence numbers are unwrapped to `u64` offsets from the server's ISN (the first
//! data byte is 1), so nothing below compares raw 32-bit numbers. Every new server segment
//! (`Segment`) is kept, whole frame included, until the client acknowledges it cumulatively;
//! the buffer is contiguous from `snd_una` to `snd_nxt` (a segment the shim never saw, a gap,
//! makes the flow unprotectable, and it falls back). Each segment carries a scoreboard state
//! like a Linux skb: SACKed, lost (and why), retransmission outstanding, ever retransmitted.
//! In-flight is TCP's `packets_out − sacked_out − lost_out + retrans_out`.
//!
//! Loss detection, because the server is kept blind to losses while a flow is under control:
//! - RACK (SACK flows): a segment is lost once a segment sent after it has been delivered and
//!   more than the latest delivered segment's RTT plus a reordering window (min_rtt / 4) has
//!   passed since it was sent. Timestamps are the BPF program's, taken as frames crossed the
//!   port. A retransmission that is itself lost is caught the same way, by its own send time.
//! - SACK threshold: three segments' worth of SACKed data above a hole marks it lost at once.
//! - Without SACK: three duplicate ACKs mark the segment at `snd_una` lost, and until the
//!   recovery point is acknowledged every partial ACK marks the next one lost (NewReno).
//! - A retransmission timer (RFC 6298 with a 10 ms variance floor instead of 200 ms, so it
//!   fires before the server's own RTO or tail-loss probe): no delivery (cumulative or
//!   SACKed) for RTO →
//!   the first unSACKed segment is lost; exponential backoff until progress resumes.
//!
//! Measurement follows Linux: RTT samples only from never-retransmitted segments (Karn),
//! srtt/rttvar/min_rtt as RFC 6298, and delivery-rate samples as `net/ipv4/tcp_rate.c`
//! (each segment remembers the flow's delivered count and times when it was sent).

use std::collections::VecDeque;

use ccswitch_ccp::Primitives;

use crate::events::{Ack, Control, Established, Resent, Segment, UnbufferedReason};

/// RTO before the first RTT sample (RFC 6298).
pub const INITIAL_RTO_NS: u64 = 1_000_000_000;
/// Floor of the RTO's variance term: a Linux server's is 200 ms, ours must fire first.
pub const RTO_VARIANCE_FLOOR_NS: u64 = 10_000_000;
pub const MAX_RTO_NS: u64 = 60_000_000_000;
/// Duplicate ACKs (non-SACK), or segments' worth of SACKed data above a hole, that mark it lost.
pub const DUPACK_THRESHOLD: u64 = 3;
/// Segments held while the one before them is missing (ring records out of order).
pub const MAX_EARLY_SEGMENTS: usize = 64;
/// How long a missing segment may take to show up before the flow gives up (falls back).
pub const EARLY_WAIT_NS: u64 = 20_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryConfig {
    /// Frame bytes one flow may keep buffered.
    pub flow_buffer_bytes: u64,
    /// A flow with no record for this long is forgotten.
    pub idle_timeout_ns: u64,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        Self { flow_buffer_bytes: 8 << 20, idle_timeout_ns: 120_000_000_000 }
    }
}

/// Frame bytes buffered by all flows, against one limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferPool {
    limit: u64,
    used: u64,
}

impl BufferPool {
    pub fn new(limit: u64) -> Self {
        Self { limit, used: 0 }
    }
    pub fn used(&self) -> u64 {
        self.used
    }
    pub fn limit(&self) -> u64 {
        self.limit
    }
    fn try_take(&mut self, n: u64) -> bool {
        if self.used + n > self.limit {
            return false;
        }
        self.used += n;
        true
    }
    fn give(&mut self, n: u64) {
        debug_assert!(n <= self.used, "pool accounting");
        self.used = self.used.saturating_sub(n);
    }
}

/// Why a flow left the shim's protection for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackReason {
    /// Its own buffer budget was exhausted.
    FlowBudget,
    /// The shared buffer budget was exhausted.
    GlobalBudget,
    /// Server data arrived beyond a hole the shim never saw, so it could not retransmit it.
    Gap,
    /// The BPF side could not hand a segment over.
    Unbuffered(UnbufferedReason),
}

impl FallbackReason {
    pub fn name(self) -> &'static str {
        match self {
            FallbackReason::FlowBudget => "flow_budget",
            FallbackReason::GlobalBudget => "global_budget",
            FallbackReason::Gap => "gap",
            FallbackReason::Unbuffered(UnbufferedReason::RingFull) => "ring_full",
            FallbackReason::Unbuffered(UnbufferedReason::FrameTooLarge) => "frame_too_large",
        }
    }
}

/// What marked a segment lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossKind {
    /// Duplicate ACKs, a NewReno partial ACK, or the SACK threshold.
    Fast,
    Rack,
    Timeout,
}

/// Retransmissions made by one [`SenderFlow::retransmit`] call, by what found the loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Retransmitted {
    pub fast: u64,
    pub rack: u64,
    pub timeout: u64,
}

impl Retransmitted {
    pub fn total(&self) -> u64 {
        self.fast + self.rack + self.timeout
    }
}

/// The result of one ACK.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// CCP measurements (`rtt_sample_us` is the latest sample, carried over ACKs without one).
    pub prims: Primitives,
    /// This ACK's own RTT sample, if it produced one.
    pub rtt_sample_us: Option<u64>,
    /// `snd_una` or the SACKed bytes changed: the directive's `sacked_*` must be rewritten.
    pub scoreboard_changed: bool,
}

/// The result of a timer tick.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TickOutcome {
    pub newly_lost_pkts: u64,
    pub timed_out: bool,
    /// The flow fell back on this tick (a missing segment never showed up).
    pub fell_back: Option<FallbackReason>,
}

/// The flow's state when a segment was (re)transmitted (`tcp_rate_skb_sent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TxState {
    delivered: u64,
    delivered_ns: u64,
    first_tx_ns: u64,
}

#[derive(Debug)]
struct Seg {
    /// Accounted range `[start, end)`, unwrapped; the frame may also hold bytes below `start`
    /// (a repacketized retransmission that added new data, or a partially acknowledged head).
    start: u64,
    end: u64,
    frame: Vec<u8>,
    pkts: u64,
    /// Latest transmission (BPF time of the original or of a retransmission's echo).
    sent_ns: u64,
    /// Rate state at the latest transmission; taken once the segment counts as delivered.
    tx: Option<TxState>,
    sacked: bool,
    lost: Option<LossKind>,
    /// A retransmission of this lost segment is in flight.
    retrans_out: bool,
    /// Ever retransmitted (by the shim or the server): no RTT samples (Karn).
    retransmitted: bool,
    /// Injected copies whose `Resent` record has not come back yet.
    echoes_pending: u32,
}

/// Scoreboard sums over the buffered segments, kept in step with every state change.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tally {
    sacked_bytes: u64,
    sacked_pkts: u64,
    lost_bytes: u64,
    lost_pkts: u64,
    retrans_bytes: u64,
    retrans_pkts: u64,
    /// Lost, not SACKed, no retransmission in flight: waiting to be retransmitted.
    pending_pkts: u64,
}

impl Seg {
    fn tally(&self) -> Tally {
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
    fn add(&mut self, o: Tally) {
        self.sacked_bytes += o.sacked_bytes;
        self.sacked_pkts += o.sacked_pkts;
        self.lost_bytes += o.lost_bytes;
        self.lost_pkts += o.lost_pkts;
        self.retrans_bytes += o.retrans_bytes;
        self.retrans_pkts += o.retrans_pkts;
        self.pending_pkts += o.pending_pkts;
    }
    fn sub(&mut self, o: Tally) {
        self.sacked_bytes -= o.sacked_bytes;
        self.sacked_pkts -= o.sacked_pkts;
        self.lost_bytes -= o.lost_bytes;
        self.lost_pkts -= o.lost_pkts;
        self.retrans_bytes -= o.retrans_bytes;
        self.retrans_pkts -= o.retrans_pkts;
        self.pending_pkts -= o.pending_pkts;
    }
}

/// One rate sample in the making (`struct rate_sample`).
#[derive(Debug, Default)]
struct RateSample {
    prior_delivered: u64,
    prior_ns: u64,
    snd_interval_ns: u64,
    last_end: u64,
    valid: bool,
}

/// Sent after: later time, or the same time and a higher end (`tcp_skb_sent_after`).
fn sent_after(t1: u64, t2: u64, end1: u64, end2: u64) -> bool {
    t1 > t2 || (t1 == t2 && end1 > end2)
}

#[derive(Debug)]
pub struct SenderFlow {
    flow_id: u32,
    mss: u64,
    sack: bool,
    isn: u32,
    cfg: RecoveryConfig,
    segs: VecDeque<Seg>,
    /// Segments that arrived before the one preceding them, by start.
    early: Vec<Segment>,
    una: u64,
    nxt: u64,
    buffered_bytes: u64,
    pkts_out: u64,
    tally: Tally,
    // Duplicate ACKs and NewReno.
    last_window: u32,
    dupacks: u64,
    recovery_point: Option<u64>,
    // RTT and the retransmission timer.
    srtt_ns: u64,
    rttvar_ns: u64,
    min_rtt_ns: u64,
    last_rtt_ns: u64,
    backoff: u32,
    /// Start of the current RTO period (last progress or last expiry); None = nothing outstanding.
    rto_since_ns: Option<u64>,
    timeout_pending: bool,
    lost_since_ack: u64,
    // RACK: the most recently sent delivered segment.
    rack_xmit_ns: u64,
    rack_end: u64,
    rack_rtt_ns: u64,
    // Delivery rate.
    delivered: u64,
    delivered_ns: u64,
    first_tx_ns: u64,
    delivery_rate: u64,
    last_activity_ns: u64,
    fallback: Option<FallbackReason>,
}

impl SenderFlow {
    pub fn new(est: &Established, cfg: RecoveryConfig) -> Self {
        Self {
            flow_id: est.flow_id,
            mss: u64::from(est.mss.max(1)),
            sack: est.sack,
            isn: est.server_isn,
            cfg,
            segs: VecDeque::new(),
            early: Vec::new(),
            una: 1,
            nxt: 1,
            buffered_bytes: 0,
            pkts_out: 0,
            tally: Tally::default(),
            last_window: 0,
            dupacks: 0,
            recovery_point: None,
            srtt_ns: 0,
            rttvar_ns: 0,
            min_rtt_ns: u64::MAX,
            last_rtt_ns: 0,
            backoff: 0,
            rto_since_ns: None,
            timeout_pending: false,
            lost_since_ack: 0,
            rack_xmit_ns: 0,
            rack_end: 0,
            rack_rtt_ns: 0,
            delivered: 0,
            delivered_ns: est.ts_ns,
            first_tx_ns: est.ts_ns,
            delivery_rate: 0,
            last_activity_ns: est.ts_ns,
            fallback: None,
        }
    }

    // --- accessors ----------------------------------------------------------------------

    pub fn flow_id(&self) -> u32 {
        self.flow_id
    }
    pub fn mss(&self) -> u32 {
        self.mss as u32
    }
    pub fn fallback(&self) -> Option<FallbackReason> {
        self.fallback
    }
    /// Unwrapped `snd_una` / `snd_nxt` (offsets from the ISN; data starts at 1).
    pub fn snd_una(&self) -> u64 {
        self.una
    }
    pub fn snd_nxt(&self) -> u64 {
        self.nxt
    }
    pub fn buffered_segments(&self) -> usize {
        self.segs.len()
    }
    pub fn buffered_bytes(&self) -> u64 {
        self.buffered_bytes
    }
    pub fn sacked_bytes(&self) -> u64 {
        self.tally.sacked_bytes
    }
    pub fn lost_bytes(&self) -> u64 {
        self.tally.lost_bytes
    }
    pub fn bytes_in_flight(&self) -> u64 {
        (self.nxt - self.una + self.tally.retrans_bytes)
            .saturating_sub(self.tally.sacked_bytes + self.tally.lost_bytes)
    }
    pub fn packets_in_flight(&self) -> u64 {
        (self.pkts_out + self.tally.retrans_pkts)
            .saturating_sub(self.tally.sacked_pkts + self.tally.lost_pkts)
    }
    /// 0 before the first sample.
    pub fn srtt_ns(&self) -> u64 {
        self.srtt_ns
    }
    pub fn rttvar_ns(&self) -> u64 {
        self.rttvar_ns
    }
    pub fn min_rtt_ns(&self) -> Option<u64> {
        (self.min_rtt_ns != u64::MAX).then_some(self.min_rtt_ns)
    }
    /// Latest valid delivery-rate sample, bytes/s (0 = none yet).
    pub fn delivery_rate(&self) -> u64 {
        self.delivery_rate
    }
    /// Current retransmission timeout, backoff included.
    pub fn rto_ns(&self) -> u64 {
        let base = if self.srtt_ns == 0 {
            INITIAL_RTO_NS
        } else {
            self.srtt_ns + (4 * self.rttvar_ns).max(RTO_VARIANCE_FLOOR_NS)
        };
        base.checked_shl(self.backoff).unwrap_or(u64::MAX).min(MAX_RTO_NS)
    }
    pub fn is_idle(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.last_activity_ns) >= self.cfg.idle_timeout_ns
    }

    /// The directive for window `cwnd_bytes`.
    pub fn control(&self, cwnd_bytes: u32) -> Control {
        Control {
            cwnd_bytes: cwnd_bytes.max(2 * self.mss as u32),
            sacked_bytes: u32::try_from(self.tally.sacked_bytes).unwrap_or(u32::MAX),
            sacked_una: self.raw(self.una),
            active: true,
        }
    }

    // --- sequence numbers ---------------------------------------------------------------

    fn raw(&self, seq: u64) -> u32 {
        self.isn.wrapping_add(seq as u32)
    }

    /// The unwrapped offset of a raw number near `snd_una` (within ±2^31).
    fn unwrap(&self, raw: u32) -> u64 {
        let d = raw.wrapping_sub(self.raw(self.una)) as i32;
        self.una.saturating_add_signed(i64::from(d))
    }

    // --- buffer -------------------------------------------------------------------------

    /// A new segment from the server. Returns the reason if the flow has to fall back now
    /// (its buffer is then freed); a flow that already fell back ignores segments.
    pub fn on_segment(&mut self, seg: Segment, pool: &mut BufferPool) -> Option<FallbackReason> {
        if self.fallback.is_some() {
            return None;
        }
        self.last_activity_ns = self.last_activity_ns.max(seg.ts_ns);
        let start = self.unwrap(seg.seq);
        let end = start + u64::from(seg.len);
        if end <= self.nxt {
            // Not new after all (the BPF side saw a higher end first): a retransmission.
            let r = Resent { flow_id: seg.flow_id, ts_ns: seg.ts_ns, seq: seg.seq, len: seg.len };
            return self.on_resent(&r, pool);
        }
        let size = seg.frame.len() as u64;
        if self.buffered_bytes + size > self.cfg.flow_buffer_bytes {
            self.fall_back(FallbackReason::FlowBudget, pool);
            return self.fallback;
        }
        if !pool.try_take(size) {
            self.fall_back(FallbackReason::GlobalBudget, pool);
            return self.fallback;
        }
        self.buffered_bytes += size;
        if start > self.nxt {
            // Records from different CPUs can reach the ring out of order: hold this one
            // until the segment before it arrives (or give up, see `on_tick`).
            if self.early.len() >= MAX_EARLY_SEGMENTS {
                self.fall_back(FallbackReason::Gap, pool);
                return self.fallback;
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
                self.buffered_bytes -= e.frame.len() as u64;
                pool.give(e.frame.len() as u64);
                let r = Resent { flow_id: e.flow_id, ts_ns: e.ts_ns, seq: e.seq, len: e.len };
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

    fn tx_state(&self) -> TxState {
        TxState { delivered: self.delivered, delivered_ns: self.delivered_ns, first_tx_ns: self.first_tx_ns }
    }

    /// Stop protecting the flow for good and free its buffer.
    pub fn fall_back(&mut self, reason: FallbackReason, pool: &mut BufferPool) {
        self.release(pool);
        self.fallback.get_or_insert(reason);
    }

    /// Return the buffer to the pool (before dropping the flow).
    pub fn release(&mut self, pool: &mut BufferPool) {
        pool.give(self.buffered_bytes);
        self.buffered_bytes = 0;
        self.segs.clear();
        self.early.clear();
        self.pkts_out = 0;
        self.tally = Tally::default();
        self.rto_since_ns = None;
    }

    /// Change segment `i`'s state with the tally kept in step.
    fn update(&mut self, i: usize, f: impl FnOnce(&mut Seg)) {
        let seg = &mut self.segs[i];
        self.tally.sub(seg.tally());
        f(seg);
        self.tally.add(seg.tally());
    }

    /// Index of the first segment that ends after `seq`.
    fn index_after(&self, seq: u64) -> usize {
        self.segs.partition_point(|s| s.end <= seq)
    }

    /// Server data at or below the highest sequence seen: one of the shim's injected copies
    /// coming back past the port, or the server's own retransmission.
    ///
    /// Data at or beyond `snd_nxt` reported this way lies in a hole before held segments:
    /// the port saw a later segment first (frames from the server can cross it out of order
    /// when sent from two CPUs) and handed this one over without its frame, so it cannot be
    /// retransmitted and the flow falls back (returned).
    pub fn on_resent(&mut self, r: &Resent, pool: &mut BufferPool) -> Option<FallbackReason> {
        if self.fallback.is_some() {
            return None;
        }
        self.last_activity_ns = self.last_activity_ns.max(r.ts_ns);
        let start = self.unwrap(r.seq);
        let end = start + u64::from(r.len);
        if start >= self.nxt && !self.early.is_empty() {
            self.fall_back(FallbackReason::Gap, pool);
            return self.fallback;
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

    // --- ACKs ---------------------------------------------------------------------------

    pub fn on_ack(&mut self, ack: &Ack, pool: &mut BufferPool) -> AckOutcome {
        if self.fallback.is_some() {
            return AckOutcome::default();
        }
        let now = ack.ts_ns;
        self.last_activity_ns = self.last_activity_ns.max(now);
        let prior_una = self.una;
        let prior_sacked = self.tally.sacked_bytes;
        let mut d = Delivery::default();
        let mut newly_lost = 0;

        let ack_seq = self.unwrap(ack.ack);
        if ack_seq > self.una && ack_seq <= self.nxt {
            while let Some(front) = self.segs.front() {
                if front.end <= ack_seq {
                    let mut seg = self.segs.pop_front().expect("front");
                    self.tally.sub(seg.tally());
                    self.pkts_out -= seg.pkts;
                    self.buffered_bytes -= seg.frame.len() as u64;
                    pool.give(seg.frame.len() as u64);
                    d.acked_pkts += seg.pkts;
                    if !seg.sacked {
                        self.deliver(&mut seg, now, &mut d);
                    }
                } else {
                    if front.start < ack_seq {
                        // Partially acknowledged: the rest stays outstanding.
                        self.delivered += ack_seq - front.start;
                        self.update(0, |s| s.start = ack_seq);
                    }
                    break;
                }
            }
            d.acked_bytes = ack_seq - self.una;
            self.una = ack_seq;
            self.dupacks = 0;
            self.backoff = 0;
            self.rto_since_ns = (self.una < self.nxt).then_some(now);
            if let Some(point) = self.recovery_point {
                if self.una >= point {
                    self.recovery_point = None;
                } else if !self.sack {
                    // NewReno: a partial ACK means the segment now at snd_una was lost too.
                    newly_lost += self.mark_head_lost(LossKind::Fast);
                }
            }
        } else if ack_seq == self.una
            && self.una < self.nxt
            && ack.payload_len == 0
            && !ack.fin
            && ack.window_bytes == self.last_window
        {
            self.dupacks += 1;
            if !self.sack && self.dupacks == DUPACK_THRESHOLD && self.recovery_point.is_none() {
                newly_lost += self.mark_head_lost(LossKind::Fast);
                self.recovery_point = Some(self.nxt);
            }
        }
        self.last_window = ack.window_bytes;

        if self.sack {
            self.apply_sack(ack, now, &mut d);
        }
        if d.delivered_bytes > 0 {
            self.delivered_ns = now;
            // SACKed data is progress too: the path delivers, the holes are RACK's.
            self.backoff = 0;
            self.rto_since_ns = (self.una < self.nxt).then_some(now);
        }
        let rtt_sample = d.rtt_sent_ns.map(|sent| now.saturating_sub(sent));
        if let Some(rtt) = rtt_sample {
            self.rtt_update(rtt);
        }
        let (rate_out, rate_in) = self.rate_generate(&d, now);
        newly_lost += self.detect_losses(now);

        let prims = Primitives {
            bytes_acked: d.acked_bytes,
            packets_acked: d.acked_pkts,
            bytes_misordered: self.tally.sacked_bytes,
            packets_misordered: self.tally.sacked_pkts,
            ecn_bytes: if ack.ece { d.delivered_bytes } else { 0 },
            ecn_packets: if ack.ece { d.delivered_pkts } else { 0 },
            lost_pkts_sample: newly_lost + std::mem::take(&mut self.lost_since_ack),
            was_timeout: std::mem::take(&mut self.timeout_pending),
            rtt_sample_us: self.last_rtt_ns / 1000,
            rate_outgoing: rate_out,
            rate_incoming: rate_in,
            bytes_in_flight: self.bytes_in_flight(),
            packets_in_flight: self.packets_in_flight(),
            bytes_pending: 0,
            now: now / 1000,
        };
        AckOutcome {
            prims,
            rtt_sample_us: rtt_sample.map(|r| r / 1000),
            scoreboard_changed: self.una != prior_una || self.tally.sacked_bytes != prior_sacked,
        }
    }

    fn apply_sack(&mut self, ack: &Ack, now: u64, d: &mut Delivery) {
        for (k, b) in ack.sack.iter().enumerate() {
            let start = self.unwrap(b.start);
            let end = self.unwrap(b.end);
            // Below snd_una is a D-SACK (or stale); beyond snd_nxt is not ours to believe.
            if start >= end || start < self.una || end > self.nxt {
                continue;
            }
            if k == 0 {
                if let Some(next) = ack.sack.get(1) {
                    let (ns, ne) = (self.unwrap(next.start), self.unwrap(next.end));
                    if ns <= start && end <= ne {
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
    }

    fn deliver(&mut self, seg: &mut Seg, now: u64, d: &mut Delivery) {
        let tx = seg.tx.take();
        self.record_delivery(seg.sent_ns, seg.end, seg.end - seg.start, seg.pkts, seg.retransmitted, tx, now, d);
    }

    /// A segment is newly delivered (cumulatively acknowledged or SACKed).
    #[allow(clippy::too_many_arguments)]
    fn record_delivery(
        &mut self,
        sent_ns: u64,
        end: u64,
        bytes: u64,
        pkts: u64,
        retransmitted: bool,
        tx: Option<TxState>,
        now: u64,
        d: &mut Delivery,
    ) {
        self.delivered += bytes;
        d.delivered_bytes += bytes;
        d.delivered_pkts += pkts;
        let rtt = now.saturating_sub(sent_ns);
        if !retransmitted {
            d.rtt_sent_ns = Some(d.rtt_sent_ns.map_or(sent_ns, |t| t.max(sent_ns)));
        }
        // A retransmission acknowledged faster than any RTT was the original's delivery: it
        // says nothing about when the retransmission got through (tcp_rack_advance).
        let ambiguous = retransmitted && self.min_rtt_ns != u64::MAX && rtt < self.min_rtt_ns;
        if !ambiguous && sent_after(sent_ns, self.rack_xmit_ns, end, self.rack_end) {
            self.rack_xmit_ns = sent_ns;
            self.rack_end = end;
            self.rack_rtt_ns = rtt;
        }
        if let Some(tx) = tx {
            let rs = &mut d.rate;
            if !rs.valid || sent_after(sent_ns, self.first_tx_ns, end, rs.last_end) {
                rs.prior_delivered = tx.delivered;
                rs.prior_ns = tx.delivered_ns;
                rs.snd_interval_ns = sent_ns.saturating_sub(tx.first_tx_ns);
                rs.last_end = end;
                rs.valid = true;
                self.first_tx_ns = sent_ns;
            }
        }
    }

    fn rtt_update(&mut self, rtt: u64) {
        self.last_rtt_ns = rtt;
        self.min_rtt_ns = self.min_rtt_ns.min(rtt);
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt.max(1);
            self.rttvar_ns = rtt / 2;
        } else {
            let err = self.srtt_ns.abs_diff(rtt);
            self.rttvar_ns = (3 * self.rttvar_ns + err) / 4;
            self.srtt_ns = ((7 * self.srtt_ns + rtt) / 8).max(1);
        }
    }

    /// (rate_outgoing, rate_incoming) of this ACK in bytes/s, 0 = no sample; also updates
    /// the validated delivery rate (`tcp_rate_gen`).
    fn rate_generate(&mut self, d: &Delivery, now: u64) -> (u64, u64) {
        let rs = &d.rate;
        if !rs.valid || d.delivered_bytes == 0 {
            return (0, 0);
        }
        let delta = self.delivered - rs.prior_delivered;
        let snd = rs.snd_interval_ns;
        let ack = now.saturating_sub(rs.prior_ns);
        let per_s = |interval: u64| {
            if interval == 0 { 0 } else { (u128::from(delta) * 1_000_000_000 / u128::from(interval)) as u64 }
        };
        let interval = snd.max(ack);
        // Shorter than a round trip: the ACKs were compressed, the sample overestimates.
        if interval > 0 && (self.min_rtt_ns == u64::MAX || interval >= self.min_rtt_ns) {
            self.delivery_rate = per_s(interval);
        }
        (per_s(snd), per_s(ack))
    }

    // --- loss detection -----------------------------------------------------------------

    /// Mark the first unSACKed segment lost; returns the packets newly marked. Only a
    /// timeout re-marks a segment already lost (its retransmission is presumed lost too).
    fn mark_head_lost(&mut self, kind: LossKind) -> u64 {
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

    /// RACK and the SACK threshold (SACK flows); returns the packets newly marked lost.
    fn detect_losses(&mut self, now: u64) -> u64 {
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
            let kind = if before_delivered
                && now.saturating_sub(s.sent_ns) > self.rack_rtt_ns + reo_wnd
            {
                Some(LossKind::Rack)
            } else if s.lost.is_none() && !s.retrans_out && sacked_above >= threshold {
                Some(LossKind::Fast)
            } else {
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

    /// Timer: RACK's reordering timeout and the retransmission timer.
    pub fn on_tick(&mut self, now_ns: u64, pool: &mut BufferPool) -> TickOutcome {
        if self.fallback.is_some() {
            return TickOutcome::default();
        }
        if self.early.first().is_some_and(|e| now_ns.saturating_sub(e.ts_ns) > EARLY_WAIT_NS) {
            self.fall_back(FallbackReason::Gap, pool);
            return TickOutcome { fell_back: self.fallback, ..TickOutcome::default() };
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

    /// Segments waiting for retransmission.
    pub fn pending_retransmissions(&self) -> u64 {
        self.tally.pending_pkts
    }

    /// Hand every lost segment without a retransmission in flight to `send` (which injects
    /// the frame and says whether it went out), marking those sent as retransmitted at `now_ns`.
    pub fn retransmit(&mut self, now_ns: u64, mut send: impl FnMut(&[u8]) -> bool) -> Retransmitted {
        let mut done = Retransmitted::default();
        let mut i = 0;
        while self.tally.pending_pkts > 0 && i < self.segs.len() {
            let s = &self.segs[i];
            if let (Some(kind), false, false) = (s.lost, s.retrans_out, s.sacked) {
                tracing::trace!(flow = self.flow_id, start = s.start, end = s.end, ?kind, sent = s.sent_ns, now = now_ns, rack_xmit = self.rack_xmit_ns, rack_rtt = self.rack_rtt_ns, "retransmit");
                if !send(&s.frame) {
                    break;
                }
                let tx = self.tx_state();
                self.update(i, |s| {
                    s.retrans_out = true;
                    s.retransmitted = true;
                    s.sent_ns = now_ns;
                    s.echoes_pending += 1;
                    s.tx = Some(tx);
                });
                match kind {
                    LossKind::Fast => done.fast += 1,
                    LossKind::Rack => done.rack += 1,
                    LossKind::Timeout => done.timeout += 1,
                }
            }
            i += 1;
        }
        done
    }
}

/// What one ACK delivered.
#[derive(Debug, Default)]
struct Delivery {
    acked_bytes: u64,
    acked_pkts: u64,
    delivered_bytes: u64,
    delivered_pkts: u64,
    /// Send time of the newest newly delivered never-retransmitted segment.
    rtt_sent_ns: Option<u64>,
    rate: RateSample,
}
