//! CUBIC (RFC 9438; Linux `net/ipv4/tcp_cubic.c` defaults).
//!
//! After a congestion event the window follows a cubic function of the time since the
//! event, `W(t) = C·(t − K)³ + W_max`, where `W_max` is the window at the event and
//! `K = ∛(W_max·(1 − β)/C)` is the time at which the curve returns to it: concave while it
//! approaches `W_max`, convex as it probes beyond. Windows in the formula are in segments and
//! times in seconds. As in Linux, the target is taken one minimum RTT ahead, growth per ACK is
//! at most half a segment per segment acknowledged (1.5× per RTT), and a Reno-friendly
//! estimate `W_est` (RFC 9438 §4.3) keeps CUBIC at least as fast as Reno at short RTTs. Fast
//! convergence lowers `W_max` when a flow loses before regaining its previous maximum, so it
//! yields bandwidth to newcomers. HyStart is not part of this version.

use crate::{Algorithm, FlowState, Measurement, WindowEvent};

/// Multiplicative decrease (Linux `beta = 717/1024`).
const BETA: f64 = 717.0 / 1024.0;
/// Cubic scaling constant, segments/s³ (Linux `bic_scale = 41` ≈ 0.4).
const C_SEGMENTS_PER_S3: f64 = 0.4;
/// Reno-friendly additive increase for this β (RFC 9438 §4.3): 3(1−β)/(1+β) segments per RTT.
const ALPHA_AIMD: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);
/// Linux never grows faster than one segment per two acknowledged (`cnt >= 2`).
const MAX_GROWTH_PER_ACKED_SEGMENT: f64 = 0.5;
const FAST_CONVERGENCE: bool = true;

#[derive(Debug, Default)]
pub struct Cubic {
    /// Window before the last reduction, segments (0: no congestion event yet).
    w_max_segments: f64,
    /// Start of the current congestion-avoidance epoch, µs.
    epoch_start_us: Option<u64>,
    /// Time for the curve to regain `origin_segments`, seconds.
    k_s: f64,
    origin_segments: f64,
    /// Reno-friendly window estimate, segments.
    w_est_segments: f64,
}

impl Cubic {
    fn on_congestion_event(&mut self, state: &mut FlowState) {
        let cwnd = state.cwnd_bytes as f64 / state.mss_bytes as f64;
        self.epoch_start_us = None;
        self.w_max_segments = if FAST_CONVERGENCE && cwnd < self.w_max_segments {
            cwnd * (1.0 + BETA) / 2.0
        } else {
            cwnd
        };
        let reduced = (state.cwnd_bytes as f64 * BETA) as u64;
        state.ssthresh_bytes = reduced.max(state.min_cwnd_bytes());
    }

    fn start_epoch(&mut self, state: &FlowState, cwnd: f64) {
        self.epoch_start_us = Some(state.now_us);
        self.w_est_segments = cwnd;
        if cwnd < self.w_max_segments {
            self.k_s = ((self.w_max_segments - cwnd) / C_SEGMENTS_PER_S3).cbrt();
            self.origin_segments = self.w_max_segments;
        } else {
            self.k_s = 0.0;
            self.origin_segments = cwnd;
        }
    }

    /// The cubic curve one minimum RTT ahead, segments.
    fn target_segments(&self, state: &FlowState) -> f64 {
        let epoch = self.epoch_start_us.unwrap_or(state.now_us);
        let t_s = (state.now_us.saturating_sub(epoch) + state.min_rtt_us) as f64 / 1e6;
        self.origin_segments + C_SEGMENTS_PER_S3 * (t_s - self.k_s).powi(3)
    }

    fn congestion_avoidance(&mut self, state: &mut FlowState, acked_bytes: u64) {
        let mss = state.mss_bytes as f64;
        let cwnd = state.cwnd_bytes as f64 / mss;
        if self.epoch_start_us.is_none() {
            self.start_epoch(state, cwnd);
        }
        let acked = acked_bytes as f64 / mss;
        let mut target = self.target_segments(state);
        self.w_est_segments += ALPHA_AIMD * acked / cwnd;
        target = target.max(self.w_est_segments);
        if target <= cwnd {
            return;
        }
        // Linux grows by 1/cnt segment per acknowledged segment, cnt = cwnd / (target − cwnd).
        let per_acked = ((target - cwnd) / cwnd).min(MAX_GROWTH_PER_ACKED_SEGMENT);
        let growth = (acked * per_acked).min(target - cwnd);
        state.cwnd_bytes += (growth * mss) as u64;
    }
}

impl Algorithm for Cubic {
    fn name(&self) -> &'static str {
        "cubic"
    }

    fn on_measurement(&mut self, state: &mut FlowState, m: &Measurement) {
        match state.classify(m) {
            WindowEvent::Timeout => {
                // tcp_enter_loss: ssthresh from the current window, then cubic's state is reset.
                self.on_congestion_event(state);
                *self = Self::default();
                state.cwnd_bytes = state.min_cwnd_bytes();
            }
            WindowEvent::CongestionEvent => {
                self.on_congestion_event(state);
                state.cwnd_bytes = state.ssthresh_bytes;
            }
            WindowEvent::Hold => {}
            WindowEvent::Avoidance { acked_bytes } => self.congestion_avoidance(state, acked_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::FakeSender;

    fn sender_after_loss_at(w_max_segments: u32, rtt_ms: u64) -> FakeSender {
        let mut s = FakeSender::new(Box::new(Cubic::default()), w_max_segments, rtt_ms);
        s.ack_segments(0);
        s.lose(1);
        s
    }

    #[test]
    fn loss_reduces_to_beta() {
        let s = sender_after_loss_at(100, 100);
        assert_eq!(s.state.cwnd_bytes, (100.0 * s.mss() as f64 * BETA) as u64);
        assert_eq!(s.state.ssthresh_bytes, s.state.cwnd_bytes);
    }

    #[test]
    fn window_follows_the_cubic_curve_after_a_loss() {
        let rtt_ms = 100;
        let mut s = sender_after_loss_at(200, rtt_ms);
        let w_max = 200.0;
        let k_s = (w_max * (1.0 - BETA) / C_SEGMENTS_PER_S3).cbrt();
        let loss_at_s = s.now_us as f64 / 1e6;
        // Check the curve over its concave part, its plateau and its convex part.
        for _ in 0..90 {
            s.ack_round();
            let t = s.now_us as f64 / 1e6 - loss_at_s + rtt_ms as f64 / 1e3;
            let expected = (C_SEGMENTS_PER_S3 * (t - k_s).powi(3) + w_max).min(1.5 * w_max);
            let got = s.cwnd_segments();
            assert!(
                (got - expected).abs() <= 0.06 * expected + 2.0,
                "t={t:.2}s: cwnd {got:.1} segments, W(t) = {expected:.1}"
            );
        }
        assert!(s.cwnd_segments() > w_max, "probes beyond W_max once t > K");
    }

    #[test]
    fn plateau_near_w_max_at_k() {
        // A large window, so the Reno-friendly estimate stays below the curve.
        let rtt_ms = 100;
        let mut s = sender_after_loss_at(1000, rtt_ms);
        let k_s = (1000.0 * (1.0 - BETA) / C_SEGMENTS_PER_S3).cbrt();
        while (s.now_us as f64) / 1e6 + 2.0 * rtt_ms as f64 / 1e3 < k_s {
            s.ack_round();
        }
        let w = s.cwnd_segments();
        assert!((990.0..=1001.0).contains(&w), "at t = K the window is back near W_max, got {w}");
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let rtt_ms = 100;
        let mut s = sender_after_loss_at(1000, rtt_ms);
        s.ack_segments(1000); // the window in flight at the first loss: recovery ends
        let cwnd_at_loss = s.cwnd_segments();
        s.lose(1); // lost again at about 700 segments, below the previous maximum of 1000
        assert!((s.cwnd_segments() - cwnd_at_loss * BETA).abs() < 1.0);
        let lowered_w_max = cwnd_at_loss * (1.0 + BETA) / 2.0;
        let k_s = ((lowered_w_max - s.cwnd_segments()) / C_SEGMENTS_PER_S3).cbrt();
        let start = s.now_us;
        while ((s.now_us - start) as f64) / 1e6 + 2.0 * rtt_ms as f64 / 1e3 < k_s {
            s.ack_round();
        }
        let plateau = s.cwnd_segments();
        assert!(
            (lowered_w_max - 8.0..=lowered_w_max + 1.0).contains(&plateau),
            "plateau at the lowered W_max {lowered_w_max:.1}, got {plateau:.1}"
        );
    }

    #[test]
    fn reno_friendly_at_short_rtt() {
        // At 1 ms RTT the cubic curve is nearly flat; W_est grows ALPHA_AIMD segments per RTT.
        let mut s = sender_after_loss_at(100, 1);
        let start = s.cwnd_segments();
        for _ in 0..100 {
            s.ack_round();
        }
        let per_round = (s.cwnd_segments() - start) / 100.0;
        assert!(
            (per_round - ALPHA_AIMD).abs() < 0.1,
            "grows like Reno with β = 0.7: {per_round:.3} segments per RTT, want {ALPHA_AIMD:.3}"
        );
    }

    #[test]
    fn timeout_resets_to_minimum_window() {
        let mut s = sender_after_loss_at(100, 50);
        s.ack_round();
        s.timeout();
        assert_eq!(s.cwnd_segments(), 2.0);
        assert!(s.state.in_slow_start());
    }
}
