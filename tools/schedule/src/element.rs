//! The element's model, free of I/O so that it can be driven by tests with a fake clock.
//!
//! Each packet arrives at `now` in one direction (downlink: from the server; uplink: towards
//! it). The step in force at that moment (time since the clock started; before it starts, the
//! first step) decides its fate: dropped with the direction's loss probability (one seeded
//! draw per packet, or per TCP segment with [`LossDraws::Segment`]: see `segments.rs`), or
//! held until
//!
//! ```text
//! release = max(arrival + delay_of_step, previous release in the same direction)
//! ```
//!
//! so each direction is a FIFO: when the delay falls (300 ms -> 40 ms), packets that arrive
//! after the fall wait behind those still held rather than overtake them (no reordering, as on a
//! real path whose route shortens; the new delay is reached once the old packets are out).
//! Directions are independent of each other. The hold actually applied (verdict time minus
//! arrival) is accounted to the step and direction in force at arrival.

use std::collections::VecDeque;

use ccswitch_datapath_support::rng::SplitMix64;
use serde::Serialize;

use crate::schedule::Schedule;
use crate::segments::{self, SegmentDraws};

/// How loss is drawn: one draw per packet in arrival order, or one per TCP segment from the
/// segment itself (the same bytes lost whatever the order they are sent in).
pub enum LossDraws {
    Packet(SplitMix64),
    Segment { seed: u64, segments: SegmentDraws },
}

impl LossDraws {
    pub fn per_packet(seed: u64) -> LossDraws {
        LossDraws::Packet(SplitMix64(seed))
    }

    pub fn per_segment(seed: u64) -> LossDraws {
        LossDraws::Segment { seed, segments: SegmentDraws::default() }
    }

    /// The draw in [0, 1) of a packet (its first bytes) and whether it is a segment's first
    /// send (per segment only), None if it is not drawn (per segment: no data). Per packet, one
    /// draw whatever the loss, so a seed gives the same sequence of draws whichever schedule
    /// it is used with; uniform from the top 53 bits.
    fn draw(&mut self, now_ns: u64, dir: PacketDirection, packet: &[u8]) -> Option<(f64, bool)> {
        match self {
            LossDraws::Packet(rng) => Some(((rng.next() >> 11) as f64 / (1u64 << 53) as f64, false)),
            LossDraws::Segment { seed, segments } => segments
                .segment(now_ns, packet)
                .map(|seg| (segments::uniform(*seed, dir as u8, seg), seg.transmission == 0)),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketDirection {
    /// From the server's address (data of a download).
    Downlink = 0,
    /// Towards the server's address (ACKs of a download).
    Uplink = 1,
}

pub const DIRECTIONS: [PacketDirection; 2] = [PacketDirection::Downlink, PacketDirection::Uplink];

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// The kernel's packet id, which the verdict names.
    pub id: u32,
    pub arrival_ns: u64,
    pub release_ns: u64,
    pub step: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketFate {
    Drop,
    /// Held until this time (CLOCK_MONOTONIC ns); equal to the arrival when there is no delay.
    HoldUntil(u64),
}

/// What one direction saw during one step.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DirectionStats {
    pub packets_seen: u64,
    pub dropped: u64,
    pub released: u64,
    /// Packets no loss was drawn for (per segment: those without data), never dropped.
    pub not_drawn: u64,
    /// Per segment: drops of a segment's first send. Schemes of one repetition that send the
    /// same bytes in the same segments lose the same ones, so this is equal between them.
    pub first_sends_dropped: u64,
    #[serde(skip)]
    hold_sum_ns: u128,
    #[serde(skip)]
    hold_min_ns: Option<u64>,
    #[serde(skip)]
    hold_max_ns: u64,
}

impl DirectionStats {
    fn record_hold(&mut self, hold_ns: u64) {
        self.released += 1;
        self.hold_sum_ns += hold_ns as u128;
        self.hold_min_ns = Some(self.hold_min_ns.map_or(hold_ns, |m| m.min(hold_ns)));
        self.hold_max_ns = self.hold_max_ns.max(hold_ns);
    }

    /// Mean, min and max hold in ms over the released packets (None if none was released).
    pub fn hold_ms(&self) -> Option<(f64, f64, f64)> {
        let min = self.hold_min_ns?;
        let mean = self.hold_sum_ns as f64 / self.released as f64 / 1e6;
        Some((mean, min as f64 / 1e6, self.hold_max_ns as f64 / 1e6))
    }
}

pub struct Element {
    pub schedule: Schedule,
    /// CLOCK_MONOTONIC ns of time 0; None until the clock starts.
    start_ns: Option<u64>,
    draws: LossDraws,
    queues: [VecDeque<Held>; 2],
    last_release_ns: [u64; 2],
    /// `stats[step][direction]`.
    pub stats: Vec<[DirectionStats; 2]>,
    /// Packets that arrived before the clock started (they count in step 0 too).
    pub before_start: [u64; 2],
}

impl Element {
    pub fn new(schedule: Schedule, draws: LossDraws) -> Element {
        let steps = schedule.steps.len();
        Element {
            schedule,
            start_ns: None,
            draws,
            queues: [VecDeque::new(), VecDeque::new()],
            last_release_ns: [0, 0],
            stats: vec![Default::default(); steps],
            before_start: [0, 0],
        }
    }

    /// Start the clock (time 0 of the schedule) at `now_ns`; a second start is ignored.
    pub fn start(&mut self, now_ns: u64) {
        self.start_ns.get_or_insert(now_ns);
    }

    pub fn started(&self) -> bool {
        self.start_ns.is_some()
    }

    pub fn step_at(&self, now_ns: u64) -> usize {
        match self.start_ns {
            None => 0,
            Some(t0) => self.schedule.step_at(now_ns.saturating_sub(t0)),
        }
    }

    /// A packet arrives (`packet`: its first bytes, read only by per-segment draws): drop it,
    /// or hold it (it then comes back from `pop_due`).
    pub fn arrive(&mut self, now_ns: u64, dir: PacketDirection, id: u32, packet: &[u8]) -> PacketFate {
        let step = self.step_at(now_ns);
        let d = dir as usize;
        if !self.started() {
            self.before_start[d] += 1;
        }
        let stats = &mut self.stats[step][d];
        stats.packets_seen += 1;
        let s = &self.schedule.steps[step];
        let loss = match dir {
            PacketDirection::Downlink => s.loss_downlink,
            PacketDirection::Uplink => s.loss_uplink,
        };
        match self.draws.draw(now_ns, dir, packet) {
            None => stats.not_drawn += 1,
            Some((draw, first_send)) if draw < loss => {
                stats.dropped += 1;
                stats.first_sends_dropped += first_send as u64;
                return PacketFate::Drop;
            }
            Some(_) => {}
        }
        let release_ns = (now_ns + s.delay_ns()).max(self.last_release_ns[d]);
        self.last_release_ns[d] = release_ns;
        self.queues[d].push_back(Held {
            id,
            arrival_ns: now_ns,
            release_ns,
            step,
        });
        PacketFate::HoldUntil(release_ns)
    }

    /// The earliest release due over both directions, if any packet is held.
    pub fn next_release_ns(&self) -> Option<u64> {
        self.queues
            .iter()
            .filter_map(|q| q.front().map(|h| h.release_ns))
            .min()
    }

    /// The next packet whose release time has come by `now_ns` (earliest first), accounted
    /// as released at `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<Held> {
        let d = (0..2)
            .filter(|&d| {
                self.queues[d]
                    .front()
                    .is_some_and(|h| h.release_ns <= now_ns)
            })
            .min_by_key(|&d| self.queues[d][0].release_ns)?;
        let held = self.queues[d].pop_front()?;
        self.stats[held.step][d].record_hold(now_ns.saturating_sub(held.arrival_ns));
        Some(held)
    }

    /// Every held packet, whatever its release time (shutdown), accounted as released now.
    pub fn pop_all(&mut self, now_ns: u64) -> Vec<Held> {
        let mut out = Vec::with_capacity(self.held());
        for d in 0..2 {
            while let Some(held) = self.queues[d].pop_front() {
                self.stats[held.step][d].record_hold(now_ns.saturating_sub(held.arrival_ns));
                out.push(held);
            }
        }
        out
    }

    pub fn held(&self) -> usize {
        self.queues[0].len() + self.queues[1].len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const S: u64 = 1_000_000_000;

    fn schedule(text: &str) -> Schedule {
        Schedule::parse(text).unwrap()
    }

    fn two_steps() -> Element {
        // 40 ms for two seconds, then 300 ms, then back to 40 ms at 4 s: a route change and back.
        Element::new(
            schedule(
                r#"{"steps": [{"at_s": 0, "delay_ms": 40}, {"at_s": 2, "delay_ms": 300}, {"at_s": 4, "delay_ms": 40}]}"#,
            ),
            LossDraws::per_packet(1),
        )
    }

    #[test]
    fn a_packet_is_held_for_the_delay_of_the_step_in_force_at_its_arrival() {
        let mut e = two_steps();
        e.start(10 * S);
        assert_eq!(
            e.arrive(10 * S + 5 * MS, PacketDirection::Downlink, 1, &[]),
            PacketFate::HoldUntil(10 * S + 45 * MS)
        );
        assert_eq!(
            e.arrive(12 * S, PacketDirection::Uplink, 2, &[]),
            PacketFate::HoldUntil(12 * S + 300 * MS)
        );
        assert_eq!(e.next_release_ns(), Some(10 * S + 45 * MS));
        assert_eq!(e.pop_due(10 * S + 44 * MS), None);
        assert_eq!(e.pop_due(10 * S + 45 * MS).map(|h| h.id), Some(1));
        assert_eq!(e.pop_due(12 * S + 299 * MS), None);
        let h = e.pop_due(12 * S + 301 * MS).unwrap();
        assert_eq!((h.id, h.step), (2, 1));
        assert_eq!(
            e.stats[1][PacketDirection::Uplink as usize].hold_ms(),
            Some((301.0, 301.0, 301.0))
        );
        assert_eq!(
            e.stats[0][PacketDirection::Downlink as usize].hold_ms(),
            Some((40.0, 40.0, 40.0))
        );
    }

    #[test]
    fn when_the_delay_falls_later_packets_wait_behind_earlier_ones_in_fifo_order() {
        let mut e = two_steps();
        e.start(0);
        // At 3.9 s a packet gets 300 ms (release 4.2 s); at 4.0 s the delay falls to 40 ms, so
        // the next packet would be due at 4.04 s but must not overtake: it leaves at 4.2 s.
        assert_eq!(
            e.arrive(3900 * MS, PacketDirection::Downlink, 7, &[]),
            PacketFate::HoldUntil(4200 * MS)
        );
        assert_eq!(
            e.arrive(4000 * MS, PacketDirection::Downlink, 8, &[]),
            PacketFate::HoldUntil(4200 * MS)
        );
        // Once past the backlog, the new delay applies as such.
        assert_eq!(
            e.arrive(4200 * MS, PacketDirection::Downlink, 9, &[]),
            PacketFate::HoldUntil(4240 * MS)
        );
        // The other direction is not held up by this one.
        assert_eq!(
            e.arrive(4000 * MS, PacketDirection::Uplink, 10, &[]),
            PacketFate::HoldUntil(4040 * MS)
        );
        let order: Vec<u32> = std::iter::from_fn(|| e.pop_due(5 * S))
            .map(|h| h.id)
            .collect();
        assert_eq!(order, vec![10, 7, 8, 9]);
    }

    #[test]
    fn before_the_clock_starts_the_first_step_applies_and_time_zero_is_the_start() {
        let mut e = two_steps();
        assert_eq!(
            e.arrive(100 * S, PacketDirection::Downlink, 1, &[]),
            PacketFate::HoldUntil(100 * S + 40 * MS)
        );
        assert_eq!(e.before_start, [1, 0]);
        e.start(101 * S);
        e.start(105 * S); // ignored: the clock starts once
        assert_eq!(e.step_at(102 * S), 0);
        assert_eq!(e.step_at(103 * S), 1);
        assert_eq!(
            e.arrive(103 * S, PacketDirection::Downlink, 2, &[]),
            PacketFate::HoldUntil(103 * S + 300 * MS)
        );
        assert_eq!(e.before_start, [1, 0]);
    }

    #[test]
    fn loss_applies_to_its_direction_only_and_a_seed_replays_the_same_drops() {
        let text = r#"{"steps": [{"at_s": 0, "delay_ms": 0, "loss_downlink": 0.02}]}"#;
        let run = |seed| {
            let mut e = Element::new(schedule(text), LossDraws::per_packet(seed));
            e.start(0);
            let mut drops = Vec::new();
            for i in 0..100_000u32 {
                if e.arrive(i as u64, PacketDirection::Downlink, i, &[]) == PacketFate::Drop {
                    drops.push(i);
                }
                assert_ne!(e.arrive(i as u64, PacketDirection::Uplink, i, &[]), PacketFate::Drop);
            }
            (drops, e.stats[0].clone())
        };
        let (a, stats) = run(1);
        assert_eq!(a, run(1).0);
        assert_ne!(a, run(2).0);
        // 2% of 100,000 is 2000, binomial sd ~44: 1800..2200 is > 4 sd either side.
        assert!((1800..2200).contains(&a.len()), "{} drops", a.len());
        assert_eq!(stats[0].dropped, a.len() as u64);
        assert_eq!((stats[1].packets_seen, stats[1].dropped), (100_000, 0));
    }

    #[test]
    fn per_segment_draws_lose_the_same_bytes_whatever_order_they_are_sent_in() {
        use crate::segments::tests::packet;
        let text = r#"{"steps": [{"at_s": 0, "delay_ms": 0, "loss_downlink": 0.05}]}"#;
        // Two senders of the same 2,000 segments (ISNs differ): one in order, one in reverse
        // order with an extra ACK between segments; each then resends what it lost, once.
        let run = |isn: u32, order: Vec<u32>| {
            let mut e = Element::new(schedule(text), LossDraws::per_segment(9));
            e.start(0);
            e.arrive(0, PacketDirection::Downlink, 0, &packet(8080, isn, true, 0));
            let mut lost = Vec::new();
            for &i in &order {
                let seq = isn.wrapping_add(1 + i * 1448);
                if e.arrive(1, PacketDirection::Downlink, i, &packet(8080, seq, false, 1448)) == PacketFate::Drop {
                    lost.push(i);
                }
                e.arrive(1, PacketDirection::Downlink, i, &packet(8080, seq, false, 0));
            }
            lost.sort();
            let lost_again: Vec<u32> = lost
                .iter()
                .copied()
                .filter(|&i| {
                    let seq = isn.wrapping_add(1 + i * 1448);
                    e.arrive(2, PacketDirection::Downlink, i, &packet(8080, seq, false, 1448)) == PacketFate::Drop
                })
                .collect();
            (lost, lost_again, e.stats[0][0].clone())
        };
        let (lost, lost_again, stats) = run(1_000, (0..2000).collect());
        let (lost_reversed, lost_again_reversed, _) = run(u32::MAX - 5_000, (0..2000).rev().collect());
        assert_eq!(lost, lost_reversed);
        assert_eq!(lost_again, lost_again_reversed);
        // 5% of 2,000 is 100 (sd ~10); 5% of those lost again (about 5).
        assert!((60..140).contains(&lost.len()), "{} lost", lost.len());
        assert!(lost_again.len() < lost.len() / 4, "{} of {} lost again", lost_again.len(), lost.len());
        assert_eq!(stats.not_drawn, 1 + 2000, "the SYN and the pure ACKs pass undrawn");
        assert_eq!(stats.dropped as usize, lost.len() + lost_again.len());
        assert_eq!(stats.first_sends_dropped as usize, lost.len());
    }

    #[test]
    fn zero_delay_releases_at_arrival_and_shutdown_releases_everything_held() {
        let mut e = Element::new(
            schedule(r#"{"steps": [{"at_s": 0, "delay_ms": 0}, {"at_s": 1, "delay_ms": 500}]}"#),
            LossDraws::per_packet(1),
        );
        e.start(0);
        assert_eq!(e.arrive(5, PacketDirection::Uplink, 1, &[]), PacketFate::HoldUntil(5));
        assert_eq!(e.pop_due(5).map(|h| h.id), Some(1));
        e.arrive(S, PacketDirection::Uplink, 2, &[]);
        e.arrive(S, PacketDirection::Downlink, 3, &[]);
        assert_eq!(e.held(), 2);
        let all: Vec<u32> = e.pop_all(S + MS).into_iter().map(|h| h.id).collect();
        assert_eq!(all, vec![3, 2]);
        assert_eq!(e.held(), 0);
        assert_eq!(e.stats[1][0].hold_ms(), Some((1.0, 1.0, 1.0)));
    }
}
