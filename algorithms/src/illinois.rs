//! TCP Illinois (Liu, Başar & Srikant, "TCP-Illinois: a loss- and delay-based congestion
//! control algorithm for high-speed networks", Performance Evaluation 65(6–7), 2008; Linux
//! `net/ipv4/tcp_illinois.c`).
//!
//! Loss decides *when* the window shrinks, queueing delay *how fast* it grows and *how much*
//! it shrinks. Once per RTT the average queueing delay `da = avg_rtt − base_rtt` of the last
//! round is compared with the largest seen, `dm = max_rtt − base_rtt` (`base_rtt` and
//! `max_rtt` are the smallest and largest RTT samples of the flow), with thresholds
//! `d1 = dm/100`, `d2 = dm/10`, `d3 = 8·dm/10`:
//! - additive increase `α` (segments per RTT): `α_max` while `da ≤ d1`, else
//!   `κ1/(κ2 + da)`, the curve through `α_max` at `d1` and `α_min` at `dm` — concave growth,
//!   fast far from congestion and gentle near it;
//! - decrease factor `β`: `β_min` while `da ≤ d2`, `β_max` from `d3` on, linear between; a
//!   loss sets `cwnd = cwnd·(1 − β)` (at least 2 segments), so a loss without queueing delay
//!   (a random loss) costs only `β_min` = 1/8 of the window.
//!
//! As Linux does it: below `win_thresh` = 15 segments `α = 1`, `β = 1/2` (Reno); once the
//! delay has risen above `d1`, `α` returns to `α_max` only after `theta` = 5 consecutive
//! rounds at `da ≤ d1` (keeping its value meanwhile), so one quiet round does not cause a
//! burst; a timeout (`TCP_CA_Loss`) computes ssthresh with the current `β`, restarts from the
//! minimum window and resets `α = 1`, `β = β_max`; slow start is Reno's; nothing changes while
//! recovering (Linux does not call `cong_avoid` then), but the samples still count; `base_rtt`
//! and `max_rtt` are never aged. A round ends once the data in flight when it began has been
//! acknowledged (Linux's `end_seq`); `α` and `β` are then recomputed from its samples.
//!
//! Reports instead of ACKs: a report carries the smallest and the latest RTT sample of its
//! ACKs, not their sum, so a round's average RTT is estimated as the mean of the two for each
//! report, weighted by the segments it acknowledges, and `max_rtt` is the largest latest
//! sample (the datapath would need a sum-of-RTTs register for Linux's exact average).
//! Avoidance adds one segment each time `α` × the acknowledged bytes add up to the window,
//! keeping the remainder (Linux, per ACK, drops the remainder when it grows, which matters
//! little there but would truncate `α` to an integer per report). The arithmetic is in
//! floating point rather than Linux's fixed point (α in 1/128, β in 1/64).
//!
//! **Taking over** a running flow (MCC §3.1.1): the inherited window stays, in congestion
//! avoidance (`ssthresh = cwnd`). Illinois' delay statistics restart — `max_rtt`, the round's
//! samples, the quiet-round count and the growth credit — with one exception: `base_rtt`
//! starts from the flow's minimum RTT, the propagation delay the agent has kept across the
//! handover. Restarting it too would make Illinois read a queue the previous algorithm built
//! as zero delay, and grow at α_max into it. With no history of its own, Illinois assumes
//! the delay has been high: α starts at Reno's 1 and β at β_max (Linux's initial values after
//! a timeout) and the first round, which closes at the first report, recomputes both; α
//! returns to α_max only after θ quiet rounds, as after any congested period.

use crate::{Algorithm, AlgorithmInfo, FlowState, Make, Measurement, Param, Params, WindowEvent};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "illinois",
    summary: "TCP Illinois: loss-triggered AIMD whose increase and decrease follow queueing delay",
    source: "Liu, Basar & Srikant, Performance Evaluation 2008; Linux net/ipv4/tcp_illinois.c",
    params: &[
        Param {
            name: "alpha_max",
            default: ALPHA_MAX,
            unit: "segments/RTT",
            help: "additive increase without queueing delay",
        },
        Param {
            name: "alpha_min",
            default: ALPHA_MIN,
            unit: "segments/RTT",
            help: "additive increase at the largest queueing delay",
        },
        Param {
            name: "beta_max",
            default: BETA_MAX,
            unit: "ratio",
            help: "decrease at high queueing delay (and after a timeout)",
        },
        Param {
            name: "beta_min",
            default: BETA_MIN,
            unit: "ratio",
            help: "decrease at low queueing delay",
        },
        Param {
            name: "win_thresh",
            default: WIN_THRESH_SEGMENTS,
            unit: "segments",
            help: "below this window: Reno (alpha 1, beta 1/2)",
        },
        Param {
            name: "theta",
            default: THETA_ROUNDS,
            unit: "RTTs",
            help: "quiet rounds before alpha returns to alpha_max",
        },
    ],
    make: Make::Simple(|p| Box::new(Illinois::new(IllinoisConfig::from_params(p)))),
};

/// Linux's `ALPHA_MIN` (0.3), `ALPHA_MAX` (10), `BETA_MIN` (1/8), `BETA_MAX` (1/2).
const ALPHA_MIN: f64 = 0.3;
const ALPHA_MAX: f64 = 10.0;
const BETA_MIN: f64 = 0.125;
const BETA_MAX: f64 = 0.5;
/// Reno's additive increase (`ALPHA_BASE`); β's base is `β_max` (`BETA_BASE = BETA_MAX`).
const ALPHA_BASE: f64 = 1.0;
/// Window below which Illinois is Reno, segments (`win_thresh`).
const WIN_THRESH_SEGMENTS: f64 = 15.0;
/// Quiet rounds before α returns to α_max (`theta`).
const THETA_ROUNDS: f64 = 5.0;
/// Accepted parameter ranges.
const ALPHA_RANGE: (f64, f64) = (0.01, 1000.0);
const BETA_RANGE: (f64, f64) = (0.0, 0.9);
/// Window after a timeout, in segments (`tcp_enter_loss` restarts from one).
const LOSS_WINDOW_SEGMENTS: u64 = 1;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IllinoisConfig {
    pub alpha_min: f64,
    pub alpha_max: f64,
    pub beta_min: f64,
    pub beta_max: f64,
    pub win_thresh_segments: u64,
    pub theta_rounds: u32,
}

impl Default for IllinoisConfig {
    fn default() -> Self {
        Self {
            alpha_min: ALPHA_MIN,
            alpha_max: ALPHA_MAX,
            beta_min: BETA_MIN,
            beta_max: BETA_MAX,
            win_thresh_segments: WIN_THRESH_SEGMENTS as u64,
            theta_rounds: THETA_ROUNDS as u32,
        }
    }
}

impl IllinoisConfig {
    /// From parameters, clamped to sane ranges and ordered (`min ≤ max`).
    pub fn from_params(p: &Params) -> Self {
        let alpha = |name| p.get(name).clamp(ALPHA_RANGE.0, ALPHA_RANGE.1);
        let beta = |name| p.get(name).clamp(BETA_RANGE.0, BETA_RANGE.1);
        let (alpha_min, alpha_max) = (alpha("alpha_min"), alpha("alpha_max"));
        let (beta_min, beta_max) = (beta("beta_min"), beta("beta_max"));
        Self {
            alpha_min: alpha_min.min(alpha_max),
            alpha_max: alpha_min.max(alpha_max),
            beta_min: beta_min.min(beta_max),
            beta_max: beta_min.max(beta_max),
            win_thresh_segments: p.get("win_thresh").max(0.0) as u64,
            theta_rounds: p.get("theta").clamp(0.0, 1000.0) as u32,
        }
    }

    /// Reno's α = 1, kept within the configured range.
    fn alpha_base(&self) -> f64 {
        ALPHA_BASE.clamp(self.alpha_min, self.alpha_max)
    }

    fn beta_base(&self) -> f64 {
        self.beta_max
    }
}

#[derive(Debug)]
pub struct Illinois {
    config: IllinoisConfig,
    alpha: f64,
    beta: f64,
    /// Smallest and largest RTT samples, µs (0: none yet).
    base_rtt_us: u64,
    max_rtt_us: u64,
    /// This round's RTT samples: weighted sum (µs × samples) and count.
    sum_rtt_us: f64,
    cnt_rtt: u64,
    /// Bytes acknowledged so far, and the total at which the current round ends.
    acked_total_bytes: u64,
    round_end_bytes: u64,
    /// The average delay has been above `d1` since α was last at α_max (`rtt_above`).
    rtt_above: bool,
    /// Consecutive rounds at low delay since then (`rtt_low`).
    rtt_low: u32,
    /// Avoidance credit: α × bytes acknowledged, spent one window per segment of growth.
    avoidance_credit_bytes: f64,
}

impl Default for Illinois {
    fn default() -> Self {
        Self::new(IllinoisConfig::default())
    }
}

impl Illinois {
    pub fn new(config: IllinoisConfig) -> Self {
        Self {
            config,
            alpha: config.alpha_max,
            beta: config.beta_base(),
            base_rtt_us: 0,
            max_rtt_us: 0,
            sum_rtt_us: 0.0,
            cnt_rtt: 0,
            acked_total_bytes: 0,
            round_end_bytes: 0,
            rtt_above: false,
            rtt_low: 0,
            avoidance_credit_bytes: 0.0,
        }
    }

    /// Linux's `pkts_acked`: the report's samples join the round's.
    fn on_rtt_samples(&mut self, state: &FlowState, m: &Measurement) {
        self.acked_total_bytes += m.acked_bytes;
        let min_us = if m.min_rtt_us > 0 {
            m.min_rtt_us
        } else {
            m.rtt_us
        };
        let latest_us = m.rtt_us.max(min_us);
        if m.acked_bytes == 0 || min_us == 0 {
            return;
        }
        if self.base_rtt_us == 0 || min_us < self.base_rtt_us {
            self.base_rtt_us = min_us;
        }
        self.max_rtt_us = self.max_rtt_us.max(latest_us);
        let samples = m.acked_bytes.div_ceil(state.mss_bytes);
        self.sum_rtt_us += (min_us + latest_us) as f64 / 2.0 * samples as f64;
        self.cnt_rtt += samples;
    }

    /// Linux's `rtt_reset`: a new round, ending once what is in flight now is acknowledged.
    fn start_round(&mut self, m: &Measurement) {
        self.round_end_bytes = self.acked_total_bytes + m.bytes_in_flight;
        self.sum_rtt_us = 0.0;
        self.cnt_rtt = 0;
    }

    /// Linux's `update_params`, at the first report past the end of a round.
    fn update_params(&mut self, cwnd_bytes: u64, state: &FlowState, m: &Measurement) {
        if self.acked_total_bytes < self.round_end_bytes {
            return;
        }
        if cwnd_bytes < self.config.win_thresh_segments * state.mss_bytes {
            self.alpha = self.config.alpha_base();
            self.beta = self.config.beta_base();
        } else if self.cnt_rtt > 0 {
            let dm = (self.max_rtt_us - self.base_rtt_us) as f64;
            let da = (self.sum_rtt_us / self.cnt_rtt as f64 - self.base_rtt_us as f64).max(0.0);
            self.alpha = self.next_alpha(da, dm);
            self.beta = self.beta_for(da, dm);
        }
        self.start_round(m);
    }

    /// α for an average queueing delay `da` and a largest one `dm`, µs.
    fn next_alpha(&mut self, da: f64, dm: f64) -> f64 {
        let c = self.config;
        let d1 = dm / 100.0;
        if da <= d1 {
            if !self.rtt_above {
                return c.alpha_max;
            }
            self.rtt_low += 1;
            if self.rtt_low < c.theta_rounds {
                return self.alpha;
            }
            self.rtt_low = 0;
            self.rtt_above = false;
            return c.alpha_max;
        }
        self.rtt_above = true;
        // κ1/(κ2 + da) through α_max at d1 and α_min at dm, rearranged as Linux does:
        // α = (dm − d1)·α_max / ((dm − d1) + (da − d1)·(α_max − α_min)/α_min).
        let (dm, da) = (dm - d1, da - d1);
        let denominator = dm + da * (c.alpha_max - c.alpha_min) / c.alpha_min;
        if denominator <= 0.0 {
            return c.alpha_min;
        }
        (dm * c.alpha_max / denominator).clamp(c.alpha_min, c.alpha_max)
    }

    /// β for an average queueing delay `da` and a largest one `dm`, µs.
    fn beta_for(&self, da: f64, dm: f64) -> f64 {
        let c = self.config;
        let (d2, d3) = (dm / 10.0, 8.0 * dm / 10.0);
        if da <= d2 {
            return c.beta_min;
        }
        if da >= d3 || d3 <= d2 {
            return c.beta_max;
        }
        let beta = (c.beta_min * d3 - c.beta_max * d2 + (c.beta_max - c.beta_min) * da) / (d3 - d2);
        beta.clamp(c.beta_min, c.beta_max)
    }

    /// `tcp_illinois_ssthresh`: the window less β of it, at least two segments.
    fn reduced_window(&self, state: &FlowState) -> u64 {
        let decrease = (state.cwnd_bytes as f64 * self.beta) as u64;
        (state.cwnd_bytes - decrease.min(state.cwnd_bytes)).max(state.min_cwnd_bytes())
    }

    /// α segments per window of data acknowledged.
    fn congestion_avoidance(&mut self, state: &mut FlowState, acked_bytes: u64) {
        self.avoidance_credit_bytes += acked_bytes as f64 * self.alpha;
        while self.avoidance_credit_bytes >= state.cwnd_bytes as f64 {
            self.avoidance_credit_bytes -= state.cwnd_bytes as f64;
            state.cwnd_bytes += state.mss_bytes;
        }
    }
}

impl Algorithm for Illinois {
    fn name(&self) -> &str {
        INFO.name
    }

    fn window_on_loss(&self, state: &FlowState) -> Option<u64> {
        (!state.in_recovery()).then(|| self.reduced_window(state))
    }

    fn take_over(&mut self, state: &mut FlowState) {
        *self = Self::new(self.config);
        self.alpha = self.config.alpha_base();
        self.beta = self.config.beta_base();
        self.rtt_above = true;
        self.base_rtt_us = state.min_rtt_us;
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        self.on_rtt_samples(state, m);
        let cwnd_before = state.cwnd_bytes;
        match state.classify(m) {
            WindowEvent::Timeout => {
                // tcp_enter_loss: ssthresh with the current β, then the Loss state resets.
                state.ssthresh_bytes = self.reduced_window(state);
                state.cwnd_bytes =
                    (LOSS_WINDOW_SEGMENTS * state.mss_bytes).max(state.min_cwnd_bytes());
                self.alpha = self.config.alpha_base();
                self.beta = self.config.beta_base();
                self.rtt_low = 0;
                self.rtt_above = false;
                self.avoidance_credit_bytes = 0.0;
                self.start_round(m);
            }
            WindowEvent::CongestionEvent { .. } => {
                state.ssthresh_bytes = self.reduced_window(state);
                state.cwnd_bytes = state.ssthresh_bytes;
                self.avoidance_credit_bytes = 0.0;
            }
            WindowEvent::Hold if state.in_recovery() => {}
            WindowEvent::Hold => self.update_params(cwnd_before, state, m),
            WindowEvent::Avoidance { acked_bytes } => {
                self.update_params(cwnd_before, state, m);
                self.congestion_avoidance(state, acked_bytes);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSender, Link, TEST_MSS_BYTES};

    const MSS: u64 = TEST_MSS_BYTES as u64;

    impl Illinois {
        fn alpha(&self) -> f64 {
            self.alpha
        }

        fn beta(&self) -> f64 {
            self.beta
        }
    }

    /// Illinois driven directly, so its α and β can be read.
    struct IllinoisFlow {
        alg: Illinois,
        state: FlowState,
        now_us: u64,
    }

    impl IllinoisFlow {
        fn new(config: IllinoisConfig, cwnd_segments: u64) -> Self {
            let state = FlowState::new(TEST_MSS_BYTES, (cwnd_segments * MSS) as u32);
            Self {
                alg: Illinois::new(config),
                state,
                now_us: 0,
            }
        }

        fn report(
            &mut self,
            acked_bytes: u64,
            min_rtt_ms: f64,
            rtt_ms: f64,
            lost: u64,
            timeout: bool,
        ) {
            let m = Measurement {
                now_us: self.now_us,
                acked_bytes,
                lost_packets: lost,
                timeout,
                rtt_us: (rtt_ms * 1000.0) as u64,
                min_rtt_us: (min_rtt_ms * 1000.0) as u64,
                bytes_in_flight: self.state.cwnd_bytes,
                ..Default::default()
            };
            self.state.observe(&m);
            self.alg.on_report(&mut self.state, &m);
        }

        /// One RTT whose samples range from `min_rtt_ms` to `rtt_ms`, the window acknowledged.
        fn round(&mut self, min_rtt_ms: f64, rtt_ms: f64) {
            self.now_us += (rtt_ms * 1000.0) as u64;
            self.report(self.state.cwnd_bytes, min_rtt_ms, rtt_ms, 0, false);
        }

        fn lose(&mut self) {
            self.report(0, 0.0, 0.0, 1, false);
        }

        /// Out of slow start (a loss) and out of recovery, at a constant `rtt_ms`.
        fn reach_avoidance(&mut self, rtt_ms: f64) {
            self.round(rtt_ms, rtt_ms);
            self.lose();
            while self.state.in_recovery() || self.state.in_slow_start() {
                self.round(rtt_ms, rtt_ms);
            }
        }

        fn cwnd_segments(&self) -> f64 {
            self.state.cwnd_bytes as f64 / MSS as f64
        }
    }

    /// xorshift64*: deterministic pseudo-random numbers for the tests.
    struct XorShift64Star(u64);

    impl XorShift64Star {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn uniform(&mut self) -> f64 {
            (self.next() >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    fn assert_in_range(flow: &IllinoisFlow, step: usize) {
        let (a, b, c) = (flow.alg.alpha(), flow.alg.beta(), flow.alg.config);
        assert!(
            (c.alpha_min..=c.alpha_max).contains(&a),
            "step {step}: α = {a}"
        );
        assert!(
            (c.beta_min..=c.beta_max).contains(&b),
            "step {step}: β = {b}"
        );
        assert!(
            flow.state.cwnd_bytes >= 2 * MSS,
            "step {step}: window below 2 segments"
        );
    }

    /// A flow another algorithm ran to `cwnd_segments` on a path of `base_ms` propagation
    /// delay, handed to Illinois.
    fn taken_over(cwnd_segments: u64, base_ms: f64) -> IllinoisFlow {
        let mut flow = IllinoisFlow::new(IllinoisConfig::default(), cwnd_segments);
        flow.state.observe(&Measurement {
            rtt_us: (base_ms * 1000.0) as u64,
            ..Default::default()
        });
        flow.state.prepare_handover();
        flow.alg.take_over(&mut flow.state);
        flow
    }

    #[test]
    fn take_over_measures_an_inherited_queue_against_the_flows_base_rtt() {
        // The previous algorithm left a standing queue: 50 ms path, 100 ms RTT.
        let mut flow = taken_over(100, 50.0);
        assert!(!flow.state.in_slow_start());
        flow.round(100.0, 100.0);
        let c = flow.alg.config;
        assert!(
            (flow.alg.alpha() - c.alpha_min).abs() < 1e-9,
            "the queue is the largest delay seen: α = {}",
            flow.alg.alpha()
        );
        assert_eq!(flow.alg.beta(), c.beta_max);
        let before = flow.cwnd_segments();
        for _ in 0..5 {
            flow.round(100.0, 100.0);
        }
        assert!(flow.cwnd_segments() - before <= 2.0, "α_min: about 0.3 segments per RTT");
        flow.lose();
        assert!((flow.cwnd_segments() - before.round() / 2.0).abs() <= 2.0, "β_max halves");
    }

    #[test]
    fn take_over_returns_to_alpha_max_after_theta_quiet_rounds() {
        let mut flow = taken_over(100, 50.0);
        let c = flow.alg.config;
        for round in 1..c.theta_rounds {
            flow.round(50.0, 50.0);
            assert_eq!(flow.alg.alpha(), c.alpha_base(), "round {round}: Reno's α");
            assert_eq!(flow.alg.beta(), c.beta_min, "no queueing delay: β_min");
        }
        flow.round(50.0, 50.0);
        assert_eq!(flow.alg.alpha(), c.alpha_max);
    }

    #[test]
    fn alpha_and_beta_stay_in_range_over_random_sequences() {
        let custom = IllinoisConfig {
            alpha_min: 0.5,
            alpha_max: 4.0,
            beta_min: 0.2,
            beta_max: 0.4,
            ..Default::default()
        };
        for (seed, config) in [
            (1, IllinoisConfig::default()),
            (7, IllinoisConfig::default()),
            (42, custom),
        ] {
            let mut rng = XorShift64Star(0x9E37_79B9_7F4A_7C15 ^ seed);
            let mut flow = IllinoisFlow::new(config, 10);
            let (mut seen_low_alpha, mut seen_high_beta) = (false, false);
            for step in 0..5000 {
                let base = 20.0 + 10.0 * rng.uniform();
                let queue = 200.0 * rng.uniform() * rng.uniform();
                let spread = queue * rng.uniform();
                match rng.next() % 100 {
                    0..=79 => flow.round(base + queue - spread, base + queue),
                    80..=89 => {
                        let acked = rng.next() % (flow.state.cwnd_bytes + 1);
                        flow.now_us += 1000;
                        flow.report(acked, base + queue - spread, base + queue, 0, false);
                    }
                    90..=97 => flow.lose(),
                    _ => flow.report(0, 0.0, 0.0, 0, true),
                }
                assert_in_range(&flow, step);
                seen_low_alpha |= flow.alg.alpha() < 1.0;
                seen_high_beta |= flow.alg.beta() > (config.beta_min + config.beta_max) / 2.0;
                if flow.state.cwnd_bytes > 100_000 * MSS {
                    flow.report(0, 0.0, 0.0, 0, true); // keep the window bounded
                }
            }
            assert!(
                seen_low_alpha && seen_high_beta,
                "the sequence reached the delay-driven range"
            );
        }
    }

    #[test]
    fn without_queueing_delay_alpha_max_and_beta_min() {
        let mut flow = IllinoisFlow::new(IllinoisConfig::default(), 100);
        flow.reach_avoidance(50.0);
        assert_eq!(flow.alg.alpha(), ALPHA_MAX);
        assert_eq!(flow.alg.beta(), BETA_MIN);
        // About ten segments per RTT (a little less as the window grows within the round).
        let start = flow.cwnd_segments();
        for _ in 0..10 {
            flow.round(50.0, 50.0);
        }
        let per_rtt = (flow.cwnd_segments() - start) / 10.0;
        assert!(
            (9.5..=10.0).contains(&per_rtt),
            "{per_rtt:.2} segments per RTT"
        );
        // A loss now costs 1/8 of the window.
        let cwnd = flow.state.cwnd_bytes;
        flow.lose();
        assert_eq!(
            flow.state.cwnd_bytes,
            cwnd - (cwnd as f64 * BETA_MIN) as u64
        );
    }

    #[test]
    fn at_the_largest_delay_alpha_min_and_beta_max() {
        let mut flow = IllinoisFlow::new(IllinoisConfig::default(), 100);
        flow.reach_avoidance(50.0);
        flow.round(150.0, 150.0); // dm = 100 ms, da = 100 ms
        assert!(
            (flow.alg.alpha() - ALPHA_MIN).abs() < 1e-9,
            "α = {}",
            flow.alg.alpha()
        );
        assert_eq!(flow.alg.beta(), BETA_MAX);
        // 0.3 segments per RTT.
        let start = flow.cwnd_segments();
        for _ in 0..20 {
            flow.round(150.0, 150.0);
        }
        assert_eq!(flow.cwnd_segments() - start, 6.0);
        let cwnd = flow.state.cwnd_bytes;
        flow.lose();
        assert_eq!(
            flow.state.cwnd_bytes,
            cwnd - cwnd / 2,
            "a loss halves the window"
        );
    }

    #[test]
    fn alpha_and_beta_between_follow_the_curves() {
        let config = IllinoisConfig::default();
        // base 50 ms, max 150 ms: dm = 100 ms, d1 = 1, d2 = 10, d3 = 80 ms.
        let dm = 100.0;
        let d1 = dm / 100.0;
        // The paper's form: κ1 = (dm − d1)·α_min·α_max/(α_max − α_min), κ2 = κ1/α_max − d1.
        let k1 = (dm - d1) * ALPHA_MIN * ALPHA_MAX / (ALPHA_MAX - ALPHA_MIN);
        let k2 = (dm - d1) * ALPHA_MIN / (ALPHA_MAX - ALPHA_MIN) - d1;
        for da in [2.0, 5.0, 10.0, 30.0, 45.0, 70.0, 90.0] {
            let mut flow = IllinoisFlow::new(config, 100);
            flow.reach_avoidance(50.0);
            flow.round(150.0, 150.0);
            flow.round(50.0 + da, 50.0 + da);
            let want_alpha = k1 / (k2 + da);
            assert!(
                (flow.alg.alpha() - want_alpha).abs() < 1e-9,
                "da {da}: α {} want {want_alpha}",
                flow.alg.alpha()
            );
            let want_beta = if da <= 10.0 {
                BETA_MIN
            } else if da >= 80.0 {
                BETA_MAX
            } else {
                BETA_MIN + (BETA_MAX - BETA_MIN) * (da - 10.0) / 70.0
            };
            assert!(
                (flow.alg.beta() - want_beta).abs() < 1e-9,
                "da {da}: β {} want {want_beta}",
                flow.alg.beta()
            );
        }
    }

    #[test]
    fn average_delay_uses_the_spread_of_samples() {
        // Samples from 50 to 150 ms in the round: average 100 ms, da = 50 of dm = 100 ms.
        let mut flow = IllinoisFlow::new(IllinoisConfig::default(), 100);
        flow.reach_avoidance(50.0);
        flow.round(50.0, 150.0);
        let want = BETA_MIN + (BETA_MAX - BETA_MIN) * (50.0 - 10.0) / 70.0;
        assert!((flow.alg.beta() - want).abs() < 1e-9);
    }

    #[test]
    fn alpha_returns_to_max_after_theta_quiet_rounds() {
        let mut flow = IllinoisFlow::new(IllinoisConfig::default(), 100);
        flow.reach_avoidance(50.0);
        flow.round(150.0, 150.0);
        let low = flow.alg.alpha();
        assert!(low < 0.31);
        for quiet in 1..5 {
            flow.round(50.0, 50.0);
            assert_eq!(flow.alg.alpha(), low, "quiet round {quiet}: α kept");
            assert_eq!(flow.alg.beta(), BETA_MIN, "β follows the delay at once");
        }
        flow.round(50.0, 50.0);
        assert_eq!(flow.alg.alpha(), ALPHA_MAX, "after theta = 5 quiet rounds");
        // A spec's theta is honoured.
        let mut flow = IllinoisFlow::new(
            IllinoisConfig {
                theta_rounds: 2,
                ..Default::default()
            },
            100,
        );
        flow.reach_avoidance(50.0);
        flow.round(150.0, 150.0);
        flow.round(50.0, 50.0);
        assert!(flow.alg.alpha() < 0.31);
        flow.round(50.0, 50.0);
        assert_eq!(flow.alg.alpha(), ALPHA_MAX);
    }

    #[test]
    fn small_windows_are_reno() {
        let mut flow = IllinoisFlow::new(IllinoisConfig::default(), 4);
        flow.round(50.0, 50.0); // 4 → 8 in slow start
        assert_eq!((flow.alg.alpha(), flow.alg.beta()), (1.0, 0.5));
        flow.lose();
        assert_eq!(flow.cwnd_segments(), 4.0, "halved as Reno");
        flow.round(50.0, 50.0);
        flow.round(50.0, 50.0); // recovery ends: its ACKs are no growth credit
        assert_eq!(flow.cwnd_segments(), 4.0);
        flow.round(50.0, 50.0);
        flow.round(50.0, 50.0);
        assert_eq!(
            flow.cwnd_segments(),
            6.0,
            "one segment per RTT once recovered"
        );
    }

    #[test]
    fn timeout_uses_current_beta_then_resets() {
        let mut flow = IllinoisFlow::new(IllinoisConfig::default(), 100);
        flow.reach_avoidance(50.0);
        assert_eq!(flow.alg.beta(), BETA_MIN);
        let cwnd = flow.state.cwnd_bytes;
        flow.report(0, 0.0, 0.0, 0, true);
        assert_eq!(
            flow.state.ssthresh_bytes,
            cwnd - (cwnd as f64 * BETA_MIN) as u64
        );
        assert_eq!(flow.cwnd_segments(), 2.0);
        assert_eq!((flow.alg.alpha(), flow.alg.beta()), (1.0, BETA_MAX));
    }

    #[test]
    fn params_set_the_ranges() {
        let mut s = FakeSender::new(
            crate::simple("illinois:alpha_max=4,beta_min=0.25").unwrap(),
            100,
            50,
        );
        s.ack_round(); // constant RTT: α = α_max, β = β_min
        s.lose(1);
        assert_eq!(s.cwnd_segments(), 150.0, "200 less a quarter");
        s.ack_round();
        s.ack_round(); // recovery ends
        let start = s.cwnd_segments();
        for _ in 0..10 {
            s.ack_round();
        }
        let per_rtt = (s.cwnd_segments() - start) / 10.0;
        assert!(
            (3.8..=4.0).contains(&per_rtt),
            "{per_rtt:.2} segments per RTT"
        );
    }

    fn link(mbit_per_s: u64, rtt_ms: u64, buffer_bdps: f64) -> Link {
        let l = Link::new(mbit_per_s, rtt_ms, 0);
        Link {
            buffer_bytes: (l.bdp_bytes() as f64 * buffer_bdps) as u64,
            ..l
        }
    }

    /// Mean utilisation of `link` over rounds `from..to`, with a random loss after every
    /// `loss_every`-th round if given; also the reductions seen on the link's own drops.
    fn run(
        spec: &str,
        link: &Link,
        from: usize,
        to: usize,
        loss_every: Option<usize>,
    ) -> (f64, Vec<f64>) {
        let mut s = FakeSender::new(crate::simple(spec).unwrap(), 10, link.base_rtt_us / 1000);
        let (mut delivered, mut elapsed_us, mut reductions) = (0u64, 0u64, Vec::new());
        for i in 1..=to {
            let before = s.state.cwnd_bytes;
            let r = s.round_on_link(link);
            if r.lost_packets > 0 && s.state.cwnd_bytes < before && i > from {
                reductions.push(s.state.cwnd_bytes as f64 / before as f64);
            }
            if i > from {
                let queued = r.sent_bytes.saturating_sub(link.bdp_bytes());
                delivered += r.sent_bytes - queued.saturating_sub(link.buffer_bytes);
                elapsed_us += r.rtt_us;
            }
            if loss_every.is_some_and(|n| i.is_multiple_of(n)) {
                s.lose(1);
            }
        }
        let u = delivered as f64 * 1e6 / elapsed_us as f64 / link.bandwidth_bytes_per_s as f64;
        (u, reductions)
    }

    #[test]
    fn fills_a_one_bdp_buffered_link_and_halves_on_overflow() {
        let l = link(24, 50, 1.0);
        let (u, reductions) = run("illinois", &l, 100, 600, None);
        assert!(u >= 0.8, "utilisation {u:.2}");
        // Overflow losses come with a full queue: β near β_max.
        assert!(!reductions.is_empty());
        for r in reductions {
            assert!((0.5..=0.6).contains(&r), "window kept {r:.2} on overflow");
        }
    }

    #[test]
    fn random_losses_cost_less_than_with_reno() {
        // A random loss every 10 RTTs on a 24 Mbit/s, 20 ms path: without a queue β = 1/8.
        let l = link(24, 20, 1.0);
        let (illinois, _) = run("illinois", &l, 50, 500, Some(10));
        let (reno, _) = run("reno", &l, 50, 500, Some(10));
        assert!(illinois >= 0.85, "Illinois utilisation {illinois:.2}");
        assert!(
            illinois > reno + 0.15,
            "Illinois {illinois:.2} vs Reno {reno:.2}"
        );
    }
}
