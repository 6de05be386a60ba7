//! BBR for window-only datapaths, after "BBR in Mystique" (Zhang et al., Mystique: a
//! fine-grained and transparent congestion control enforcement scheme; its Algorithm 3).
//!
//! Mystique enforces congestion control from outside the sender (through the receive window),
//! so it can cap the window but cannot pace. Its BBR keeps BBR's path model — the maximum
//! delivery rate `max_bw` and the minimum RTT `min_rtt` — and sets only the window:
//!
//! `cwnd = gain × max_bw × min_rtt`  (at least 4 segments; pacing is never set).
//!
//! Instead of BBR's windowed filters, both estimates are plain running max/min that are
//! *recalibrated* every `period`; `t_step` and `bw_step` drive the probing for more bandwidth.
//! The design, mode by mode:
//!
//! - **Startup**: the window grows by the bytes acknowledged (doubling per round) up to
//!   `2/ln 2 × max_bw × min_rtt`, until `max_bw` has not grown by 25% for 3 rounds (BBR's
//!   full-pipe test; a round is a `min_rtt` of reports). Then the first recalibration.
//! - **Recalibration** (at the end of startup, then every `period` ms, start to start): both
//!   filters are forgotten. `max_bw` restarts from the present report's rate; `min_rtt` from
//!   the samples that follow. Since a window-only sender keeps any queue it has built, and
//!   that queue would inflate the new `min_rtt` (the window, and with it the queue, would then
//!   grow every period), the window is first held at half the old model BDP
//!   (`0.5 × max_bw × min_rtt`) until a report shows the data in flight down to that and one
//!   more old `min_rtt` has passed, so that the RTT of data sent into the emptied queue is
//!   seen (at most 4 RTTs). Then a probe re-measures the bandwidth at once.
//! - **Cruise**: `cwnd = gain × max_bw × min_rtt`; every `t_step` ms a probe starts.
//! - **Probe**: the window is raised to `(1 + bw_step) × gain × max_bw × min_rtt` for two
//!   smoothed RTTs (the extra data takes one RTT to be acknowledged, the next RTT shows the
//!   delivery rate it yields). Rate samples above `max_bw` enter the filter as they come, so a
//!   probe that finds bandwidth keeps it: the window follows the larger `max_bw`. If by the end
//!   the delivery rate rose by at least half a step (`max_bw ≥ (1 + bw_step/2) × max_bw` at the
//!   probe's start), the path had spare capacity and the next probe follows immediately;
//!   otherwise the flow backs off to the cruise window and probes again `t_step` ms later.
//!   With `bw_step = 0.25` a doubled bandwidth is found in about 4 probes (8 RTTs).
//!
//! A lower bandwidth is only learned at the next recalibration (the max never decays in
//! between), a longer propagation delay likewise. Losses are not a signal (as in BBR); a
//! retransmission timeout holds the window at 4 segments until the next report without one,
//! which restores it. The algorithm asks for reports every `report_ms` (Mystique's
//! `setPeriod`) rather than once per RTT.
//!
//! **Taking over** a running flow (MCC §3.1.1): this BBR cannot pace, so inheriting the rate
//! means inheriting it as a window. The model is seeded from the flow — `max_bw` = window /
//! recent RTT ([`FlowState::handover_rate_bytes_per_s`]), `min_rtt` = the flow's minimum RTT —
//! and the flow cruises at once (no startup burst), with the first probe `t_step` and the
//! first recalibration `period` after the handover. The cruise window `gain × max_bw × min_rtt`
//! is the inherited window less the queue the predecessor kept (`cwnd × min_rtt / srtt`): the
//! same delivery rate, the standing queue drained. It is never above the inherited window.
//! Before any RTT sample there is nothing to inherit, and the flow starts afresh in Startup.

use std::f64::consts::LN_2;

use crate::{Algorithm, AlgorithmInfo, FlowState, Make, Measurement, Param, Params, Reporting};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "mystique-bbr",
    summary: "BBR for window-only datapaths: cwnd = gain x max_bw x min_rtt, probes by steps, periodic recalibration, no pacing",
    source: "Zhang et al., Mystique: a fine-grained and transparent congestion control enforcement \
             scheme, Algorithm 3 (BBR in Mystique); BBR: Cardwell et al., ACM Queue 2016",
    params: &[
        Param { name: "gain", default: 1.0, unit: "ratio", help: "window as a multiple of max_bw x min_rtt" },
        Param { name: "period", default: 5000.0, unit: "ms", help: "max_bw and min_rtt are re-measured this often" },
        Param { name: "t_step", default: 1000.0, unit: "ms", help: "time between bandwidth probes" },
        Param { name: "bw_step", default: 0.25, unit: "ratio", help: "a probe raises the window by this fraction" },
        Param { name: "report_ms", default: 10.0, unit: "ms", help: "report period asked of the datapath (setPeriod)" },
    ],
    make: Make::Simple(|p| Box::new(MystiqueBbr::new(MystiqueBbrConfig::from_params(p)))),
};

/// Startup window gain, 2/ln 2 (as BBR's startup).
const STARTUP_GAIN: f64 = 2.0 / LN_2;
/// Startup goes on while the bandwidth grows by this factor per round...
const FULL_BW_GROWTH: f64 = 1.25;
/// ... and ends after this many rounds without such growth.
const FULL_BW_ROUNDS: u32 = 3;
/// Window while recalibrating, as a fraction of the old model BDP: below any real BDP, so
/// the queue empties.
const DRAIN_GAIN: f64 = 0.5;
/// Recalibration gives up waiting for in flight to drop after this many RTTs.
const DRAIN_MAX_RTTS: u64 = 4;
/// A probe lasts this many smoothed RTTs.
const PROBE_RTTS: u64 = 2;
/// A probe found bandwidth if the rate rose by this fraction of `bw_step`.
const PROBE_SUCCESS_FRACTION: f64 = 0.5;
/// Smallest window, segments (as BBR).
const MIN_CWND_SEGMENTS: u64 = 4;

#[derive(Clone, Copy, Debug)]
struct MystiqueBbrConfig {
    gain: f64,
    period_us: u64,
    t_step_us: u64,
    bw_step: f64,
    report_us: u64,
}

impl MystiqueBbrConfig {
    fn from_params(p: &Params) -> Self {
        Self {
            gain: p.get("gain").max(0.1),
            period_us: (p.get("period").max(1.0) * 1e3) as u64,
            t_step_us: (p.get("t_step").max(0.0) * 1e3) as u64,
            bw_step: p.get("bw_step").max(0.0),
            report_us: (p.get("report_ms").max(0.1) * 1e3) as u64,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    Startup,
    /// Recalibrating: the window is held at `window` until in flight has drained to it
    /// (`drained_us`) and an old `min_rtt` more has passed.
    Drain {
        started_us: u64,
        window: u64,
        old_min_rtt_us: u64,
        drained_us: Option<u64>,
    },
    Cruise,
    Probe {
        started_us: u64,
        base_bw: u64,
    },
}

#[derive(Debug)]
pub struct MystiqueBbr {
    cfg: MystiqueBbrConfig,
    phase: Phase,
    /// Largest delivery rate since the last recalibration, bytes/s.
    max_bw: u64,
    /// Smallest RTT since the last recalibration, µs (0: none).
    min_rtt_us: u64,
    /// Start of the current measurement period, µs.
    period_start_us: u64,
    next_probe_us: u64,
    /// Startup's rounds and plateau detection.
    round_start_us: Option<u64>,
    full_bw: u64,
    full_bw_count: u32,
    cwnd_before_timeout: Option<u64>,
}

impl Default for MystiqueBbr {
    fn default() -> Self {
        Self::new(MystiqueBbrConfig::from_params(&Params::defaults(INFO.params)))
    }
}

impl MystiqueBbr {
    fn new(cfg: MystiqueBbrConfig) -> Self {
        Self {
            cfg,
            phase: Phase::Startup,
            max_bw: 0,
            min_rtt_us: 0,
            period_start_us: 0,
            next_probe_us: 0,
            round_start_us: None,
            full_bw: 0,
            full_bw_count: 0,
            cwnd_before_timeout: None,
        }
    }

    fn observe(&mut self, m: &Measurement) {
        let rtt = if m.min_rtt_us > 0 {
            m.min_rtt_us
        } else {
            m.rtt_us
        };
        if rtt > 0 && (self.min_rtt_us == 0 || rtt < self.min_rtt_us) {
            self.min_rtt_us = rtt;
        }
        self.max_bw = self.max_bw.max(m.delivery_rate_bytes_per_s);
    }

    /// `gain × max_bw × min_rtt`, bytes; `None` while the model lacks a sample.
    fn bdp_bytes(&self, gain: f64) -> Option<u64> {
        if self.max_bw == 0 || self.min_rtt_us == 0 {
            return None;
        }
        Some((gain * self.max_bw as f64 * self.min_rtt_us as f64 / 1e6) as u64)
    }

    fn cruise_window(&self, state: &FlowState) -> u64 {
        self.bdp_bytes(self.cfg.gain).unwrap_or(state.cwnd_bytes)
    }

    fn probe_window(&self, state: &FlowState) -> u64 {
        self.bdp_bytes(self.cfg.gain * (1.0 + self.cfg.bw_step))
            .unwrap_or(state.cwnd_bytes)
    }

    fn startup(&mut self, state: &mut FlowState, m: &Measurement) {
        let now = state.now_us;
        let round_ends = match self.round_start_us {
            None => true,
            Some(start) => now > start && now - start >= self.min_rtt_us,
        };
        if round_ends {
            self.round_start_us = Some(now);
            if self.max_bw as f64 >= self.full_bw as f64 * FULL_BW_GROWTH {
                self.full_bw = self.max_bw;
                self.full_bw_count = 0;
            } else {
                self.full_bw_count += 1;
                if self.full_bw_count >= FULL_BW_ROUNDS {
                    self.start_recalibration(state, m);
                    return;
                }
            }
        }
        let below_target = self
            .bdp_bytes(STARTUP_GAIN)
            .is_none_or(|t| state.cwnd_bytes < t);
        if below_target {
            state.cwnd_bytes += m.acked_bytes;
        }
    }

    fn start_recalibration(&mut self, state: &mut FlowState, m: &Measurement) {
        let now = state.now_us;
        let window = self.bdp_bytes(DRAIN_GAIN).unwrap_or(state.cwnd_bytes / 2);
        self.phase = Phase::Drain {
            started_us: now,
            window,
            old_min_rtt_us: if self.min_rtt_us > 0 {
                self.min_rtt_us
            } else {
                state.srtt_us
            },
            drained_us: None,
        };
        self.period_start_us = now;
        self.min_rtt_us = 0;
        if m.delivery_rate_bytes_per_s > 0 {
            self.max_bw = m.delivery_rate_bytes_per_s;
        }
        state.cwnd_bytes = window;
    }

    fn drain(&mut self, state: &mut FlowState, m: &Measurement) {
        let now = state.now_us;
        let Phase::Drain {
            started_us,
            window,
            old_min_rtt_us,
            mut drained_us,
        } = self.phase
        else {
            return;
        };
        if drained_us.is_none() && m.bytes_in_flight <= window {
            drained_us = Some(now);
        }
        self.phase = Phase::Drain {
            started_us,
            window,
            old_min_rtt_us,
            drained_us,
        };
        let rtt = old_min_rtt_us.max(state.srtt_us);
        let done = drained_us.is_some_and(|t| now >= t + old_min_rtt_us)
            || now >= started_us + DRAIN_MAX_RTTS * rtt;
        if !done {
            state.cwnd_bytes = window;
            return;
        }
        if self.min_rtt_us == 0 {
            self.min_rtt_us = old_min_rtt_us;
        }
        self.start_probe(state);
    }

    fn start_probe(&mut self, state: &mut FlowState) {
        self.phase = Phase::Probe {
            started_us: state.now_us,
            base_bw: self.max_bw,
        };
        state.cwnd_bytes = self.probe_window(state);
    }

    fn probe(&mut self, state: &mut FlowState) {
        let Phase::Probe {
            started_us,
            base_bw,
        } = self.phase
        else {
            return;
        };
        let length = PROBE_RTTS * state.srtt_us.max(self.min_rtt_us);
        if state.now_us < started_us + length {
            state.cwnd_bytes = self.probe_window(state);
            return;
        }
        let threshold = base_bw as f64 * (1.0 + PROBE_SUCCESS_FRACTION * self.cfg.bw_step);
        if self.cfg.bw_step > 0.0 && self.max_bw as f64 >= threshold {
            self.start_probe(state);
        } else {
            self.phase = Phase::Cruise;
            self.next_probe_us = state.now_us + self.cfg.t_step_us;
            state.cwnd_bytes = self.cruise_window(state);
        }
    }
}

impl Algorithm for MystiqueBbr {
    fn name(&self) -> &str {
        INFO.name
    }

    fn take_over(&mut self, state: &mut FlowState) {
        *self = Self::new(self.cfg);
        let Some(rate) = state.handover_rate_bytes_per_s() else {
            return;
        };
        let now = state.now_us;
        self.max_bw = rate;
        self.min_rtt_us = state.min_rtt_us;
        self.period_start_us = now;
        self.next_probe_us = now + self.cfg.t_step_us;
        self.phase = Phase::Cruise;
        let min_cwnd = MIN_CWND_SEGMENTS * state.mss_bytes;
        state.cwnd_bytes = self.cruise_window(state).min(state.cwnd_bytes).max(min_cwnd);
    }

    fn reporting(&self) -> Reporting {
        Reporting::EveryMicros(self.cfg.report_us)
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        let min_cwnd = MIN_CWND_SEGMENTS * state.mss_bytes;
        if m.timeout {
            self.cwnd_before_timeout.get_or_insert(state.cwnd_bytes);
            state.cwnd_bytes = min_cwnd;
            self.full_bw = 0;
            return;
        }
        if let Some(saved) = self.cwnd_before_timeout.take() {
            state.cwnd_bytes = state.cwnd_bytes.max(saved);
        }
        self.observe(m);
        let now = state.now_us;
        let period_over = now >= self.period_start_us + self.cfg.period_us;
        match self.phase {
            Phase::Startup => self.startup(state, m),
            Phase::Drain { .. } => self.drain(state, m),
            Phase::Cruise | Phase::Probe { .. } if period_over => {
                self.start_recalibration(state, m)
            }
            Phase::Cruise if now >= self.next_probe_us => self.start_probe(state),
            Phase::Cruise => state.cwnd_bytes = self.cruise_window(state),
            Phase::Probe { .. } => self.probe(state),
        }
        state.cwnd_bytes = state.cwnd_bytes.max(min_cwnd);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::testing::{FakeSender, Link, LinkRound};

    /// Lets a test look inside the algorithm a [`FakeSender`] drives.
    struct SharedMystiqueBbr(Arc<Mutex<MystiqueBbr>>);

    impl Algorithm for SharedMystiqueBbr {
        fn name(&self) -> &str {
            INFO.name
        }
        fn reporting(&self) -> Reporting {
            self.0.lock().unwrap().reporting()
        }
        fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
            self.0.lock().unwrap().on_report(state, m);
        }
        fn take_over(&mut self, state: &mut FlowState) {
            self.0.lock().unwrap().take_over(state);
        }
    }

    fn sender(spec: &str, rtt_ms: u64) -> (FakeSender, Arc<Mutex<MystiqueBbr>>) {
        let p = Params::parse(&INFO, spec).unwrap();
        let shared = Arc::new(Mutex::new(MystiqueBbr::new(MystiqueBbrConfig::from_params(&p))));
        let s = FakeSender::new(Box::new(SharedMystiqueBbr(shared.clone())), 10, rtt_ms);
        (s, shared)
    }

    const BW: u64 = 3_000_000; // 24 Mbit/s
    const BDP: u64 = BW / 20; // at 50 ms: 150 000 bytes

    fn phase(b: &Arc<Mutex<MystiqueBbr>>) -> Phase {
        b.lock().unwrap().phase
    }

    fn delivered(link: &Link, r: &LinkRound) -> u64 {
        r.sent_bytes.min(link.bdp_bytes() + link.buffer_bytes)
    }

    /// Runs rounds on `link` for `ms` of link time; returns the utilisation.
    fn run_ms(
        s: &mut FakeSender,
        link: &Link,
        ms: u64,
        mut between: impl FnMut(&mut FakeSender),
    ) -> f64 {
        let (mut bytes, mut time_us) = (0u64, 0u64);
        while time_us < ms * 1000 {
            let r = s.round_on_link(link);
            assert_eq!(s.state.pacing_rate_bytes_per_s, None, "never paces");
            bytes += delivered(link, &r);
            time_us += r.rtt_us;
            between(s);
        }
        bytes as f64 / (link.bandwidth_bytes_per_s as f64 * time_us as f64 / 1e6)
    }

    /// Runs until the flow cruises (after any probe), at most `ms` of link time.
    fn until_cruise(s: &mut FakeSender, b: &Arc<Mutex<MystiqueBbr>>, link: &Link, ms: u64) -> u64 {
        let start = s.now_us;
        while phase(b) != Phase::Cruise {
            s.round_on_link(link);
            assert!(
                s.now_us - start <= ms * 1000,
                "no cruise within {ms} ms: {:?}",
                phase(b)
            );
        }
        s.now_us - start
    }

    fn near(x: u64, target: u64, tolerance: f64) -> bool {
        (x as f64 - target as f64).abs() <= tolerance * target as f64
    }

    /// Reno ran the flow at `segments` in avoidance at RTT `rtt_ms` on a 50 ms path; then
    /// this BBR takes over.
    fn taken_over(segments: u32, rtt_ms: u64) -> (FakeSender, Arc<Mutex<MystiqueBbr>>) {
        let mut s = FakeSender::new(crate::simple("reno").unwrap(), segments, 50);
        s.ack_segments(0);
        s.set_rtt_ms(rtt_ms);
        for _ in 0..100 {
            s.ack_segments(0); // the smoothed RTT settles at rtt_ms
        }
        s.state.ssthresh_bytes = s.state.cwnd_bytes;
        let shared = Arc::new(Mutex::new(MystiqueBbr::default()));
        s.hand_over_to(Box::new(SharedMystiqueBbr(shared.clone())));
        (s, shared)
    }

    #[test]
    fn take_over_cruises_at_the_inherited_rate_without_the_queue() {
        // 100 segments at 75 ms on a 50 ms path: 2/3 of it fills the pipe, 1/3 is queue.
        let (s, b) = taken_over(100, 75);
        assert_eq!(phase(&b), Phase::Cruise);
        assert_eq!(s.state.pacing_rate_bytes_per_s, None, "never paces");
        let cwnd = s.cwnd_segments();
        assert!((66.0..=67.0).contains(&cwnd), "cwnd × min_rtt / srtt: {cwnd}");
        // On a link of that rate: no queue, the same delivery rate.
        let rate = 100 * s.mss() * 1000 / 75; // bytes/s
        let link = Link { bandwidth_bytes_per_s: rate, ..Link::new(0, 50, BDP) };
        let (mut s, _) = taken_over(100, 75);
        let r = s.round_on_link(&link);
        assert!(r.queue_bytes < s.mss(), "queue {} bytes", r.queue_bytes);
        assert!(near(s.delivery_rate_bytes_per_s, rate, 0.02), "{}", s.delivery_rate_bytes_per_s);
    }

    #[test]
    fn take_over_probes_after_t_step_not_a_startup() {
        let (mut s, b) = taken_over(100, 50);
        let start = s.now_us;
        let cwnd = s.state.cwnd_bytes;
        while s.now_us < start + 990_000 {
            s.advance_ms(10);
            s.ack_segments(10);
            assert_eq!(phase(&b), Phase::Cruise);
            assert_eq!(s.state.cwnd_bytes, cwnd);
        }
        s.advance_ms(20);
        s.ack_segments(10);
        assert!(matches!(phase(&b), Phase::Probe { .. }));
        assert!(near(s.state.cwnd_bytes, cwnd * 5 / 4, 0.01));
    }

    #[test]
    fn asks_for_periodic_reports() {
        assert_eq!(
            MystiqueBbr::default().reporting(),
            Reporting::EveryMicros(10_000)
        );
        let (s, _) = sender("report_ms=25", 50);
        assert_eq!(s.algorithm.reporting(), Reporting::EveryMicros(25_000));
    }

    #[test]
    fn startup_ramps_then_recalibration_drains_the_queue() {
        let link = Link::new(24, 50, BDP);
        let (mut s, b) = sender("", 50);
        let mut sent = Vec::new();
        while phase(&b) == Phase::Startup {
            sent.push(s.round_on_link(&link).sent_bytes);
            assert!(sent.len() < 20);
        }
        assert_eq!(
            &sent[..4],
            &[14480, 28960, 57920, 115840],
            "the window doubles per round"
        );
        assert!(
            sent.last().unwrap() > &(2 * BDP),
            "startup fills the pipe and more"
        );
        let Phase::Drain { window, .. } = phase(&b) else {
            panic!("{:?}", phase(&b))
        };
        assert!(
            near(window, BDP / 2, 0.02),
            "recalibration holds half the BDP: {window}"
        );
        let r = s.round_on_link(&link);
        assert_eq!(r.queue_bytes, 0, "the queue is gone");
        s.round_on_link(&link);
        assert_eq!(
            b.lock().unwrap().min_rtt_us,
            50_000,
            "min_rtt measured on an empty queue"
        );
        assert!(matches!(phase(&b), Phase::Probe { .. }), "{:?}", phase(&b));
    }

    #[test]
    fn window_tracks_gain_times_bdp_on_a_link() {
        for (gain, spec) in [(1.0, ""), (1.5, "gain=1.5")] {
            let link = Link::new(24, 50, BDP);
            let (mut s, b) = sender(spec, 50);
            run_ms(&mut s, &link, 2000, |_| {});
            until_cruise(&mut s, &b, &link, 2000);
            let target = (gain * BDP as f64) as u64;
            assert!(
                near(s.state.cwnd_bytes, target, 0.03),
                "{spec}: {} vs {target}",
                s.cwnd_segments()
            );
            let u = run_ms(&mut s, &link, 20_000, |_| {});
            assert!(u > 0.95, "{spec}: utilisation {u}");
        }
    }

    #[test]
    fn probes_every_t_step_and_backs_off_without_more_bandwidth() {
        let link = Link::new(24, 50, BDP);
        let (mut s, b) = sender("t_step=500", 50);
        run_ms(&mut s, &link, 1000, |_| {});
        until_cruise(&mut s, &b, &link, 2000);
        let cruise = s.state.cwnd_bytes;
        let mut probes = Vec::new();
        let start = s.now_us;
        while s.now_us - start < 2_000_000 {
            s.round_on_link(&link);
            if let Phase::Probe { started_us, .. } = phase(&b) {
                if probes.last() != Some(&started_us) {
                    probes.push(started_us);
                    assert!(
                        near(s.state.cwnd_bytes, cruise * 5 / 4, 0.02),
                        "probe window {}",
                        s.cwnd_segments()
                    );
                }
            } else if phase(&b) == Phase::Cruise {
                assert!(
                    near(s.state.cwnd_bytes, cruise, 0.01),
                    "backs off to the cruise window"
                );
            }
        }
        assert!(probes.len() >= 3, "probes at {probes:?}");
        for w in probes.windows(2) {
            let gap = w[1] - w[0];
            assert!(
                (500_000..=700_000).contains(&gap),
                "t_step plus the probe apart: {gap} µs"
            );
        }
    }

    #[test]
    fn probes_up_to_a_higher_bandwidth() {
        let slow = Link::new(12, 50, BDP);
        let (mut s, b) = sender("", 50);
        run_ms(&mut s, &slow, 2000, |_| {});
        until_cruise(&mut s, &b, &slow, 2000);
        assert!(near(s.state.cwnd_bytes, BDP / 2, 0.03));
        let fast = Link::new(24, 50, BDP);
        // Within t_step the next probe starts; chained probes find the new rate.
        let start = s.now_us;
        while !(phase(&b) == Phase::Cruise && s.state.cwnd_bytes as f64 >= 0.95 * BDP as f64) {
            s.round_on_link(&fast);
            assert!(
                s.now_us - start < 1_000_000 + 12 * 50_000 * 5 / 4,
                "not converged: {:?}",
                phase(&b)
            );
        }
        assert!(near(s.state.cwnd_bytes, BDP, 0.03), "{}", s.cwnd_segments());
        let u = run_ms(&mut s, &fast, 5000, |_| {});
        assert!(u > 0.95, "utilisation {u}");
    }

    #[test]
    fn recalibration_forgets_a_higher_bandwidth_after_one_period() {
        let fast = Link::new(24, 50, BDP);
        let (mut s, b) = sender("period=3000", 50);
        run_ms(&mut s, &fast, 1000, |_| {});
        let period_start = b.lock().unwrap().period_start_us;
        let slow = Link::new(12, 50, BDP);
        while s.now_us < period_start + 3_000_000 {
            let old = s.now_us;
            s.round_on_link(&slow);
            if s.now_us < period_start + 3_000_000 {
                assert_eq!(
                    b.lock().unwrap().max_bw,
                    BW,
                    "the max holds within a period (t={old})"
                );
                assert!(
                    s.state.cwnd_bytes >= BDP,
                    "window still from the old bandwidth"
                );
            }
        }
        assert!(matches!(phase(&b), Phase::Drain { .. }));
        assert_eq!(
            b.lock().unwrap().max_bw,
            BW / 2,
            "re-measured from the present rate"
        );
        until_cruise(&mut s, &b, &slow, 1000);
        assert!(
            near(s.state.cwnd_bytes, BDP / 2, 0.03),
            "{}",
            s.cwnd_segments()
        );
    }

    #[test]
    fn recalibration_learns_a_longer_path_delay() {
        let near_path = Link::new(24, 50, BDP);
        let (mut s, b) = sender("period=3000", 50);
        run_ms(&mut s, &near_path, 1000, |_| {});
        let far_path = Link::new(24, 100, 2 * BDP);
        let period_start = b.lock().unwrap().period_start_us;
        while s.now_us < period_start + 3_000_000 {
            s.round_on_link(&far_path);
            if s.now_us < period_start + 3_000_000 {
                assert_eq!(
                    b.lock().unwrap().min_rtt_us,
                    50_000,
                    "the old minimum holds within a period"
                );
            }
        }
        until_cruise(&mut s, &b, &far_path, 3000);
        assert_eq!(b.lock().unwrap().min_rtt_us, 100_000);
        assert!(
            near(s.state.cwnd_bytes, 2 * BDP, 0.03),
            "{}",
            s.cwnd_segments()
        );
    }

    #[test]
    fn loss_does_not_collapse_the_window() {
        let link = Link::new(24, 50, BDP);
        let (mut s, b) = sender("", 50);
        run_ms(&mut s, &link, 1000, |_| {});
        until_cruise(&mut s, &b, &link, 2000);
        let cwnd = s.state.cwnd_bytes;
        s.lose(3);
        s.lose(10);
        assert_eq!(s.state.cwnd_bytes, cwnd);
        let mut lcg: u64 = 7;
        let u = run_ms(&mut s, &link, 20_000, |s| {
            for _ in 0..4 {
                lcg = lcg
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                if (lcg >> 33).is_multiple_of(2) {
                    s.lose(1 + (lcg >> 40) % 2);
                }
            }
        });
        assert!(u > 0.93, "utilisation under random loss {u}");
    }

    #[test]
    fn timeout_holds_four_segments_then_restores() {
        let link = Link::new(24, 50, BDP);
        let (mut s, b) = sender("", 50);
        run_ms(&mut s, &link, 1000, |_| {});
        until_cruise(&mut s, &b, &link, 2000);
        let cwnd = s.state.cwnd_bytes;
        s.timeout();
        assert_eq!(s.cwnd_segments(), 4.0);
        assert_eq!(s.state.pacing_rate_bytes_per_s, None);
        s.timeout();
        s.round_on_link(&link);
        assert!(s.state.cwnd_bytes >= cwnd, "restored");
    }
}
