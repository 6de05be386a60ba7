//! TCP Hybla (Caini & Firrincieli, "TCP Hybla: a TCP enhancement for heterogeneous networks",
//! Int. J. Satellite Communications and Networking, 2004; Linux `net/ipv4/tcp_hybla.c`).
//!
//! Reno's window grows per RTT, so a long-RTT flow gains rate slowly. Hybla normalises the
//! RTT by a reference `RTT0` (25 ms): with `ρ = RTT/RTT0` (at least 1), each acknowledged
//! segment adds `2^ρ − 1` segments in slow start (the window grows `2^ρ`-fold per RTT,
//! `ρ` doublings) and `ρ²/cwnd` in congestion avoidance (`ρ²` segments per RTT). In both
//! phases the sending rate then grows over time as a Reno flow's would at `RTT0`: in
//! avoidance by one segment per `RTT0` per `RTT0`, whatever the flow's RTT. At `ρ = 1` this
//! is Reno exactly. Losses are handled as Reno does (`tcp_reno_ssthresh`: halve, at least 2
//! segments; a timeout restarts from the minimum window).
//!
//! As in Linux, `ρ` comes from the smallest smoothed RTT seen (queueing does not inflate
//! it), in eighths (`rho_3ls`), and the slow-start factor's integer exponent is capped at 16;
//! the window is clamped at 65535 segments (`snd_cwnd_clamp`). Reports carry many ACKs: slow
//! start adds `(2^ρ − 1)` per acknowledged segment up to ssthresh and spends the rest in
//! avoidance; avoidance adds one segment each time `cwnd` segments' worth of `ρ²`-weighted
//! acknowledgements has accumulated, the window growing as it goes — what per-ACK
//! `ρ²/cwnd` steps add up to.
//!
//! Deviations from Linux: growth is per acknowledged segment, as in the paper (Linux adds the
//! increment once per ACK, so delayed or stretched ACKs slow it down); the initial window is
//! the datapath's, where `hybla_init` sets it to `ρ` segments; after a timeout Hybla's rules
//! apply at once, where Linux uses Reno's until the Loss state ends (`hybla_en`).
//!
//! **Taking over** a running flow (MCC §3.1.1): the inherited window stays, in congestion
//! avoidance (`ssthresh = cwnd`), and the growth credit restarts. ρ restarts from the flow's
//! minimum RTT rather than from its smoothed RTT: the smoothed RTT at the handover carries
//! whatever queue the previous algorithm built, which would inflate ρ (and ρ² growth) for
//! the rest of the flow, since ρ only ever follows a new minimum. The minimum RTT is the
//! propagation delay that ρ is meant to normalise; Linux's smallest smoothed RTT is slightly
//! above it, so this ρ is, if anything, slightly lower.

use crate::{Algorithm, AlgorithmInfo, FlowState, Make, Measurement, Param, Params, WindowEvent};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "hybla",
    summary:
        "TCP Hybla: Reno with growth scaled by rho = RTT/RTT0, as fast as a 25 ms flow at any RTT",
    source: "Caini & Firrincieli, Int. J. Satell. Commun. Netw. 2004; Linux net/ipv4/tcp_hybla.c",
    params: &[Param {
        name: "rtt0_ms",
        default: RTT0_MS,
        unit: "ms",
        help: "reference RTT: flows at or below it behave as Reno",
    }],
    make: Make::Simple(|p| Box::new(Hybla::new(HyblaConfig::from_params(p)))),
};

/// Reference RTT, ms (Linux `rtt0 = 25`).
const RTT0_MS: f64 = 25.0;
/// Accepted range of the reference RTT, ms.
const RTT0_RANGE_MS: (f64, f64) = (1.0, 10_000.0);
/// ρ is kept in eighths (Linux `rho_3ls`).
const RHO_SCALE: u64 = 8;
/// Largest integer exponent of the slow-start factor (Linux `min(rho, 16)`).
const MAX_SLOW_START_EXPONENT: u64 = 16;
/// Largest window, segments (Linux sets `snd_cwnd_clamp = 65535`).
const CWND_CLAMP_SEGMENTS: u64 = 65_535;
/// Window after a timeout, in segments (`tcp_enter_loss` restarts from one).
const LOSS_WINDOW_SEGMENTS: u64 = 1;

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HyblaConfig {
    pub rtt0_us: u64,
}

impl Default for HyblaConfig {
    fn default() -> Self {
        Self {
            rtt0_us: (RTT0_MS * 1000.0) as u64,
        }
    }
}

impl HyblaConfig {
    pub fn from_params(p: &Params) -> Self {
        let rtt0_ms = p.get("rtt0_ms").clamp(RTT0_RANGE_MS.0, RTT0_RANGE_MS.1);
        Self {
            rtt0_us: (rtt0_ms * 1000.0) as u64,
        }
    }
}

#[derive(Debug)]
pub struct Hybla {
    config: HyblaConfig,
    /// Smallest smoothed RTT seen, µs (0: none yet).
    min_srtt_us: u64,
    /// ρ in eighths, at least one (`RHO_SCALE`).
    rho_eighths: u64,
    /// Slow-start growth not yet a whole byte.
    slow_start_carry_bytes: f64,
    /// Avoidance credit: acknowledged bytes × ρ² × 64, spent `cwnd × 64` per segment.
    avoidance_credit: u128,
}

impl Default for Hybla {
    fn default() -> Self {
        Self::new(HyblaConfig::default())
    }
}

impl Hybla {
    pub fn new(config: HyblaConfig) -> Self {
        Self {
            config,
            min_srtt_us: 0,
            rho_eighths: RHO_SCALE,
            slow_start_carry_bytes: 0.0,
            avoidance_credit: 0,
        }
    }

    /// Linux recomputes ρ whenever the smoothed RTT reaches a new minimum.
    fn update_rho(&mut self, state: &FlowState) {
        if state.srtt_us == 0 || (self.min_srtt_us != 0 && state.srtt_us >= self.min_srtt_us) {
            return;
        }
        self.set_rho(state.srtt_us);
    }

    fn set_rho(&mut self, rtt_us: u64) {
        self.min_srtt_us = rtt_us;
        self.rho_eighths = (rtt_us * RHO_SCALE / self.config.rtt0_us).max(RHO_SCALE);
    }

    /// Segments added per segment acknowledged in slow start: 2^ρ − 1.
    fn slow_start_increment(&self) -> f64 {
        let whole = (self.rho_eighths / RHO_SCALE).min(MAX_SLOW_START_EXPONENT);
        let fraction = (self.rho_eighths % RHO_SCALE) as f64 / RHO_SCALE as f64;
        2f64.powi(whole as i32) * 2f64.powf(fraction) - 1.0
    }

    fn clamp_bytes(state: &FlowState) -> u64 {
        CWND_CLAMP_SEGMENTS * state.mss_bytes
    }

    /// Slow start and then avoidance over `acked_bytes`.
    fn grow(&mut self, state: &mut FlowState, acked_bytes: u64) {
        let mut acked = acked_bytes;
        if state.in_slow_start() {
            let increment = self.slow_start_increment();
            let room = state
                .ssthresh_bytes
                .min(Self::clamp_bytes(state))
                .saturating_sub(state.cwnd_bytes);
            let growth = acked as f64 * increment + self.slow_start_carry_bytes;
            if growth >= room as f64 {
                // Filled up to ssthresh: the acknowledgements left go to avoidance.
                let used = ((room as f64 - self.slow_start_carry_bytes) / increment)
                    .ceil()
                    .max(0.0);
                acked -= (used as u64).min(acked);
                state.cwnd_bytes += room;
                self.slow_start_carry_bytes = 0.0;
            } else {
                state.cwnd_bytes += growth as u64;
                self.slow_start_carry_bytes = growth.fract();
                acked = 0;
            }
        }
        if acked > 0 {
            self.congestion_avoidance(state, acked);
        }
    }

    /// ρ²/cwnd segments per segment acknowledged, the window growing as the credit is spent.
    fn congestion_avoidance(&mut self, state: &mut FlowState, acked_bytes: u64) {
        let rho_squared_64ths = u128::from(self.rho_eighths * self.rho_eighths);
        self.avoidance_credit += u128::from(acked_bytes) * rho_squared_64ths;
        let per_segment_scale = u128::from(RHO_SCALE * RHO_SCALE);
        let clamp = Self::clamp_bytes(state);
        while self.avoidance_credit >= u128::from(state.cwnd_bytes) * per_segment_scale {
            if state.cwnd_bytes >= clamp {
                self.avoidance_credit = 0;
                break;
            }
            self.avoidance_credit -= u128::from(state.cwnd_bytes) * per_segment_scale;
            state.cwnd_bytes += state.mss_bytes;
        }
    }

    fn reset_growth(&mut self) {
        self.slow_start_carry_bytes = 0.0;
        self.avoidance_credit = 0;
    }

    /// `tcp_reno_ssthresh`: half the window, at least two segments.
    fn reduced_window(state: &FlowState) -> u64 {
        (state.cwnd_bytes / 2).max(state.min_cwnd_bytes())
    }
}

impl Algorithm for Hybla {
    fn name(&self) -> &str {
        INFO.name
    }

    fn window_on_loss(&self, state: &FlowState) -> Option<u64> {
        (!state.in_recovery()).then(|| Self::reduced_window(state))
    }

    fn take_over(&mut self, state: &mut FlowState) {
        *self = Self::new(self.config);
        if state.min_rtt_us > 0 {
            self.set_rho(state.min_rtt_us);
        }
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        self.update_rho(state);
        // Hybla has its own slow start, so only the congestion part of the shared
        // classification applies; growth follows classify's rules (the bytes a loss report
        // acknowledges grow the window in slow start before the loss is answered; those of
        // a recovery are no credit).
        let event = state.congestion(m);
        if let Some(WindowEvent::CongestionEvent { acked_bytes }) = event {
            if state.in_slow_start() {
                self.grow(state, acked_bytes);
            }
        }
        match event {
            Some(WindowEvent::Timeout) => {
                state.ssthresh_bytes = Self::reduced_window(state);
                state.cwnd_bytes =
                    (LOSS_WINDOW_SEGMENTS * state.mss_bytes).max(state.min_cwnd_bytes());
                self.reset_growth();
            }
            Some(WindowEvent::CongestionEvent { .. }) => {
                state.ssthresh_bytes = Self::reduced_window(state);
                state.cwnd_bytes = state.ssthresh_bytes;
                self.reset_growth();
            }
            Some(_) => {}
            None => self.grow(state, state.acked_after_recovery(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSender, Link};

    impl Hybla {
        fn rho(&self) -> f64 {
            self.rho_eighths as f64 / RHO_SCALE as f64
        }
    }

    fn sender(spec: &str, init_cwnd: u32, rtt_ms: u64) -> FakeSender {
        FakeSender::new(crate::simple(spec).unwrap(), init_cwnd, rtt_ms)
    }

    /// A flow in congestion avoidance at `cwnd` segments (a loss at twice that, then the
    /// recovery rounds).
    fn in_avoidance(spec: &str, cwnd: u32, rtt_ms: u64) -> FakeSender {
        let mut s = sender(spec, 2 * cwnd, rtt_ms);
        s.ack_segments(0);
        s.lose(1);
        s.ack_round();
        s.ack_round(); // ends recovery (and grows)
        s
    }

    #[test]
    fn rho_is_rtt_over_rtt0_at_least_one() {
        for (rtt_ms, rho) in [
            (10, 1.0),
            (25, 1.0),
            (50, 2.0),
            (60, 2.375),
            (100, 4.0),
            (300, 12.0),
        ] {
            let mut h = Hybla::default();
            let mut state = FlowState::new(1448, 14480);
            state.observe(&Measurement {
                rtt_us: rtt_ms * 1000,
                ..Default::default()
            });
            h.update_rho(&state);
            assert_eq!(h.rho(), rho, "RTT {rtt_ms} ms");
        }
        let mut h = Hybla::new(HyblaConfig { rtt0_us: 50_000 });
        let mut state = FlowState::new(1448, 14480);
        state.observe(&Measurement {
            rtt_us: 200_000,
            ..Default::default()
        });
        h.update_rho(&state);
        assert_eq!(h.rho(), 4.0, "rtt0 is a parameter");
    }

    #[test]
    fn take_over_takes_rho_from_the_min_rtt_and_stays_in_avoidance() {
        // Reno ran at a 100 ms path with a queue that doubled the RTT.
        let mut s = sender("reno", 200, 100);
        s.ack_segments(0);
        s.lose(1); // avoidance at 100 segments
        s.set_rtt_ms(200);
        for _ in 0..20 {
            s.ack_round();
        }
        assert!(s.state.srtt_us > 190_000);
        let cwnd = s.cwnd_segments();
        s.hand_over_to(crate::simple("hybla").unwrap());
        assert_eq!(s.cwnd_segments(), cwnd);
        s.ack_round();
        // ρ = 100/25 = 4 (not 8 from the smoothed RTT): ρ² = 16 segments per RTT, roughly.
        let growth = s.cwnd_segments() - cwnd;
        assert!(!s.state.in_slow_start());
        assert!((14.0..=17.0).contains(&growth), "grew {growth} segments in one RTT");
    }

    #[test]
    fn rho_follows_the_smallest_smoothed_rtt() {
        let mut s = sender("hybla", 10, 100);
        s.ack_round();
        s.set_rtt_ms(400); // queueing: the smoothed RTT rises, ρ does not
        s.ack_round();
        assert_eq!(s.state.ssthresh_bytes, u64::MAX);
        // 160 → 160 × 2^4 = 2560: still ρ = 4.
        assert_eq!(s.cwnd_segments(), 2560.0);
    }

    #[test]
    fn slow_start_grows_by_two_to_the_rho_per_rtt() {
        // ρ = 1, 2, 3, 4 and 2.375 (60 ms: 19 eighths).
        for (rtt_ms, factor) in [
            (25, 2.0),
            (50, 4.0),
            (75, 8.0),
            (100, 16.0),
            (60, 2f64.powf(2.375)),
        ] {
            let mut s = sender("hybla", 10, rtt_ms);
            s.ack_round();
            let want = 10.0 * factor;
            assert!(
                (s.cwnd_segments() - want).abs() < 1.0,
                "RTT {rtt_ms} ms: {:.2} segments after one round, want {want:.2}",
                s.cwnd_segments()
            );
        }
        let mut s = sender("hybla", 10, 100);
        s.ack_round();
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 2560.0, "16-fold again");
    }

    #[test]
    fn slow_start_stops_at_ssthresh_and_spends_the_rest_in_avoidance() {
        let mut s = sender("hybla", 100, 100);
        s.ack_round();
        s.timeout(); // ssthresh = 800 segments (half of 1600), window 2
        assert_eq!(s.state.ssthresh_bytes, 800 * s.mss());
        s.ack_round(); // 2 → 32
        s.ack_round(); // 32 → 512
        assert_eq!(s.cwnd_segments(), 512.0);
        // 512 acknowledged: 18 of them (×15) fill the 288 to ssthresh, 494 × 16/800 ≈ 9.9 more.
        s.ack_round();
        assert!(!s.state.in_slow_start());
        assert!(
            (808.0..=810.0).contains(&s.cwnd_segments()),
            "got {}",
            s.cwnd_segments()
        );
    }

    #[test]
    fn avoidance_grows_rho_squared_segments_per_rtt() {
        for (rtt_ms, rho_squared) in [(50, 4.0), (75, 9.0), (100, 16.0), (150, 36.0), (200, 64.0)] {
            let mut s = in_avoidance("hybla", 2000, rtt_ms);
            let start = s.cwnd_segments();
            for _ in 0..10 {
                s.ack_round();
            }
            let per_rtt = (s.cwnd_segments() - start) / 10.0;
            // ρ² per RTT, a little less as the window grows during the round (per-ACK ρ²/cwnd).
            assert!(
                per_rtt <= rho_squared && per_rtt >= 0.97 * rho_squared,
                "RTT {rtt_ms} ms: {per_rtt:.2} segments per RTT, want about {rho_squared}"
            );
        }
    }

    #[test]
    fn rate_grows_as_fast_at_any_rtt() {
        // In avoidance the rate gains one segment per RTT0 per RTT0, whatever the RTT.
        let want = 1448.0 / (0.025 * 0.025);
        for rtt_ms in [25, 50, 100, 200, 300] {
            let cwnd = (10_000_000 * rtt_ms / 1000 / 1448) as u32; // 10 MB/s
            let mut s = in_avoidance("hybla", cwnd, rtt_ms);
            let (t0, rate0) = (s.now_us, s.state.cwnd_bytes as f64 / (rtt_ms as f64 / 1e3));
            while s.now_us - t0 < 3_000_000 {
                s.ack_round();
            }
            let rate = s.state.cwnd_bytes as f64 / (rtt_ms as f64 / 1e3);
            let slope = (rate - rate0) / ((s.now_us - t0) as f64 / 1e6);
            assert!(
                (slope - want).abs() < 0.05 * want,
                "RTT {rtt_ms} ms: rate grows {slope:.0} B/s per s, want {want:.0}"
            );
        }
    }

    /// The same script of events on two senders, compared after every step.
    fn assert_same_as_reno(spec: &str, rtt_ms: u64) {
        let mut hybla = sender(spec, 10, rtt_ms);
        let mut reno = sender("reno", 10, rtt_ms);
        let script: &[fn(&mut FakeSender)] = &[
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_segments(7),
            |s| s.ack_round(),
            |s| s.lose(2),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_segments(13),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.lose(1),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.timeout(),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_round(),
            |s| s.ack_round(),
        ];
        for (i, step) in script.iter().enumerate() {
            step(&mut hybla);
            step(&mut reno);
            assert_eq!(
                hybla.state.cwnd_bytes, reno.state.cwnd_bytes,
                "{spec} {rtt_ms} ms, step {i}"
            );
            assert_eq!(
                hybla.state.ssthresh_bytes, reno.state.ssthresh_bytes,
                "step {i}"
            );
        }
        for _ in 0..40 {
            hybla.ack_round();
            reno.ack_round();
            assert_eq!(hybla.state.cwnd_bytes, reno.state.cwnd_bytes);
        }
    }

    #[test]
    fn at_or_below_rtt0_it_is_reno() {
        assert_same_as_reno("hybla", 5);
        assert_same_as_reno("hybla", 25);
        assert_same_as_reno("hybla:rtt0_ms=100", 80);
    }

    #[test]
    fn loss_halves_and_timeout_restarts() {
        let mut s = sender("hybla", 100, 100);
        s.ack_segments(0);
        s.lose(1);
        assert_eq!(s.cwnd_segments(), 50.0);
        assert_eq!(s.state.ssthresh_bytes, 50 * s.mss());
        s.ack_round();
        s.ack_round();
        let cwnd = s.state.cwnd_bytes;
        s.timeout();
        assert_eq!(s.state.ssthresh_bytes, cwnd / 2);
        assert_eq!(s.cwnd_segments(), 2.0);
        let mut s = sender("hybla", 3, 100);
        s.lose(1);
        assert_eq!(s.cwnd_segments(), 2.0, "never below two segments");
    }

    /// Mean utilisation of `link` over rounds `from..to`, with a random loss (one packet,
    /// beyond the link's own drops) after every `loss_every`-th round if given.
    fn utilisation(
        s: &mut FakeSender,
        link: &Link,
        from: usize,
        to: usize,
        loss_every: Option<usize>,
    ) -> f64 {
        let (mut delivered, mut elapsed_us) = (0u64, 0u64);
        for i in 1..=to {
            let r = s.round_on_link(link);
            if i > from {
                let queued = r.sent_bytes.saturating_sub(link.bdp_bytes());
                delivered += r.sent_bytes - queued.saturating_sub(link.buffer_bytes);
                elapsed_us += r.rtt_us;
            }
            if loss_every.is_some_and(|n| i.is_multiple_of(n)) {
                s.lose(1);
            }
        }
        delivered as f64 * 1e6 / elapsed_us as f64 / link.bandwidth_bytes_per_s as f64
    }

    fn link(mbit_per_s: u64, rtt_ms: u64, buffer_bdps: f64) -> Link {
        let l = Link::new(mbit_per_s, rtt_ms, 0);
        Link {
            buffer_bytes: (l.bdp_bytes() as f64 * buffer_bdps) as u64,
            ..l
        }
    }

    #[test]
    fn fills_a_one_bdp_buffered_link() {
        for rtt_ms in [50, 200] {
            let l = link(24, rtt_ms, 1.0);
            let u = utilisation(&mut sender("hybla", 10, rtt_ms), &l, 100, 400, None);
            assert!(u >= 0.8, "RTT {rtt_ms} ms: utilisation {u:.2}");
        }
    }

    #[test]
    fn keeps_a_long_path_full_despite_random_losses_where_reno_cannot() {
        // 24 Mbit/s, 200 ms, 1-BDP buffer, one random loss every 20 RTTs (4 s): Reno regains
        // 20 segments between losses, Hybla (ρ = 8) 20 × 64.
        let l = link(24, 200, 1.0);
        let hybla = utilisation(&mut sender("hybla", 10, 200), &l, 100, 400, Some(20));
        let reno = utilisation(&mut sender("reno", 10, 200), &l, 100, 400, Some(20));
        assert!(hybla >= 0.9, "Hybla utilisation {hybla:.2}");
        assert!(hybla > reno + 0.3, "Hybla {hybla:.2} vs Reno {reno:.2}");
    }
}
