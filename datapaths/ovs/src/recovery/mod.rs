//! Per-flow sender model: what the server's TCP would know about its own connection, rebuilt
//! from what crosses the bridge port, so the shim can recover losses on the server's behalf
//! and measure the flow for the agent.
//!
//! Model. Sequence numbers are unwrapped to `u64` offsets from the server's ISN (the first
//! data byte is 1), so nothing below compares raw 32-bit numbers. Every new server segment
//! (`Segment`) is kept, as the slab slot holding its whole frame, until the client
//! acknowledges it cumulatively;
//! the buffer is contiguous from `snd_una` to `snd_nxt`. A segment the shim cannot keep (no
//! slab slot, a full ring, a budget, a gap) makes the flow unprotectable: it falls back (the
//! buffer is freed and starts again after the hole, at `protect_from`) and rejoins once the
//! client has acknowledged `protect_from`, when the buffer is whole again. Each segment carries a scoreboard state
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
//!
//! Files: `buffer` (the shared buffer budget and each flow's segment buffer), `scoreboard`
//! (per-segment state and its sums, SACK blocks), `loss` (RACK, the SACK threshold,
//! duplicate ACKs and NewReno), `timers` (the retransmission timer and its backoff, the wait
//! for a missing segment), `measure` (RTT and delivery-rate samples); this file ties them
//! together in [`SenderFlow`]'s handlers for segments, ACKs, ticks and retransmissions.

mod buffer;
mod loss;
mod measure;
mod scoreboard;
mod timers;

use std::collections::VecDeque;

use ccswitch_ccp::Primitives;

use crate::events::{Ack, Established, FrameSlot, OvsDirective, Segment, UnbufferedReason};

pub use buffer::{BufferPool, MAX_EARLY_SEGMENTS};
pub use loss::{LossKind, DUPACK_THRESHOLD};
pub use timers::{TickOutcome, EARLY_WAIT_NS, INITIAL_RTO_NS, MAX_RTO_NS, RTO_VARIANCE_FLOOR_NS};

use measure::Delivery;
use scoreboard::{Seg, Tally};

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

/// Why a flow left the shim's protection (until the hole it left is acknowledged).
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
            FallbackReason::Unbuffered(UnbufferedReason::SlabFull) => "slab_full",
        }
    }

    /// A resource ran out (slab, ring, a buffer budget): logged once per interval, not per flow.
    pub fn is_exhaustion(self) -> bool {
        EXHAUSTION_REASONS.contains(&self)
    }
}

/// The fallbacks for want of room.
pub const EXHAUSTION_REASONS: [FallbackReason; 4] = [
    FallbackReason::Unbuffered(UnbufferedReason::SlabFull),
    FallbackReason::Unbuffered(UnbufferedReason::RingFull),
    FallbackReason::FlowBudget,
    FallbackReason::GlobalBudget,
];

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
    /// The ACK reports a duplicate the client received (D-SACK): a retransmission, the
    /// shim's or the server's, that was not needed.
    pub dsack: bool,
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
    /// When RACK, with nothing else happening, marks the next segment lost (`u64::MAX`:
    /// never; 0: at the next tick, not known). Set by every loss detection pass; every event
    /// that could bring it earlier runs one or sets 0, so the flow needs no tick before it.
    rack_timeout_ns: u64,
    // Delivery rate.
    delivered: u64,
    delivered_ns: u64,
    first_tx_ns: u64,
    delivery_rate: u64,
    last_activity_ns: u64,
    /// Unprotected (fell back) for this reason, until `una` reaches `protect_from`.
    fallback: Option<FallbackReason>,
    /// Where the buffer starts: every byte from here to `nxt` is kept; below it, the bytes
    /// not yet acknowledged were never kept (a fallback's hole).
    protect_from: u64,
    /// Frames too large for the slab: never copied again, never protected again.
    uncopyable: bool,
    /// The newest TCP timestamp value of the server's frames, new data and retransmissions
    /// (see [`tsval_floor`](Self::tsval_floor)).
    server_tsval: Option<u32>,
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
            rack_timeout_ns: u64::MAX,
            delivered: 0,
            delivered_ns: est.ts_ns,
            first_tx_ns: est.ts_ns,
            delivery_rate: 0,
            last_activity_ns: est.ts_ns,
            fallback: None,
            protect_from: 1,
            uncopyable: false,
            server_tsval: None,
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
    pub fn is_idle(&self, now_ns: u64) -> bool {
        now_ns.saturating_sub(self.last_activity_ns) >= self.cfg.idle_timeout_ns
    }

    /// The shim must see every ACK of this flow: it recovers a loss (SACKed, lost or
    /// retransmitted segments, a recovery point, duplicate ACKs counted, a backed-off timer,
    /// segments out of order) or is not protecting it. Otherwise the port may fold its ACKs.
    pub fn needs_every_ack(&self) -> bool {
        let t = &self.tally;
        t.sacked_bytes > 0
            || t.lost_bytes > 0
            || t.retrans_pkts > 0
            || t.pending_pkts > 0
            || self.recovery_point.is_some()
            || self.dupacks > 0
            || self.backoff > 0
            || !self.early.is_empty()
            || self.fallback.is_some()
    }

    /// The directive for window `cwnd_bytes`.
    pub fn directive(&self, cwnd_bytes: u32) -> OvsDirective {
        OvsDirective {
            cwnd_bytes: cwnd_bytes.max(2 * self.mss as u32),
            sacked_bytes: u32::try_from(self.tally.sacked_bytes).unwrap_or(u32::MAX),
            sacked_una: self.raw(self.una),
            active: true,
            fold: None,
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

    // --- ACKs ---------------------------------------------------------------------------

    /// An ACK. A flow that fell back follows it too (its buffer from `protect_from` on is
    /// kept as usual) but detects no losses: the server recovers them itself.
    pub fn on_ack(&mut self, ack: &Ack, pool: &mut BufferPool) -> AckOutcome {
        let protected = self.fallback.is_none();
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
                    self.buffered_bytes -= u64::from(seg.frame.len);
                    pool.give_frame(seg.frame);
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
            self.restart_rto(now);
            if protected {
                newly_lost += self.on_cumulative_progress();
            }
        } else if protected && self.is_dupack(ack, ack_seq) {
            newly_lost += self.on_dupack();
        }
        self.last_window = ack.window_bytes;

        let dsack = self.sack && self.apply_sack(ack, now, &mut d);
        if d.delivered_bytes > 0 {
            self.delivered_ns = now;
            // SACKed data is progress too: the path delivers, the holes are RACK's.
            self.restart_rto(now);
        }
        let rtt_sample = d.rtt_sent_ns.map(|sent| now.saturating_sub(sent));
        if let Some(rtt) = rtt_sample {
            self.rtt_update(rtt);
        }
        let (rate_out, rate_in) = self.rate_generate(&d, now);
        if protected {
            newly_lost += self.detect_losses(now);
        }

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
            dsack,
        }
    }

    /// The latest ACK the port forwarded, read from its flow entry, for a flow whose ACKs
    /// it folds (it hands them up only now and then): followed like any ACK if it
    /// acknowledges data the shim still holds, but the loss signals it carries stay for the
    /// next ACK the program sees. Returns None if it acknowledges nothing new.
    pub fn on_port_ack(&mut self, ack: &Ack, pool: &mut BufferPool) -> Option<AckOutcome> {
        let seq = self.unwrap(ack.ack);
        if seq <= self.una || seq > self.nxt {
            return None;
        }
        let out = self.on_ack(ack, pool);
        self.lost_since_ack += out.prims.lost_pkts_sample;
        self.timeout_pending |= out.prims.was_timeout;
        Some(out)
    }

    /// The retransmission timer has expired: the next tick marks the head lost.
    pub fn rto_due(&self, now_ns: u64) -> bool {
        self.fallback.is_none()
            && !self.segs.is_empty()
            && self.rto_since_ns.is_some_and(|since| now_ns.saturating_sub(since) >= self.rto_ns())
    }

    /// The lowest TCP timestamp value a retransmitted copy may carry (None: the frame's own).
    ///
    /// A copy is the frame the server sent first, timestamp included. The client's
    /// `ts_recent` takes the value of every segment at or below its `rcv_nxt`: later data
    /// delivered in order, or the server's own retransmission (its retransmission timer or
    /// tail-loss probe), even a duplicate. Its PAWS check then drops every older copy,
    /// answering at most one in 500 ms (`tcp_invalid_ratelimit`): a copy of a segment lost
    /// before the server retransmitted delivered nothing, and a needless copy (the client's
    /// ACK was lost or late) brought no ACK to stop the next, so the shim backed off until the
    /// server timed out again (flows stalled for seconds at 10k flows). The newest value the
    /// server sent is never ahead of its clock, so its later segments still pass.
    pub fn tsval_floor(&self) -> Option<u32> {
        self.server_tsval
    }

    /// A frame of the server carried timestamp value `tsval` (serial arithmetic: the newest
    /// is kept; the shim's own copies coming back are older).
    pub(super) fn saw_tsval(&mut self, tsval: Option<u32>) {
        if let Some(v) = tsval {
            if self.server_tsval.is_none_or(|t| v.wrapping_sub(t) as i32 > 0) {
                self.server_tsval = Some(v);
            }
        }
    }

    /// Segments waiting for retransmission.
    pub fn pending_retransmissions(&self) -> u64 {
        self.tally.pending_pkts
    }

    /// Hand every lost segment without a retransmission in flight to `send` (which injects
    /// the frame and says whether it went out), marking those sent as retransmitted at `now_ns`.
    pub fn retransmit(&mut self, now_ns: u64, mut send: impl FnMut(&FrameSlot) -> bool) -> Retransmitted {
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
