//! Copa, default mode (Arun & Balakrishnan, "Copa: Practical Delay-Based Congestion
//! Control for the Internet", NSDI 2018).
//!
//! Copa steers its sending rate toward a target that falls with the queueing delay:
//!
//! `λt = 1/(δ·dq)` packets/s, with `dq = RTTstanding − RTTmin`,
//!
//! and compares it with its current rate `λ = cwnd/RTTstanding`. For every packet
//! acknowledged, `cwnd += v/(δ·cwnd)` if `λ ≤ λt`, else `cwnd −= v/(δ·cwnd)` (packets), i.e.
//! about `v/δ` packets per RTT. At equilibrium on a bottleneck the flow sends at the link
//! rate µ and `µ = 1/(δ·dq)`: it keeps `µ·dq = 1/δ` packets queued (2 for δ = 0.5).
//!
//! The velocity `v` speeds convergence: once per RTT the sender compares its window with the
//! window one RTT earlier; if it moved in the same direction three RTTs running, `v`
//! doubles every further RTT; when the direction changes, `v` returns to 1 (at once when the
//! per-ACK decision turns while `v > 1`, as in mvfst's Copa). Slow start doubles the window
//! per RTT (here: `cwnd += acked bytes`) until the first time `λ > λt`. The pacing rate is
//! `2·cwnd/RTTstanding`.
//!
//! Mapping onto the agent's reports, and other choices:
//! - `RTTstanding` (the paper: the smallest RTT over the last srtt/2) is the report's
//!   smallest RTT sample, i.e. over the last RTT with the default once-per-RTT reports.
//!   `RTTmin` (the paper: over the last 10 s) is the flow's all-time minimum.
//! - The per-ACK rule is aggregated over a report of `n` packets exactly as the continuous
//!   rule `cwnd·dcwnd = ±(v/δ)·dn` integrates: `cwnd² ± 2·n·v/δ`. Within a report
//!   `RTTstanding` is fixed, so the per-ACK decision flips where `λ = λt`: the window stops
//!   at `λt·RTTstanding` rather than crossing it (in slow start too).
//! - Losses: Copa's default mode does not react to loss beyond what delay shows, so losses
//!   are ignored. A retransmission timeout restarts from the two-segment minimum window in
//!   slow start.
//! - Competitive mode (switching δ against buffer-filling flows) is out of scope.
//!
//! **Taking over** a running flow (MCC §3.1.1): the inherited window stays, slow start is
//! over (a fresh Copa would double its window until the first `λ > λt`), the velocity starts
//! at 1 with no direction history, and the flow paces at window / recent RTT
//! ([`FlowState::handover_rate_bytes_per_s`]) until the first report, from which Copa's own
//! pacing (`2·cwnd/RTTstanding`) takes over.

use crate::{Algorithm, AlgorithmInfo, FlowState, Make, Measurement, Param};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "copa",
    summary: "Copa (default mode): rate toward 1/(δ·queueing delay), about 1/δ packets queued",
    source: "Arun & Balakrishnan, Copa, NSDI 2018 (default mode)",
    params: &[
        Param { name: "delta", default: DELTA, unit: "1/packets", help: "δ: the flow keeps about 1/δ packets queued" },
        Param { name: "max_velocity", default: MAX_VELOCITY, unit: "ratio", help: "cap on the velocity v (the paper: none)" },
    ],
    make: Make::Simple(|p| Box::new(Copa::new(p.get("delta"), p.get("max_velocity")))),
};

/// Default δ (the paper's default mode).
const DELTA: f64 = 0.5;
/// The velocity is not capped in the paper; a cap this large never binds in practice.
const MAX_VELOCITY: f64 = 1e6;
/// RTTs the window must move one way before the velocity starts doubling.
const SAME_DIRECTION_RTTS_BEFORE_DOUBLING: u32 = 3;
/// Pacing rate over `cwnd/RTTstanding`.
const PACING_GAIN: f64 = 2.0;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum VelocityDirection {
    Up,
    Down,
}

/// The window one RTT ago, for the per-RTT direction check.
#[derive(Clone, Copy, Debug)]
struct Record {
    at_us: u64,
    cwnd_bytes: u64,
}

#[derive(Debug)]
pub struct Copa {
    delta: f64,
    max_velocity: f64,
    slow_start: bool,
    velocity: f64,
    direction: Option<VelocityDirection>,
    /// Consecutive per-RTT checks that found the window moving in `direction`.
    same_direction_rtts: u32,
    record: Option<Record>,
}

impl Default for Copa {
    fn default() -> Self {
        Self::new(DELTA, MAX_VELOCITY)
    }
}

impl Copa {
    pub fn new(delta: f64, max_velocity: f64) -> Self {
        Self {
            delta: if delta > 0.0 { delta } else { DELTA },
            max_velocity: max_velocity.max(1.0),
            slow_start: true,
            velocity: 1.0,
            direction: None,
            same_direction_rtts: 0,
            record: None,
        }
    }

    /// Target rate `1/(δ·dq)`, packets/s (infinite without queueing delay).
    fn target_rate_pkts_per_s(&self, queueing_delay_us: u64) -> f64 {
        if queueing_delay_us == 0 {
            return f64::INFINITY;
        }
        1e6 / (self.delta * queueing_delay_us as f64)
    }

    /// Once per RTT: did the window move the same way as before? Doubles or resets `v`.
    fn check_direction(&mut self, now_us: u64, cwnd_bytes: u64, rtt_us: u64) {
        let Some(record) = self.record else {
            self.record = Some(Record { at_us: now_us, cwnd_bytes });
            return;
        };
        if now_us.saturating_sub(record.at_us) < rtt_us {
            return;
        }
        let moved = if cwnd_bytes > record.cwnd_bytes { VelocityDirection::Up } else { VelocityDirection::Down };
        if self.direction == Some(moved) {
            self.same_direction_rtts += 1;
            if self.same_direction_rtts >= SAME_DIRECTION_RTTS_BEFORE_DOUBLING {
                self.velocity = (2.0 * self.velocity).min(self.max_velocity);
            }
        } else {
            self.velocity = 1.0;
            self.same_direction_rtts = 0;
        }
        self.direction = Some(moved);
        self.record = Some(Record { at_us: now_us, cwnd_bytes });
    }

    /// The per-ACK decision turned while `v` was built up the other way: restart at `v = 1`.
    fn turn(&mut self, to: VelocityDirection, now_us: u64, cwnd_bytes: u64) {
        if self.direction != Some(to) && self.velocity > 1.0 {
            self.direction = Some(to);
            self.velocity = 1.0;
            self.same_direction_rtts = 0;
            self.record = Some(Record { at_us: now_us, cwnd_bytes });
        }
    }

    /// The window after `acked` packets of `±v/(δ·cwnd)` each, stopping at `target` (packets).
    fn step(&self, cwnd: f64, acked: f64, up: bool, target: f64) -> f64 {
        let change = 2.0 * acked * self.velocity / self.delta;
        if up {
            (cwnd * cwnd + change).sqrt().min(target.max(cwnd))
        } else {
            (cwnd * cwnd - change).max(0.0).sqrt().max(target.min(cwnd))
        }
    }

    fn restart(&mut self, state: &mut FlowState) {
        *self = Self::new(self.delta, self.max_velocity);
        state.cwnd_bytes = state.min_cwnd_bytes();
        state.ssthresh_bytes = u64::MAX;
    }
}

impl Algorithm for Copa {
    fn name(&self) -> &str {
        INFO.name
    }

    fn take_over(&mut self, state: &mut FlowState) {
        *self = Self::new(self.delta, self.max_velocity);
        self.slow_start = false;
        state.pacing_rate_bytes_per_s = state.handover_rate_bytes_per_s();
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        if m.timeout {
            self.restart(state);
        }
        let standing_us = if m.min_rtt_us > 0 { m.min_rtt_us } else { m.rtt_us };
        if standing_us == 0 || state.min_rtt_us == 0 {
            return;
        }
        let min_rtt_us = state.min_rtt_us.min(standing_us);
        let standing_s = standing_us as f64 / 1e6;
        let mss = state.mss_bytes as f64;
        let cwnd = state.cwnd_bytes as f64 / mss;
        let acked = m.acked_bytes as f64 / mss;
        let target_rate = self.target_rate_pkts_per_s(standing_us - min_rtt_us);
        let target_window = target_rate * standing_s;
        let up = cwnd / standing_s <= target_rate;

        if acked > 0.0 {
            if self.slow_start && up {
                let doubled = cwnd + acked;
                state.cwnd_bytes = (doubled.min(target_window.max(cwnd)) * mss) as u64;
            } else {
                self.slow_start = false;
                self.check_direction(state.now_us, state.cwnd_bytes, standing_us);
                let to = if up { VelocityDirection::Up } else { VelocityDirection::Down };
                self.turn(to, state.now_us, state.cwnd_bytes);
                let next = self.step(cwnd, acked, up, target_window);
                state.cwnd_bytes = ((next * mss) as u64).max(state.min_cwnd_bytes());
                // No slow start in FlowState's sense either.
                state.ssthresh_bytes = state.cwnd_bytes;
            }
        }
        state.pacing_rate_bytes_per_s =
            Some((PACING_GAIN * state.cwnd_bytes as f64 / standing_s) as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSender, Link};

    const MBIT: u64 = 24;
    const RTT_MS: u64 = 50;

    fn sender(spec: &str, init_cwnd: u32) -> FakeSender {
        FakeSender::new(crate::simple(spec).unwrap(), init_cwnd, RTT_MS)
    }

    /// A sender whose Copa has left slow start, with RTTmin = 50 ms.
    fn avoiding_sender(init_cwnd: u32) -> FakeSender {
        let copa = Copa { slow_start: false, ..Copa::default() };
        let mut s = FakeSender::new(Box::new(copa), init_cwnd, RTT_MS);
        s.ack_segments(0); // RTTmin
        s
    }

    #[test]
    fn take_over_paces_at_the_inherited_rate_and_skips_slow_start() {
        let mut s = sender("reno", 100);
        s.ack_segments(0);
        s.hand_over_to(crate::simple("copa").unwrap());
        let rate = 100 * s.mss() * 1000 / RTT_MS;
        assert_eq!(s.state.pacing_rate_bytes_per_s, Some(rate));
        s.ack_round(); // no queueing delay: a fresh Copa would double
        assert!((s.cwnd_segments() - 102.0).abs() < 0.1, "v/δ = 2 segments: {}", s.cwnd_segments());
        assert!(!s.state.in_slow_start());
    }

    #[test]
    fn target_rate_is_one_over_delta_times_queueing_delay() {
        let copa = Copa::default();
        assert_eq!(copa.target_rate_pkts_per_s(10_000), 200.0); // 1/(0.5 · 10 ms)
        assert_eq!(copa.target_rate_pkts_per_s(0), f64::INFINITY);
        assert_eq!(Copa::new(0.25, MAX_VELOCITY).target_rate_pkts_per_s(10_000), 400.0);
        // RTTmin 50 ms, RTTstanding 60 ms: λt = 200 packets/s, i.e. 12 packets per 60 ms.
        for (cwnd, grows) in [(11, true), (13, false)] {
            let mut s = avoiding_sender(cwnd);
            s.set_rtt_ms(60);
            s.ack_segments(u64::from(cwnd));
            let got = s.cwnd_segments();
            assert_eq!(got > f64::from(cwnd), grows, "cwnd {cwnd} -> {got}");
        }
    }

    #[test]
    fn delta_parameter_moves_the_target() {
        // δ = 0.25: λt = 400 packets/s at dq = 10 ms, 24 packets per 60 ms.
        for (cwnd, doubles) in [(20, true), (30, false)] {
            let mut s = sender("copa:delta=0.25", cwnd);
            s.ack_segments(0);
            s.set_rtt_ms(60);
            s.ack_segments(u64::from(cwnd));
            let got = s.cwnd_segments();
            if doubles {
                assert_eq!(got, 24.0, "slow start grows, but stops at λt·RTTstanding");
            } else {
                assert!(got < f64::from(cwnd), "cwnd {cwnd} -> {got}");
            }
        }
    }

    #[test]
    fn per_ack_rule_moves_v_over_delta_packets_per_rtt() {
        let mut s = avoiding_sender(1000);
        s.ack_round(); // no queueing delay: up
        assert!((s.cwnd_segments() - 1002.0).abs() < 0.01, "{}", s.cwnd_segments());
    }

    #[test]
    fn velocity_doubles_after_three_rtts_and_resets_on_reversal() {
        let mut s = sender("copa", 1000);
        s.ack_round(); // slow start: 2000 packets at RTTmin = 50 ms
        assert_eq!(s.cwnd_segments(), 2000.0);
        s.set_rtt_ms(100); // λ = 20000 packets/s ≫ λt = 40: down from now on
        let mut steps = Vec::new();
        for _ in 0..8 {
            let before = s.cwnd_segments();
            s.ack_round();
            steps.push(((before - s.cwnd_segments()) / (1.0 / DELTA)).round());
        }
        // v per RTT: 1 while the direction is being established, doubling once it held 3 RTTs.
        assert_eq!(steps, [1.0, 1.0, 1.0, 1.0, 2.0, 4.0, 8.0, 16.0]);
        s.set_rtt_ms(50); // no queueing delay: up again, v back to 1 at once
        let before = s.cwnd_segments();
        s.ack_round();
        let step = s.cwnd_segments() - before;
        assert!((step - 1.0 / DELTA).abs() < 0.05, "first step up is 1/δ packets: {step}");
    }

    #[test]
    fn slow_start_doubles_until_rate_exceeds_target() {
        let mut s = sender("copa", 10);
        for expected in [20.0, 40.0, 80.0] {
            s.ack_round();
            assert_eq!(s.cwnd_segments(), expected);
        }
        s.set_rtt_ms(70); // λt = 1/(0.5 · 20 ms) = 100 packets/s < 80/0.07
        s.ack_round();
        assert!(s.cwnd_segments() < 80.0, "left slow start: {}", s.cwnd_segments());
        s.set_rtt_ms(50);
        s.ack_round();
        assert!(s.cwnd_segments() < 82.0, "no doubling after slow start");
    }

    #[test]
    fn pacing_is_twice_cwnd_over_standing_rtt() {
        let mut s = sender("copa", 10);
        s.ack_round();
        s.set_rtt_ms(80);
        s.ack_round();
        let expected = 2.0 * s.state.cwnd_bytes as f64 / 0.080;
        let pacing = s.state.pacing_rate_bytes_per_s.unwrap() as f64;
        assert!((pacing - expected).abs() <= 1.0, "pacing {pacing}, 2·cwnd/RTT {expected}");
    }

    #[test]
    fn losses_are_ignored_and_timeout_restarts_small() {
        let mut s = sender("copa", 10);
        s.ack_round();
        let cwnd = s.state.cwnd_bytes;
        s.lose(3);
        assert_eq!(s.state.cwnd_bytes, cwnd);
        s.timeout();
        assert_eq!(s.cwnd_segments(), 2.0);
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 4.0, "slow start again");
    }

    #[test]
    fn standing_queue_settles_near_one_over_delta_packets() {
        let link = Link::new(MBIT, RTT_MS, 2_000_000); // deep buffer
        let mut s = sender("copa", 10);
        for _ in 0..100 {
            s.round_on_link(&link);
        }
        let (mut queue_sum, mut queue_max, mut rate_sum) = (0.0, 0.0_f64, 0);
        let rounds = 200;
        for _ in 0..rounds {
            let r = s.round_on_link(&link);
            let q = r.queue_bytes as f64 / s.mss() as f64;
            queue_sum += q;
            queue_max = queue_max.max(q);
            rate_sum += s.delivery_rate_bytes_per_s;
        }
        let queue_mean = queue_sum / f64::from(rounds);
        let utilisation = rate_sum as f64 / f64::from(rounds) / link.bandwidth_bytes_per_s as f64;
        eprintln!("mean queue {queue_mean:.2}, max {queue_max:.2}, utilisation {utilisation:.3}");
        assert!((1.0..=4.0).contains(&queue_mean), "mean queue {queue_mean:.2} packets");
        assert!(queue_max <= 8.0, "max queue {queue_max:.2} packets");
        assert!(utilisation >= 0.95, "utilisation {utilisation:.3}");
    }
}
