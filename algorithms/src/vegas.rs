//! TCP Vegas (Brakmo & Peterson, IEEE JSAC 1995; Linux `net/ipv4/tcp_vegas.c` defaults).
//!
//! Vegas keeps a few segments queued at the bottleneck. Once per RTT it compares the window
//! it has with the window the path carries without queueing: with `base_rtt` the smallest RTT
//! ever seen and `rtt` the smallest RTT seen during the last round trip (as Linux), the
//! segments it has queued are
//!
//! `diff = cwnd·(rtt − base_rtt)/rtt`   (expected minus actual rate, times `base_rtt`).
//!
//! In congestion avoidance the window grows one segment in that RTT when `diff < α`, shrinks
//! one when `diff > β`, and holds in between, so the standing queue settles in `[α, β]`
//! segments. In slow start, once `diff > γ` Vegas leaves slow start early, before it fills
//! the buffer, with the window the path carried, `cwnd = min(cwnd, cwnd·base_rtt/rtt + 1)`.
//! Losses are answered as Reno does (halve once per congestion event; a timeout restarts
//! from the minimum window); as in Linux, Vegas is off while recovering and starts a fresh
//! RTT period afterwards.
//!
//! Deviations from Linux, on purpose:
//! - `diff` is divided by `rtt`, as in the paper, so it is exactly the queue in segments;
//!   Linux divides by `base_rtt`, which overstates the queue by `rtt/base_rtt`.
//! - Slow start grows the window every RTT (by the bytes acknowledged, up to ssthresh), where
//!   the paper grows it every other RTT to measure at a constant window; the reports here come
//!   once per RTT, so each one measures the window just sent.
//! - Linux needs more than two RTT samples in the period before it applies Vegas; a report
//!   does not carry the number of samples, so a period needs at least three segments
//!   acknowledged; smaller periods use Reno's growth, as Linux does.
//! - `base_rtt` is the all-time minimum (Linux also resets it when the flow restarts after
//!   idle, which the agent does not see).
//!
//! **Taking over** a running flow (MCC §3.1.1): the inherited window stays, in congestion
//! avoidance (`ssthresh = cwnd`), and Vegas starts a fresh RTT period at the handover, so its
//! first decision comes one RTT later from samples of that RTT only. `base_rtt` is the flow's
//! minimum RTT, kept across the handover, so a queue the previous algorithm built counts as
//! queue and is drained one segment per RTT.

use crate::{Algorithm, AlgorithmInfo, FlowState, Make, Measurement, Param, WindowEvent};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "vegas",
    summary: "Vegas: keep alpha..beta segments queued (cwnd·(RTT − base RTT)/RTT), once per RTT",
    source: "Brakmo & Peterson, IEEE JSAC 13(8) 1995; Linux net/ipv4/tcp_vegas.c",
    params: &[
        Param { name: "alpha", default: ALPHA_SEGMENTS, unit: "segments", help: "grow the window while fewer segments are queued" },
        Param { name: "beta", default: BETA_SEGMENTS, unit: "segments", help: "shrink the window while more segments are queued" },
        Param { name: "gamma", default: GAMMA_SEGMENTS, unit: "segments", help: "leave slow start once more segments are queued" },
    ],
    make: Make::Simple(|p| Box::new(Vegas::new(p.get("alpha"), p.get("beta"), p.get("gamma")))),
};

/// Linux defaults (`alpha = 2`, `beta = 4`, `gamma = 1`), segments queued.
const ALPHA_SEGMENTS: f64 = 2.0;
const BETA_SEGMENTS: f64 = 4.0;
const GAMMA_SEGMENTS: f64 = 1.0;
/// Segments a period must acknowledge before Vegas trusts its RTT minimum (Linux: more than
/// two RTT samples).
const MIN_PERIOD_SEGMENTS: u64 = 3;
/// Reno's decrease on loss.
const LOSS_DECREASE_NUM: u64 = 1;
const LOSS_DECREASE_DEN: u64 = 2;
/// Window after a timeout, segments (raised to the two-segment minimum).
const LOSS_WINDOW_SEGMENTS: u64 = 1;

/// What one round trip showed.
#[derive(Clone, Copy, Debug)]
struct Round {
    /// Segments queued at the bottleneck (`diff`).
    queued_segments: f64,
    /// The window the path carried without queueing, `cwnd·base_rtt/rtt`, bytes.
    carried_bytes: u64,
    /// Enough samples to apply Vegas (else Reno growth).
    trusted: bool,
}

/// The RTT period being measured (Linux's `beg_snd_nxt`, `minRTT`, `cntRTT`).
#[derive(Clone, Copy, Debug, Default)]
struct Period {
    start_us: u64,
    /// Smallest RTT sample in the period, µs (0: none).
    min_rtt_us: u64,
    acked_bytes: u64,
}

impl Period {
    fn absorb(&mut self, m: &Measurement) {
        let sample = if m.min_rtt_us > 0 { m.min_rtt_us } else { m.rtt_us };
        if sample > 0 && (self.min_rtt_us == 0 || sample < self.min_rtt_us) {
            self.min_rtt_us = sample;
        }
        self.acked_bytes += m.acked_bytes;
    }

    /// A period ends once an RTT has passed since it began.
    fn complete(&self, now_us: u64) -> bool {
        self.min_rtt_us > 0 && now_us.saturating_sub(self.start_us) >= self.min_rtt_us
    }
}

#[derive(Debug)]
pub struct Vegas {
    alpha: f64,
    beta: f64,
    gamma: f64,
    period: Period,
    /// Bytes acknowledged under Reno growth not yet turned into window.
    reno_acked_bytes: u64,
}

impl Default for Vegas {
    fn default() -> Self {
        Self::new(ALPHA_SEGMENTS, BETA_SEGMENTS, GAMMA_SEGMENTS)
    }
}

impl Vegas {
    pub fn new(alpha: f64, beta: f64, gamma: f64) -> Self {
        Self { alpha, beta, gamma, period: Period::default(), reno_acked_bytes: 0 }
    }

    fn restart_period(&mut self, now_us: u64) {
        self.period = Period { start_us: now_us, ..Period::default() };
    }

    /// Close the period if an RTT has passed, and say what it showed.
    fn take_round(&mut self, state: &FlowState) -> Option<Round> {
        if !self.period.complete(state.now_us) || state.min_rtt_us == 0 {
            return None;
        }
        let period = self.period;
        self.restart_period(state.now_us);
        let rtt = period.min_rtt_us as f64;
        let base_rtt = (state.min_rtt_us as f64).min(rtt);
        let cwnd_segments = state.cwnd_bytes as f64 / state.mss_bytes as f64;
        Some(Round {
            queued_segments: cwnd_segments * (rtt - base_rtt) / rtt,
            carried_bytes: (state.cwnd_bytes as f64 * base_rtt / rtt) as u64,
            trusted: period.acked_bytes >= MIN_PERIOD_SEGMENTS * state.mss_bytes,
        })
    }

    /// Keep ssthresh below the window so the flow stays in congestion avoidance
    /// (`tcp_vegas_ssthresh`: `min(ssthresh, cwnd − 1)`).
    fn stay_in_avoidance(state: &mut FlowState) {
        let below = state.cwnd_bytes.saturating_sub(state.mss_bytes).max(state.min_cwnd_bytes());
        state.ssthresh_bytes = state.ssthresh_bytes.min(below);
    }

    fn leave_slow_start(state: &mut FlowState, round: Round) {
        let target = round.carried_bytes + state.mss_bytes;
        state.cwnd_bytes = state.cwnd_bytes.min(target).max(state.min_cwnd_bytes());
        Self::stay_in_avoidance(state);
    }

    /// Congestion avoidance, once per RTT: ±1 segment to keep α..β segments queued.
    fn adjust(&self, state: &mut FlowState, queued_segments: f64) {
        if queued_segments > self.beta {
            state.cwnd_bytes =
                state.cwnd_bytes.saturating_sub(state.mss_bytes).max(state.min_cwnd_bytes());
            Self::stay_in_avoidance(state);
        } else if queued_segments < self.alpha {
            state.cwnd_bytes += state.mss_bytes;
        }
    }

    /// Reno's congestion avoidance: one MSS per window acknowledged.
    fn reno_avoidance(&mut self, state: &mut FlowState, acked_bytes: u64) {
        self.reno_acked_bytes += acked_bytes;
        let segments = self.reno_acked_bytes / state.cwnd_bytes;
        self.reno_acked_bytes -= segments * state.cwnd_bytes;
        state.cwnd_bytes += segments * state.mss_bytes;
    }

    fn reduced_window(state: &FlowState) -> u64 {
        (state.cwnd_bytes * LOSS_DECREASE_NUM / LOSS_DECREASE_DEN).max(state.min_cwnd_bytes())
    }
}

impl Algorithm for Vegas {
    fn name(&self) -> &str {
        INFO.name
    }

    fn window_on_loss(&self, state: &FlowState) -> Option<u64> {
        (!state.in_recovery()).then(|| Self::reduced_window(state))
    }

    fn take_over(&mut self, state: &mut FlowState) {
        *self = Self::new(self.alpha, self.beta, self.gamma);
        self.restart_period(state.now_us);
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        // Linux runs Vegas only in the Open state: not on a loss, nor while recovering.
        let vegas_on = !m.timeout && m.lost_packets == 0 && !state.in_recovery();
        let round = if vegas_on {
            self.period.absorb(m);
            self.take_round(state)
        } else {
            self.restart_period(state.now_us);
            None
        };
        if let Some(round) = round {
            if round.trusted && state.in_slow_start() && round.queued_segments > self.gamma {
                Self::leave_slow_start(state, round);
                self.reno_acked_bytes = 0;
                return;
            }
        }
        match state.classify(m) {
            WindowEvent::Timeout => {
                state.ssthresh_bytes = Self::reduced_window(state);
                state.cwnd_bytes =
                    (LOSS_WINDOW_SEGMENTS * state.mss_bytes).max(state.min_cwnd_bytes());
                self.reno_acked_bytes = 0;
            }
            WindowEvent::CongestionEvent { .. } => {
                state.ssthresh_bytes = Self::reduced_window(state);
                state.cwnd_bytes = state.ssthresh_bytes;
                self.reno_acked_bytes = 0;
            }
            WindowEvent::Hold => {}
            WindowEvent::Avoidance { acked_bytes } => match round {
                Some(round) if round.trusted => self.adjust(state, round.queued_segments),
                Some(_) => self.reno_avoidance(state, acked_bytes),
                // Between the once-per-RTT decisions the window holds.
                None => {}
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSender, Link, LinkRound};

    const MBIT: u64 = 24;
    const RTT_MS: u64 = 50;

    fn sender(spec: &str) -> FakeSender {
        FakeSender::new(crate::simple(spec).unwrap(), 10, RTT_MS)
    }

    fn queued_segments(s: &FakeSender, r: &LinkRound) -> f64 {
        r.queue_bytes as f64 / s.mss() as f64
    }

    #[test]
    fn take_over_decides_one_rtt_after_the_handover_and_drains_an_inherited_queue() {
        // Reno left 100 segments and a queue: RTT 60 ms on a 50 ms path, 16.7 segments queued.
        let mut s = FakeSender::new(crate::simple("reno").unwrap(), 100, RTT_MS);
        s.ack_segments(0);
        s.set_rtt_ms(60);
        s.hand_over_to(crate::simple("vegas").unwrap());
        assert!(!s.state.in_slow_start());
        s.advance_ms(10);
        s.ack_segments(5);
        assert_eq!(s.cwnd_segments(), 100.0, "no decision within the first RTT");
        s.advance_ms(60);
        s.ack_segments(95);
        assert_eq!(s.cwnd_segments(), 99.0, "more than β queued: one segment less");
        for _ in 0..5 {
            s.ack_round();
        }
        assert_eq!(s.cwnd_segments(), 94.0);
        assert!(!s.state.in_slow_start());
    }

    #[test]
    fn standing_queue_converges_into_alpha_beta() {
        let link = Link::new(MBIT, RTT_MS, 2_000_000); // a deep buffer: ~13 BDP
        let mut s = sender("vegas");
        let bdp_segments = link.bdp_bytes() as f64 / s.mss() as f64;
        for _ in 0..60 {
            let r = s.round_on_link(&link);
            assert_eq!(r.lost_packets, 0);
        }
        for _ in 0..40 {
            let r = s.round_on_link(&link);
            let q = queued_segments(&s, &r);
            assert!((ALPHA_SEGMENTS..=BETA_SEGMENTS + 1.0).contains(&q), "queue {q:.2} segments");
            let cwnd = s.cwnd_segments();
            assert!(
                (bdp_segments + ALPHA_SEGMENTS..=bdp_segments + BETA_SEGMENTS + 1.0)
                    .contains(&cwnd),
                "cwnd {cwnd:.1} segments, BDP {bdp_segments:.1}"
            );
        }
    }

    #[test]
    fn parameters_set_the_queue_target() {
        let link = Link::new(MBIT, RTT_MS, 2_000_000);
        let mut s = sender("vegas:alpha=6,beta=8");
        for _ in 0..80 {
            s.round_on_link(&link);
        }
        for _ in 0..20 {
            let r = s.round_on_link(&link);
            let q = queued_segments(&s, &r);
            assert!((6.0..=9.0).contains(&q), "queue {q:.2} segments");
        }
    }

    #[test]
    fn leaves_slow_start_before_filling_the_buffer() {
        let link = Link::new(MBIT, RTT_MS, 2_000_000);
        let bdp = link.bdp_bytes();
        let mut vegas = sender("vegas");
        let mut reno = sender("reno");
        let mut vegas_max_queue = 0;
        let mut reno_lost = 0;
        for _ in 0..15 {
            let r = vegas.round_on_link(&link);
            vegas_max_queue = vegas_max_queue.max(r.queue_bytes);
            assert_eq!(r.lost_packets, 0, "Vegas never fills the buffer");
            reno_lost += reno.round_on_link(&link).lost_packets;
        }
        assert!(reno_lost > 0, "Reno's slow start runs until the buffer overflows");
        // The queue peaks in the one round that shows it (at most one doubling past the BDP).
        assert!(vegas_max_queue <= bdp, "peak queue {vegas_max_queue} bytes");
        assert!(!vegas.state.in_slow_start());
        // On leaving, the window is what the path carried plus one segment.
        let cwnd = vegas.state.cwnd_bytes as f64;
        assert!(cwnd <= (bdp + 6 * vegas.mss()) as f64, "cwnd {cwnd}, BDP {bdp}");
    }

    #[test]
    fn slow_start_exit_sets_window_to_carried_plus_one() {
        let mut s = sender("vegas");
        s.ack_round(); // 20 segments, base RTT 50 ms
        s.set_rtt_ms(100); // 20 segments now take twice as long: 10 of them are queued
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 11.0, "cwnd·base_rtt/rtt + 1 = 20·50/100 + 1");
        assert!(!s.state.in_slow_start());
    }

    #[test]
    fn slow_start_continues_while_queue_within_gamma() {
        let mut s = sender("vegas");
        s.ack_round(); // 20 segments
        s.set_rtt_ms(52); // 20·2/52 ≈ 0.77 segments queued, below γ = 1
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 40.0);
        assert!(s.state.in_slow_start());
    }

    #[test]
    fn avoidance_moves_one_segment_per_rtt() {
        let mut s = sender("vegas");
        s.ack_round();
        s.set_rtt_ms(100);
        s.ack_round(); // leaves slow start at 11 segments
        s.set_rtt_ms(50); // nothing queued: grow
        for i in 1..=3 {
            s.ack_round();
            assert_eq!(s.cwnd_segments(), 11.0 + f64::from(i));
        }
        s.set_rtt_ms(70); // 14·20/70 = 4 segments queued: hold
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 14.0);
        s.set_rtt_ms(100); // 7 segments queued: shrink
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 13.0);
        s.ack_segments(2); // the same RTT: no second decision
        assert_eq!(s.cwnd_segments(), 13.0);
    }

    #[test]
    fn loss_halves_the_window() {
        let link = Link::new(MBIT, RTT_MS, 2_000_000);
        let mut s = sender("vegas");
        for _ in 0..30 {
            s.round_on_link(&link);
        }
        let cwnd = s.state.cwnd_bytes;
        s.lose(1);
        assert_eq!(s.state.cwnd_bytes, cwnd / 2);
        assert_eq!(s.state.ssthresh_bytes, cwnd / 2);
        s.timeout();
        assert_eq!(s.cwnd_segments(), 2.0);
    }

    #[test]
    fn utilises_a_link_with_a_one_bdp_buffer() {
        let link = Link::new(MBIT, RTT_MS, Link::new(MBIT, RTT_MS, 0).bdp_bytes());
        let mut s = sender("vegas");
        for _ in 0..30 {
            s.round_on_link(&link);
        }
        let mut rate = 0;
        for _ in 0..50 {
            s.round_on_link(&link);
            rate += s.delivery_rate_bytes_per_s;
        }
        let utilisation = rate as f64 / 50.0 / link.bandwidth_bytes_per_s as f64;
        assert!(utilisation >= 0.99, "utilisation {utilisation:.3}");
    }
}
