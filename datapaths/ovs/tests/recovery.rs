//! The per-flow sender model, driven like a fake sender: segments cross the port, ACKs come
//! back, time advances. Each test pins one defining behaviour. No BPF, no root.

use std::net::SocketAddr;

use ccswitch_ovs::events::{Ack, AckVerdict, Established, FlowAddrs, FrameSlot, Resent, SackBlock, Segment};
use ccswitch_ovs::recovery::{
    AckOutcome, BufferPool, FallbackReason, RecoveryConfig, SenderFlow, EARLY_WAIT_NS, INITIAL_RTO_NS,
};

const MSS: u32 = 1000;
/// Ethernet + IPv4 + TCP headers in front of each payload.
const HDR: usize = 54;
const MS: u64 = 1_000_000;
const US: u64 = 1_000;
/// Segment n (1-based) carries bytes [1 + (n−1)·MSS, 1 + n·MSS) of the unwrapped space.
fn seq_of(n: u64) -> u64 {
    1 + (n - 1) * u64::from(MSS)
}

struct Sim {
    flow: SenderFlow,
    pool: BufferPool,
    isn: u32,
    window: u32,
}

impl Sim {
    fn new(isn: u32, sack: bool) -> Sim {
        Sim::with(isn, sack, RecoveryConfig::default(), BufferPool::new(1 << 30))
    }

    fn with(isn: u32, sack: bool, cfg: RecoveryConfig, pool: BufferPool) -> Sim {
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        let est = Established {
            flow_id: 7,
            ts_ns: 1,
            key: FlowAddrs { server: addr("10.0.0.1:80"), client: addr("10.0.0.2:40000") },
            mss: MSS as u16,
            client_wscale: 7,
            server_wscale: 7,
            sack,
            timestamps: false,
            server_isn: isn,
            client_isn: 99,
        };
        Sim { flow: SenderFlow::new(&est, cfg), pool, isn, window: 1 << 20 }
    }

    fn raw(&self, rel: u64) -> u32 {
        self.isn.wrapping_add(rel as u32)
    }

    /// The server sends segment `n` at `t`; its frame is in slab slot `n`, so injections can
    /// be told apart.
    fn send(&mut self, n: u64, t: u64) -> Option<FallbackReason> {
        let frame = FrameSlot { index: n as u32, len: (HDR + MSS as usize) as u32 };
        let seg = Segment { flow_id: 7, ts_ns: t, seq: self.raw(seq_of(n)), len: MSS, fin: false, frame, tsval: None };
        self.flow.on_segment(seg, &mut self.pool)
    }

    /// Slots given back since the last call, sorted.
    fn freed(&mut self) -> Vec<u32> {
        let mut v = self.pool.freed().to_vec();
        self.pool.clear_freed();
        v.sort_unstable();
        v
    }

    /// The client acknowledges segments 1..=`upto` cumulatively and SACKs the segment ranges
    /// `[a, b]` (inclusive segment numbers).
    fn ack(&mut self, upto: u64, sacks: &[(u64, u64)], t: u64) -> AckOutcome {
        let blocks = sacks
            .iter()
            .map(|&(a, b)| SackBlock { start: self.raw(seq_of(a)), end: self.raw(seq_of(b + 1)) })
            .collect();
        self.ack_raw(self.raw(seq_of(upto + 1)), blocks, false, t)
    }

    fn ack_raw(&mut self, ack: u32, sack: Vec<SackBlock>, ece: bool, t: u64) -> AckOutcome {
        let a = Ack {
            flow_id: 7,
            ts_ns: t,
            ack,
            window_bytes: self.window,
            payload_len: 0,
            ece,
            fin: false,
            sack,
            verdict: AckVerdict::Passed,
        };
        self.flow.on_ack(&a, &mut self.pool)
    }

    /// Frames the shim would inject now, by segment number.
    fn retransmit(&mut self, t: u64) -> Vec<u64> {
        let mut sent = vec![];
        self.flow.retransmit(t, |frame| {
            sent.push(u64::from(frame.index));
            true
        });
        sent
    }

    /// The injected copy of segment `n` crosses the port again.
    fn echo(&mut self, n: u64, t: u64) {
        let r = Resent { flow_id: 7, ts_ns: t, seq: self.raw(seq_of(n)), len: MSS, tsval: None };
        self.flow.on_resent(&r, &mut self.pool);
    }

    /// Give the flow an RTT sample of `rtt` (segment `n` sent at `t`, acked at `t + rtt`).
    fn warm_up(&mut self, n: u64, t: u64, rtt: u64) {
        self.send(n, t);
        self.ack(n, &[], t + rtt);
    }
}

const FRAME: u64 = HDR as u64 + MSS as u64;

#[test]
fn cumulative_ack_frees_the_buffer() {
    let mut s = Sim::new(1000, true);
    for n in 1..=3 {
        assert_eq!(s.send(n, n * MS), None);
    }
    assert_eq!((s.flow.buffered_segments(), s.flow.buffered_bytes(), s.pool.used()), (3, 3 * FRAME, 3 * FRAME));
    assert!(s.freed().is_empty());
    let out = s.ack(2, &[], 20 * MS);
    assert_eq!((out.prims.bytes_acked, out.prims.packets_acked), (2 * u64::from(MSS), 2));
    assert_eq!((s.flow.buffered_segments(), s.pool.used()), (1, FRAME));
    assert_eq!(s.freed(), vec![1, 2], "the slots of acknowledged segments go back");
    // Half of segment 3: the frame stays (it is all there is to retransmit).
    s.ack_raw(s.raw(seq_of(3) + 500), vec![], false, 21 * MS);
    assert_eq!((s.flow.buffered_segments(), s.flow.bytes_in_flight()), (1, 500));
    assert!(s.freed().is_empty(), "a partly acknowledged segment keeps its slot");
    s.ack(3, &[], 22 * MS);
    assert_eq!((s.flow.buffered_segments(), s.flow.buffered_bytes(), s.pool.used()), (0, 0, 0));
    assert_eq!(s.freed(), vec![3]);
}

#[test]
fn flow_budget_exhaustion_falls_back_frees_and_rejoins_once_the_hole_is_acknowledged() {
    let cfg = RecoveryConfig { flow_buffer_bytes: 3 * FRAME, ..Default::default() };
    let mut s = Sim::with(5, true, cfg, BufferPool::new(1 << 30));
    for n in 1..=3 {
        assert_eq!(s.send(n, n * MS), None);
    }
    assert_eq!(s.send(4, 4 * MS), Some(FallbackReason::FlowBudget));
    assert_eq!((s.flow.fallback(), s.flow.buffered_segments(), s.pool.used()), (Some(FallbackReason::FlowBudget), 0, 0));
    assert_eq!(s.freed(), vec![1, 2, 3, 4], "the buffer's slots and the refused one");
    // Later data is buffered again after the hole (segment 4, never kept).
    assert_eq!(s.send(5, 5 * MS), None);
    assert_eq!(s.flow.buffered_segments(), 1);
    assert_eq!(s.freed(), Vec::<u32>::new());
    s.ack(3, &[], 6 * MS);
    assert!(!s.flow.try_rejoin(), "segment 4 is outstanding and not buffered");
    let out = s.ack(4, &[], 7 * MS);
    assert_eq!(out.prims.lost_pkts_sample, 0);
    assert!(s.flow.try_rejoin(), "every byte outstanding is buffered again");
    assert_eq!(s.flow.fallback(), None);
    s.ack(5, &[], 8 * MS);
    assert_eq!((s.flow.buffered_segments(), s.pool.used()), (0, 0));
    assert_eq!(s.freed(), vec![5]);
}

#[test]
fn global_budget_exhaustion_falls_back_only_the_flow_that_hit_it() {
    let mut pool = BufferPool::new(3 * FRAME);
    let mut a = Sim::with(5, true, RecoveryConfig::default(), BufferPool::new(0));
    let mut b = Sim::with(9, true, RecoveryConfig::default(), BufferPool::new(0));
    std::mem::swap(&mut a.pool, &mut pool);
    for n in 1..=2 {
        assert_eq!(a.send(n, n * MS), None);
    }
    std::mem::swap(&mut a.pool, &mut b.pool); // b now holds the shared pool
    assert_eq!(b.send(1, 3 * MS), None);
    assert_eq!(b.send(2, 4 * MS), Some(FallbackReason::GlobalBudget));
    assert_eq!(b.pool.used(), 2 * FRAME, "b's frame went back, a's stay");
    assert_eq!(b.freed(), vec![1, 2], "b's slots (its buffered one and the refused one)");
    assert_eq!((a.flow.fallback(), a.flow.buffered_segments()), (None, 2));
}

#[test]
fn segments_reported_out_of_order_are_held_until_the_hole_fills() {
    let mut s = Sim::new(5, true);
    s.send(1, MS);
    assert_eq!(s.send(3, 2 * MS + 1), None);
    assert_eq!(s.send(4, 2 * MS + 2), None);
    assert_eq!((s.flow.snd_nxt(), s.flow.buffered_segments(), s.pool.used()), (seq_of(2), 1, 3 * FRAME));
    assert_eq!(s.send(2, 2 * MS), None);
    assert_eq!((s.flow.snd_nxt(), s.flow.buffered_segments(), s.pool.used()), (seq_of(5), 4, 4 * FRAME));
    assert!(s.freed().is_empty(), "held segments keep their slots");
    let out = s.ack(4, &[], 30 * MS);
    assert_eq!((out.prims.packets_acked, s.pool.used()), (4, 0));
    assert_eq!(s.freed(), vec![1, 2, 3, 4]);
}

#[test]
fn a_hole_the_shim_never_sees_filled_falls_back() {
    let mut s = Sim::new(5, true);
    s.send(1, MS);
    assert_eq!(s.send(3, 2 * MS), None);
    assert_eq!(s.flow.on_tick(2 * MS + EARLY_WAIT_NS, &mut s.pool).fell_back, None);
    let tick = s.flow.on_tick(2 * MS + EARLY_WAIT_NS + 1, &mut s.pool);
    assert_eq!(tick.fell_back, Some(FallbackReason::Gap));
    assert_eq!((s.flow.fallback(), s.pool.used()), (Some(FallbackReason::Gap), 0));
    assert_eq!(s.freed(), vec![1, 3], "held segments' slots too");
}

#[test]
fn a_hole_reported_without_its_frame_falls_back_at_once() {
    let mut s = Sim::new(5, true);
    s.send(1, MS);
    s.send(3, 2 * MS);
    // The port saw segment 3 first and took segment 2 for a retransmission.
    let r = Resent { flow_id: 7, ts_ns: 2 * MS + 1, seq: s.raw(seq_of(2)), len: MSS, tsval: None };
    assert_eq!(s.flow.on_resent(&r, &mut s.pool), Some(FallbackReason::Gap));
    assert_eq!(s.pool.used(), 0);
}

#[test]
fn sack_blocks_mark_segments_and_count_sacked_bytes() {
    let mut s = Sim::new(77, true);
    for n in 1..=6 {
        s.send(n, n * US);
    }
    let out = s.ack(1, &[(3, 4)], 20 * MS);
    assert_eq!(s.flow.sacked_bytes(), 2 * u64::from(MSS));
    assert_eq!((out.prims.bytes_misordered, out.prims.packets_misordered), (2000, 2));
    assert!(out.scoreboard_changed);
    let c = s.flow.directive(50_000);
    assert_eq!((c.cwnd_bytes, c.sacked_bytes, c.sacked_una, c.active), (50_000, 2000, s.raw(seq_of(2)), true));
    // A D-SACK below snd_una, a block beyond snd_nxt and a block repeated add nothing.
    let beyond = SackBlock { start: s.raw(seq_of(6)), end: s.raw(seq_of(9)) };
    let dsack = SackBlock { start: s.raw(seq_of(1)), end: s.raw(seq_of(2)) };
    let again = SackBlock { start: s.raw(seq_of(3)), end: s.raw(seq_of(5)) };
    let out = s.ack_raw(s.raw(seq_of(2)), vec![dsack, beyond, again], false, 21 * MS);
    assert_eq!(s.flow.sacked_bytes(), 2000);
    assert!(!out.scoreboard_changed);
    assert!(out.dsack && !s.ack(1, &[(3, 4)], 21 * MS).dsack, "the duplicate is reported");
    // A block covering part of a segment does not SACK it.
    let part = SackBlock { start: s.raw(seq_of(5)), end: s.raw(seq_of(5) + 10) };
    assert!(!s.ack_raw(s.raw(seq_of(2)), vec![part], false, 22 * MS).dsack);
    assert_eq!(s.flow.sacked_bytes(), 2000);
    // The cumulative ACK passing them clears them.
    let out = s.ack(4, &[], 23 * MS);
    assert_eq!((s.flow.sacked_bytes(), out.prims.bytes_acked), (0, 3000));
    // The cwnd floor is two segments.
    assert_eq!(s.flow.directive(100).cwnd_bytes, 2 * MSS);
}

#[test]
fn rack_marks_the_hole_lost_after_the_reordering_window_and_not_before() {
    let mut s = Sim::new(1, true);
    s.warm_up(1, 0, 40 * MS); // min_rtt 40 ms: reo_wnd 10 ms
    let t = 100 * MS;
    s.send(2, t);
    s.send(3, t + 100 * US);
    // Segment 3 arrives 40 ms after it left: rack_rtt 40 ms, segment 2 is 40.1 ms old.
    let out = s.ack(1, &[(3, 3)], t + 40 * MS + 100 * US);
    assert_eq!(out.prims.lost_pkts_sample, 0);
    assert_eq!(s.flow.on_tick(t + 49 * MS, &mut s.pool).newly_lost_pkts, 0);
    assert_eq!(s.flow.on_tick(t + 50 * MS, &mut s.pool).newly_lost_pkts, 0, "exactly rtt + reo_wnd is not more");
    assert_eq!(s.flow.pending_retransmissions(), 0);
    assert_eq!(s.flow.on_tick(t + 50 * MS + US, &mut s.pool).newly_lost_pkts, 1);
    assert_eq!(s.retransmit(t + 51 * MS), vec![2]);
    assert_eq!(s.flow.pending_retransmissions(), 0);
    // The loss found by the timer is reported on the next ACK.
    let out = s.ack(1, &[(3, 3)], t + 52 * MS);
    assert_eq!(out.prims.lost_pkts_sample, 1);
}

/// A flow RACK is timing is due at the reordering timeout of the segment it times, not at
/// every tick until then (the shim's timer wheel skips it meanwhile): the hole, and then its
/// retransmission, lost again.
#[test]
fn a_flow_rack_is_timing_is_due_at_the_reordering_timeout_not_before() {
    let mut s = Sim::new(1, true);
    s.warm_up(1, 0, 40 * MS); // min_rtt 40 ms: reo_wnd 10 ms; RTO 100 ms
    let t = 100 * MS;
    s.send(2, t);
    s.send(3, t + 100 * US);
    s.ack(1, &[(3, 3)], t + 40 * MS + 100 * US);
    // rack_rtt 40 ms: segment 2 is lost once more than 50 ms old.
    let due = t + 50 * MS + 1;
    assert_eq!(s.flow.next_timer_ns(t + 40 * MS + 100 * US), due);
    assert_eq!(s.flow.on_tick(due - 1, &mut s.pool).newly_lost_pkts, 0);
    assert_eq!(s.flow.next_timer_ns(due - 1), due, "a tick before it changes nothing");
    assert_eq!(s.flow.on_tick(due, &mut s.pool).newly_lost_pkts, 1);
    assert_eq!(s.retransmit(due), vec![2]);
    s.echo(2, due + US);
    // New data sent after the retransmission is delivered, the retransmission is not: RACK
    // times the retransmission from its own send time (rack_rtt now 40 ms again).
    s.send(4, t + 60 * MS);
    s.ack(1, &[(3, 4)], t + 100 * MS);
    let again = due + US + 50 * MS + 1;
    assert_eq!(s.flow.next_timer_ns(t + 100 * MS), again);
    assert_eq!(s.flow.on_tick(again - 1, &mut s.pool), Default::default());
    s.flow.on_tick(again, &mut s.pool);
    assert_eq!(s.retransmit(again), vec![2], "retransmitted a second time");
}

#[test]
fn three_segments_sacked_above_a_hole_mark_it_lost_at_once() {
    let mut s = Sim::new(1, true);
    s.warm_up(1, 0, 40 * MS);
    for n in 2..=5 {
        s.send(n, 100 * MS + n * US);
    }
    // SACKed 1 ms after the send: far too early for RACK.
    let out = s.ack(1, &[(3, 4)], 101 * MS);
    assert_eq!(out.prims.lost_pkts_sample, 0);
    let out = s.ack(1, &[(3, 5)], 101 * MS + US);
    assert_eq!(out.prims.lost_pkts_sample, 1);
    assert_eq!(s.retransmit(101 * MS + 2 * US), vec![2]);
}

#[test]
fn three_dupacks_without_sack_mark_the_head_lost() {
    let mut s = Sim::new(3, false);
    for n in 1..=5 {
        s.send(n, n * US);
    }
    s.ack(1, &[], 20 * MS);
    for k in 1..=2 {
        let out = s.ack(1, &[], 20 * MS + k * US);
        assert_eq!(out.prims.lost_pkts_sample, 0);
    }
    // A window update is not a duplicate.
    s.window += 1000;
    assert_eq!(s.ack(1, &[], 20 * MS + 3 * US).prims.lost_pkts_sample, 0);
    assert_eq!(s.ack(1, &[], 20 * MS + 4 * US).prims.lost_pkts_sample, 1);
    assert_eq!(s.retransmit(20 * MS + 5 * US), vec![2]);
    // More duplicates in the same recovery mark nothing more.
    assert_eq!(s.ack(1, &[], 20 * MS + 6 * US).prims.lost_pkts_sample, 0);
    assert!(s.retransmit(20 * MS + 7 * US).is_empty());
}

#[test]
fn newreno_partial_ack_marks_the_next_hole_lost() {
    let mut s = Sim::new(3, false);
    for n in 1..=6 {
        s.send(n, n * US);
    }
    s.ack(1, &[], 20 * MS); // 2 and 4 are lost; 3, 5, 6 arrive
    for k in 1..=3 {
        s.ack(1, &[], 20 * MS + k * US);
    }
    assert_eq!(s.retransmit(20 * MS + 4 * US), vec![2]);
    // The retransmission fills the first hole: the ACK stops at the second.
    let out = s.ack(3, &[], 40 * MS);
    assert_eq!((out.prims.bytes_acked, out.prims.lost_pkts_sample), (2000, 1));
    assert_eq!(s.retransmit(40 * MS + US), vec![4]);
    s.ack(6, &[], 60 * MS);
    assert_eq!(s.flow.buffered_segments(), 0);
    // Recovery is over: three new duplicates start a new one.
    for n in 7..=9 {
        s.send(n, 61 * MS + n * US);
    }
    for k in 0..3 {
        s.ack(6, &[], 80 * MS + k * US);
    }
    assert_eq!(s.retransmit(81 * MS), vec![7]);
}

#[test]
fn a_lost_retransmission_is_found_again_by_rack() {
    let mut s = Sim::new(1, true);
    s.warm_up(1, 0, 20 * MS); // reo_wnd 5 ms
    let t = 100 * MS;
    for n in 2..=5 {
        s.send(n, t + n * US);
    }
    s.ack(1, &[(3, 5)], t + 20 * MS);
    assert_eq!(s.retransmit(t + 20 * MS + US), vec![2]);
    s.echo(2, t + 20 * MS + 2 * US);
    // New data sent after the retransmission is delivered; the retransmission is not.
    s.send(6, t + 21 * MS);
    let out = s.ack(1, &[(3, 6)], t + 41 * MS);
    assert_eq!(out.prims.lost_pkts_sample, 0, "within rack_rtt + reo_wnd of the retransmission");
    assert!(s.retransmit(t + 41 * MS).is_empty());
    let tick = s.flow.on_tick(t + 20 * MS + 2 * US + 25 * MS + US, &mut s.pool);
    assert!(!tick.timed_out);
    assert_eq!(s.retransmit(t + 46 * MS), vec![2], "retransmitted a second time");
    // The lost retransmission is not counted as a new loss.
    assert_eq!(tick.newly_lost_pkts, 0);
    let out = s.ack(6, &[], t + 66 * MS);
    assert_eq!((out.prims.bytes_acked, s.flow.buffered_segments()), (5000, 0));
}

#[test]
fn rto_fires_backs_off_and_resets_on_progress() {
    let mut s = Sim::new(11, true);
    s.send(1, 0);
    assert_eq!(s.flow.rto_ns(), INITIAL_RTO_NS, "before any sample");
    s.ack(1, &[], 20 * MS); // srtt 20 ms, rttvar 10 ms: RTO 20 + 40 ms
    assert_eq!(s.flow.rto_ns(), 60 * MS);
    let t = 100 * MS;
    s.send(2, t);
    s.send(3, t + US);
    assert!(!s.flow.on_tick(t + 59 * MS, &mut s.pool).timed_out);
    let tick = s.flow.on_tick(t + 60 * MS, &mut s.pool);
    assert!(tick.timed_out);
    assert_eq!(tick.newly_lost_pkts, 1);
    assert_eq!(s.retransmit(t + 60 * MS), vec![2], "the head only");
    assert_eq!(s.flow.rto_ns(), 120 * MS);
    assert!(!s.flow.on_tick(t + 179 * MS, &mut s.pool).timed_out);
    assert!(s.flow.on_tick(t + 180 * MS, &mut s.pool).timed_out);
    assert_eq!(s.retransmit(t + 180 * MS), vec![2], "the lost retransmission goes again");
    assert_eq!(s.flow.rto_ns(), 240 * MS);
    // Progress: the timeout is reported once, backoff resets, the timer restarts from now.
    let out = s.ack(2, &[], t + 200 * MS);
    assert!(out.prims.was_timeout);
    assert_eq!(out.rtt_sample_us, None);
    assert_eq!(s.flow.rto_ns(), 60 * MS);
    assert!(!s.ack(2, &[], t + 201 * MS).prims.was_timeout);
    assert!(!s.flow.on_tick(t + 259 * MS, &mut s.pool).timed_out);
    assert!(s.flow.on_tick(t + 260 * MS, &mut s.pool).timed_out);
    // Nothing outstanding, no timer.
    s.ack(3, &[], t + 270 * MS);
    assert!(!s.flow.on_tick(t + 10_000 * MS, &mut s.pool).timed_out);
}

#[test]
fn no_rtt_sample_from_retransmitted_data() {
    let mut s = Sim::new(11, true);
    s.warm_up(1, 0, 20 * MS);
    let srtt = s.flow.srtt_ns();
    s.send(2, 100 * MS);
    s.flow.on_tick(100 * MS + 60 * MS, &mut s.pool);
    assert_eq!(s.retransmit(160 * MS), vec![2]);
    s.echo(2, 160 * MS);
    let out = s.ack(2, &[], 165 * MS);
    assert_eq!(out.rtt_sample_us, None, "ours: ambiguous");
    assert_eq!(out.prims.rtt_sample_us, 20_000, "the last sample is carried");
    assert_eq!(s.flow.srtt_ns(), srtt);
    // The server's own retransmission is just as ambiguous.
    s.send(3, 200 * MS);
    let server_own = Resent { flow_id: 7, ts_ns: 400 * MS, seq: s.raw(seq_of(3)), len: MSS, tsval: None };
    assert_eq!(s.flow.on_resent(&server_own, &mut s.pool), None);
    assert_eq!(s.ack(3, &[], 401 * MS).rtt_sample_us, None);
    // Fresh data samples again: the newest newly delivered segment counts.
    s.send(4, 500 * MS);
    s.send(5, 505 * MS);
    assert_eq!(s.ack(5, &[], 530 * MS).rtt_sample_us, Some(25_000));
    assert_eq!(s.flow.min_rtt_ns(), Some(20 * MS));
}

#[test]
fn delivery_rate_matches_a_steady_bottleneck() {
    // The server bursts a segment every 50 µs into a 10 MB/s link (one 1000-byte segment
    // per 100 µs); ACKs return 10 ms after each segment leaves the link.
    let mut s = Sim::new(0xdead_beef, true);
    let mut events: Vec<(u64, bool, u64)> = vec![];
    let mut link_free = 0;
    for n in 1..=3000u64 {
        let sent = n * 50 * US;
        let departs = sent.max(link_free) + 100 * US;
        link_free = departs;
        events.push((sent, true, n));
        events.push((departs + 10 * MS, false, n));
    }
    events.sort();
    let mut incoming = vec![];
    for (t, is_send, n) in events {
        if is_send {
            s.send(n, t);
        } else {
            let out = s.ack(n, &[], t);
            if n > 1000 {
                incoming.push(out.prims.rate_incoming);
            }
        }
    }
    let rate = s.flow.delivery_rate() as f64;
    assert!((rate / 10e6 - 1.0).abs() < 0.02, "delivery rate {rate}");
    for r in incoming {
        assert!((r as f64 / 10e6 - 1.0).abs() < 0.02, "rate_incoming {r}");
    }
}

#[test]
fn in_flight_counts_sacked_lost_and_retransmitted() {
    let mut s = Sim::new(21, true);
    s.warm_up(1, 0, 20 * MS); // reo_wnd 5 ms
    for n in 2..=7 {
        s.send(n, 100 * MS + n * US);
    }
    assert_eq!((s.flow.packets_in_flight(), s.flow.bytes_in_flight()), (6, 6000));
    // 2 is lost (3 segments SACKed above it): 6 − 3 SACKed − 1 lost.
    let out = s.ack(1, &[(3, 5)], 120 * MS);
    assert_eq!((out.prims.packets_in_flight, out.prims.bytes_in_flight), (2, 2000));
    // Its retransmission is in flight again.
    assert_eq!(s.retransmit(120 * MS), vec![2]);
    assert_eq!((s.flow.packets_in_flight(), s.flow.bytes_in_flight()), (3, 3000));
    for n in 8..=11 {
        s.send(n, 121 * MS + n * US);
    }
    assert_eq!(s.flow.packets_in_flight(), 7);
    // 1..=5 acknowledged, 7 SACKed; 6, sent long before the delivered retransmission, is
    // lost: 6..=11 outstanding − 1 SACKed − 1 lost.
    let out = s.ack(5, &[(7, 7)], 140 * MS);
    assert_eq!(out.prims.lost_pkts_sample, 1);
    assert_eq!((out.prims.packets_in_flight, out.prims.bytes_in_flight, out.prims.bytes_pending), (4, 4000, 0));
    assert_eq!(s.retransmit(140 * MS), vec![6]);
    assert_eq!(s.flow.packets_in_flight(), 5);
    let out = s.ack(11, &[], 161 * MS);
    assert_eq!((out.prims.packets_in_flight, out.prims.bytes_in_flight), (0, 0));
    assert_eq!(s.flow.sacked_bytes() + s.flow.lost_bytes(), 0);
}

#[test]
fn ecn_counts_what_an_ece_ack_delivers() {
    let mut s = Sim::new(21, true);
    for n in 1..=4 {
        s.send(n, n * US);
    }
    let sack = vec![SackBlock { start: s.raw(seq_of(4)), end: s.raw(seq_of(5)) }];
    let out = s.ack_raw(s.raw(seq_of(3)), sack, true, 20 * MS);
    assert_eq!((out.prims.ecn_bytes, out.prims.ecn_packets), (3000, 3));
    assert_eq!(s.ack(4, &[], 21 * MS).prims.ecn_bytes, 0);
}

#[test]
fn sequence_numbers_wrap_across_2_pow_32() {
    // The ISN sits 2.5 segments below 2^32: segment 3 straddles the wrap.
    let isn = u32::MAX - 2500;
    let mut s = Sim::new(isn, true);
    for n in 1..=6 {
        s.send(n, n * US);
    }
    assert_eq!(s.flow.snd_nxt(), seq_of(7));
    let out = s.ack(2, &[(4, 5)], 20 * MS);
    assert_eq!((out.prims.bytes_acked, s.flow.sacked_bytes()), (2000, 2000));
    let c = s.flow.directive(10_000);
    assert_eq!(c.sacked_una, isn.wrapping_add(seq_of(3) as u32));
    assert!(c.sacked_una > isn, "still below the wrap");
    let out = s.ack(6, &[], 30 * MS);
    assert_eq!((out.prims.bytes_acked, s.flow.buffered_segments()), (4000, 0));
    assert!(s.flow.directive(10_000).sacked_una < 10_000, "past the wrap");
    // A full turn of the sequence space later, numbers still unwrap relative to snd_una.
    let mut t = 40 * MS;
    let last = 7 + (1u64 << 32) / u64::from(MSS) + 10;
    for n in 7..=last {
        s.send(n, t);
        if n % 64 == 0 {
            s.ack(n, &[], t + 20 * MS);
        }
        t += US;
    }
    let out = s.ack(last, &[], t + 20 * MS);
    assert_eq!(s.flow.snd_una(), seq_of(last + 1));
    assert!(out.prims.bytes_acked > 0 && s.flow.buffered_segments() == 0);
}

#[test]
fn a_flow_with_no_records_expires() {
    let cfg = RecoveryConfig { idle_timeout_ns: 5_000 * MS, ..Default::default() };
    let mut s = Sim::with(1, true, cfg, BufferPool::new(1 << 20));
    s.send(1, 10 * MS);
    assert!(!s.flow.is_idle(5_009 * MS));
    assert!(s.flow.is_idle(5_010 * MS));
    s.flow.release(&mut s.pool);
    assert_eq!(s.pool.used(), 0);
}

/// The shim ticks a flow only at `next_timer_ns` (its timer wheel). Over random traffic with
/// losses, reordering-free delivery, SACKs and retransmissions that are lost again, every tick
/// the wheel would skip must be one that changes nothing.
#[test]
fn ticks_before_the_next_timer_change_nothing() {
    use ccswitch_datapath_support::rng::SplitMix64;
    use std::collections::{BTreeMap, BTreeSet};

    for (seed, sack) in [(1, true), (2, true), (3, false), (4, true)] {
        let mut rng = SplitMix64(seed);
        let mut s = Sim::new(1000 * seed as u32, sack);
        let mut next_seg = 1;
        let mut arrivals: BTreeMap<u64, Vec<u64>> = BTreeMap::new(); // ms -> segments arriving
        let mut received = BTreeSet::new();
        let mut cum = 0; // every segment <= cum received
        let mut next_timer = s.flow.next_timer_ns(0);
        let (mut skipped, mut due_ticks, mut lost_found) = (0, 0, 0);
        let in_flight =
            |rng: &mut SplitMix64, arrivals: &mut BTreeMap<u64, Vec<u64>>, n: u64, t_ms: u64| {
                if !rng.chance(8) {
                    arrivals
                        .entry(t_ms + 30 + rng.below(3))
                        .or_default()
                        .push(n);
                }
            };
        for t_ms in 1..6_000u64 {
            let t = t_ms * MS;
            if next_seg - cum <= 20 && rng.chance(60) {
                s.send(next_seg, t);
                in_flight(&mut rng, &mut arrivals, next_seg, t_ms);
                next_seg += 1;
                next_timer = next_timer.min(s.flow.next_timer_ns(t));
            }
            if let Some(arrived) = arrivals.remove(&t_ms) {
                received.extend(arrived);
                while received.contains(&(cum + 1)) {
                    cum += 1;
                }
                let mut blocks = vec![];
                let mut above = received.range(cum + 1..).copied().peekable();
                while let Some(a) = above.next() {
                    let mut b = a;
                    while above.peek() == Some(&(b + 1)) {
                        b = above.next().unwrap();
                    }
                    blocks.push((a, b));
                }
                blocks.truncate(3);
                let acked = s.ack(cum, if sack { &blocks } else { &[] }, t);
                lost_found += acked.prims.lost_pkts_sample;
                next_timer = next_timer.min(s.flow.next_timer_ns(t));
            }
            let tick = s.flow.on_tick(t, &mut s.pool);
            if t < next_timer {
                skipped += 1;
                assert_eq!(
                    tick,
                    Default::default(),
                    "seed {seed}: a tick the wheel skips at {t_ms} ms changed the flow"
                );
            } else {
                due_ticks += 1;
            }
            lost_found += tick.newly_lost_pkts;
            for n in s.retransmit(t) {
                s.echo(n, t);
                in_flight(&mut rng, &mut arrivals, n, t_ms);
            }
            next_timer = s.flow.next_timer_ns(t);
        }
        assert!(
            cum > 300,
            "seed {seed}: the transfer progressed ({cum} segments)"
        );
        assert!(
            lost_found > 20,
            "seed {seed}: losses were found ({lost_found})"
        );
        assert!(
            skipped >= 1000,
            "seed {seed}: ticks are skipped ({skipped} skipped, {due_ticks} due)"
        );
        // Every slot handed over came back exactly once (acknowledged, or at the release).
        s.flow.release(&mut s.pool);
        assert_eq!(s.freed(), (1..next_seg as u32).collect::<Vec<_>>(), "seed {seed}: each slot freed once");
    }
}

#[test]
fn copies_carry_the_newest_timestamp_the_server_sent() {
    let mut s = Sim::new(12, true);
    s.warm_up(1, 0, 20 * MS);
    assert_eq!(s.flow.tsval_floor(), None, "no timestamps seen: the frames' own");
    let frame = FrameSlot { index: 2, len: (HDR + MSS as usize) as u32 };
    let seg = Segment { flow_id: 7, ts_ns: 100 * MS, seq: s.raw(seq_of(2)), len: MSS, fin: false, frame, tsval: Some(3_000) };
    s.flow.on_segment(seg, &mut s.pool);
    assert_eq!(s.flow.tsval_floor(), Some(3_000), "new data");
    s.send(3, 101 * MS);
    let resent = |tsval| Resent { flow_id: 7, ts_ns: 400 * MS, seq: s.raw(seq_of(2)), len: MSS, tsval: Some(tsval) };
    let (server_own, echo) = (resent(5_000), resent(3_000));
    s.flow.on_resent(&server_own, &mut s.pool);
    assert_eq!(s.flow.tsval_floor(), Some(5_000), "the server's own retransmission");
    // An older value (the shim's own copy of an earlier frame coming back) does not lower it.
    s.flow.on_resent(&echo, &mut s.pool);
    assert_eq!(s.flow.tsval_floor(), Some(5_000));
}
