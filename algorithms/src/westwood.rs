//! TCP Westwood+ (Mascolo et al., MobiCom 2001; Grieco & Mascolo, CCR 2004; Linux
//! `net/ipv4/tcp_westwood.c`).
//!
//! Westwood estimates the bandwidth the flow gets from the rate of ACKs and, after a loss,
//! sets the window to what that bandwidth fills at the minimum RTT, instead of halving it.
//! Losses that are not due to congestion (radio, random) thus leave a full pipe full.
//!
//! - Bandwidth samples (the "+" of Westwood+): the bytes acknowledged over a sampling window
//!   of at least one RTT (the latest sample) and at least 50 ms, as Linux
//!   (`TCP_WESTWOOD_RTT_MIN`): `sample = acked bytes / window duration`. The window is made
//!   of whole reports: bytes of the reports since the window began, over the datapath time
//!   since then. (The report's delivery rate is not used: it is the largest per-ACK rate in
//!   the report, not Westwood's per-RTT count.)
//! - Filter: the kernel's two cascaded low-pass stages of gain 1/8,
//!   `bw_ns = 7/8·bw_ns + 1/8·sample`, `bw_est = 7/8·bw_est + 1/8·bw_ns`; the first sample
//!   initialises both.
//! - First loss of a congestion event: `ssthresh = max(bw_est·min_rtt, 2 MSS)`,
//!   `cwnd = min(cwnd, ssthresh)` (the paper's rule). Timeout: same ssthresh, `cwnd = 1`
//!   segment (raised to the two-segment minimum). Otherwise Reno's slow start and
//!   congestion avoidance.
//!
//! Differences from Linux: Linux halves the window during fast recovery (`tcp_reno_ssthresh`)
//! and sets `cwnd = ssthresh = bw_est·min_rtt` when recovery completes (which can also raise
//! the window); here the window moves once, at the loss, and is never raised by it. A loss
//! before the first bandwidth sample halves the window as Reno (Linux would go to two
//! segments). `min_rtt` is the smallest RTT sample, re-measured from the first sample after a
//! timeout as Linux does (`reset_rtt_min`).
//!
//! As in Linux, the estimate trails a window that doubles every RTT, so the loss that ends
//! slow start sets the window well below the path's BDP (to about a quarter of it on a
//! 24 Mbit/s, 50 ms, 1-BDP-buffer link); Reno growth then refills the pipe, after which the
//! estimate is the link rate and losses cut the window to about one BDP.
//!
//! **Taking over** a running flow (MCC §3.1.1): the inherited window stays, in congestion
//! avoidance (`ssthresh = cwnd`), and the avoidance credit and the sampling window restart
//! (the next report's ACKs are the first sample's). The bandwidth estimate is *seeded*, not
//! restarted: it matters only at the next loss, and a restarted filter has no sample for at
//! least max(RTT, 50 ms), so a loss in that time — likely on exactly the lossy paths Westwood
//! is chosen for — would halve the window as Reno does. Both filter stages start at the rate
//! the flow delivers at the handover, window / recent RTT, capped by the largest delivery rate
//! the datapath has measured (the window of a paced predecessor may be well above what it
//! delivers); the filter's gain of 1/8 then hands over to the flow's own samples within about
//! a second. `min_rtt` starts from the flow's minimum RTT: measured afresh, it would include
//! the previous algorithm's standing queue, and the next loss would keep that queue.

use crate::{Algorithm, AlgorithmInfo, FlowState, Make, Measurement, WindowEvent};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "westwood",
    summary: "Westwood+: on loss, window = filtered per-RTT ACK rate × min RTT instead of halving",
    source: "Mascolo et al., MobiCom 2001; Grieco & Mascolo, ACM CCR 34(2) 2004; Linux net/ipv4/tcp_westwood.c",
    params: &[],
    make: Make::Simple(|_| Box::new(Westwood::default())),
};

/// Shortest bandwidth sampling window, µs (Linux `TCP_WESTWOOD_RTT_MIN`, HZ/20).
const MIN_SAMPLE_WINDOW_US: u64 = 50_000;
/// Weight of the old value in each filter stage (Linux `westwood_do_filter`: 7/8).
const FILTER_KEEP: f64 = 7.0 / 8.0;
/// Reno's decrease, used before the first bandwidth sample.
const RENO_DECREASE: f64 = 0.5;
/// Window after a timeout, segments (raised to the two-segment minimum).
const LOSS_WINDOW_SEGMENTS: u64 = 1;

#[derive(Debug, Default)]
pub struct Westwood {
    /// Start of the current sampling window, µs (`None` before the first report).
    window_start_us: Option<u64>,
    /// Bytes acknowledged in the current sampling window.
    window_acked_bytes: u64,
    /// First filter stage (Linux `bw_ns_est`), bytes/s.
    bw_ns_est: f64,
    /// Bandwidth estimate (Linux `bw_est`), bytes/s; 0 before the first sample.
    bw_est: f64,
    /// Smallest RTT seen, µs (0: none); re-measured after a timeout, as Linux.
    min_rtt_us: u64,
    /// A timeout happened: the next RTT sample replaces `min_rtt_us`.
    reset_min_rtt: bool,
    /// Bytes acknowledged in congestion avoidance not yet turned into window.
    ca_acked_bytes: u64,
}

impl Westwood {
    fn filter(&mut self, sample: f64) {
        if self.bw_est == 0.0 && self.bw_ns_est == 0.0 {
            self.bw_ns_est = sample;
            self.bw_est = sample;
        } else {
            self.bw_ns_est = FILTER_KEEP * self.bw_ns_est + (1.0 - FILTER_KEEP) * sample;
            self.bw_est = FILTER_KEEP * self.bw_est + (1.0 - FILTER_KEEP) * self.bw_ns_est;
        }
    }

    /// Count the report's ACKs; take a sample once the window spans an RTT and 50 ms.
    fn sample_bandwidth(&mut self, state: &FlowState, m: &Measurement) {
        let Some(start) = self.window_start_us else {
            // The first report's ACKs started before any known time: start counting now.
            self.window_start_us = Some(state.now_us);
            return;
        };
        self.window_acked_bytes += m.acked_bytes;
        let elapsed_us = state.now_us.saturating_sub(start);
        if state.latest_rtt_us == 0 || elapsed_us < state.latest_rtt_us.max(MIN_SAMPLE_WINDOW_US)
        {
            return;
        }
        self.filter(self.window_acked_bytes as f64 * 1e6 / elapsed_us as f64);
        self.window_acked_bytes = 0;
        self.window_start_us = Some(state.now_us);
    }

    fn update_min_rtt(&mut self, m: &Measurement) {
        let sample = if m.min_rtt_us > 0 { m.min_rtt_us } else { m.rtt_us };
        if sample == 0 {
            return;
        }
        if self.reset_min_rtt || self.min_rtt_us == 0 || sample < self.min_rtt_us {
            self.min_rtt_us = sample;
            self.reset_min_rtt = false;
        }
    }

    /// `max(bw_est·min_rtt, 2 MSS)`; Reno's halving before any sample.
    fn ssthresh_after_loss(&self, state: &FlowState) -> u64 {
        let window = if self.bw_est > 0.0 && self.min_rtt_us > 0 {
            self.bw_est * self.min_rtt_us as f64 / 1e6
        } else {
            state.cwnd_bytes as f64 * RENO_DECREASE
        };
        (window as u64).max(state.min_cwnd_bytes())
    }

    /// Reno's congestion avoidance: one MSS per window acknowledged.
    fn congestion_avoidance(&mut self, state: &mut FlowState, acked_bytes: u64) {
        self.ca_acked_bytes += acked_bytes;
        let segments = self.ca_acked_bytes / state.cwnd_bytes;
        self.ca_acked_bytes -= segments * state.cwnd_bytes;
        state.cwnd_bytes += segments * state.mss_bytes;
    }
}

impl Algorithm for Westwood {
    fn name(&self) -> &str {
        INFO.name
    }

    fn take_over(&mut self, state: &mut FlowState) {
        *self = Self::default();
        self.min_rtt_us = state.min_rtt_us;
        let Some(rate) = state.handover_rate_bytes_per_s() else {
            return; // no report yet: nothing to inherit
        };
        let delivered = state.max_delivery_rate_bytes_per_s;
        let seed = if delivered > 0 { rate.min(delivered) } else { rate };
        self.bw_ns_est = seed as f64;
        self.bw_est = seed as f64;
        self.window_start_us = Some(state.now_us);
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        self.update_min_rtt(m);
        self.sample_bandwidth(state, m);
        match state.classify(m) {
            WindowEvent::Timeout => {
                state.ssthresh_bytes = self.ssthresh_after_loss(state);
                self.reset_min_rtt = true;
                state.cwnd_bytes =
                    (LOSS_WINDOW_SEGMENTS * state.mss_bytes).max(state.min_cwnd_bytes());
                self.ca_acked_bytes = 0;
            }
            WindowEvent::CongestionEvent { .. } => {
                state.ssthresh_bytes = self.ssthresh_after_loss(state);
                state.cwnd_bytes = state.cwnd_bytes.min(state.ssthresh_bytes);
                self.ca_acked_bytes = 0;
            }
            WindowEvent::Hold => {}
            WindowEvent::Avoidance { acked_bytes } => self.congestion_avoidance(state, acked_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{FakeSender, Link, TEST_MSS_BYTES};
    use std::sync::{Arc, Mutex};

    const MBIT: u64 = 24;
    const RTT_MS: u64 = 50;

    fn link_with_buffer_bdps(bdps: f64) -> Link {
        let bdp = Link::new(MBIT, RTT_MS, 0).bdp_bytes();
        Link::new(MBIT, RTT_MS, (bdp as f64 * bdps) as u64)
    }

    /// Feed `w` one report directly (to read its estimate), as the agent would.
    fn report(w: &mut Westwood, state: &mut FlowState, now_us: u64, acked_bytes: u64, rtt_us: u64) {
        let m = Measurement {
            now_us,
            acked_bytes,
            rtt_us,
            min_rtt_us: rtt_us,
            bytes_in_flight: state.cwnd_bytes,
            ..Default::default()
        };
        state.observe(&m);
        w.on_report(state, &m);
    }

    #[test]
    fn filter_is_the_kernels_two_stage_eighth_gain_cascade() {
        let mut w = Westwood::default();
        let mut state = FlowState::new(TEST_MSS_BYTES, 10 * TEST_MSS_BYTES);
        report(&mut w, &mut state, 1_000_000, 0, 100_000); // starts the first window
        report(&mut w, &mut state, 1_100_000, 100_000, 100_000); // 1 MB/s
        assert_eq!(w.bw_est, 1e6, "the first sample initialises the filter");
        report(&mut w, &mut state, 1_200_000, 200_000, 100_000); // 2 MB/s
        let bw_ns = 7.0 / 8.0 * 1e6 + 1.0 / 8.0 * 2e6;
        let bw = 7.0 / 8.0 * 1e6 + 1.0 / 8.0 * bw_ns;
        assert!((w.bw_est - bw).abs() < 1e-6);
        for i in 0..100 {
            report(&mut w, &mut state, 1_300_000 + i * 100_000, 200_000, 100_000);
        }
        assert!((w.bw_est - 2e6).abs() < 2e6 * 0.001, "converges to the rate");
    }

    /// Reno ran the flow to 100 segments in avoidance on a 50 ms path, the last `queued_rounds`
    /// rounds with a queue adding 50 ms; then Westwood takes over.
    fn taken_over(queued_rounds: usize) -> FakeSender {
        let mut s = FakeSender::new(crate::simple("reno").unwrap(), 200, RTT_MS);
        s.ack_segments(0);
        s.lose(1);
        s.ack_round();
        s.ack_round();
        s.set_rtt_ms(2 * RTT_MS);
        for _ in 0..queued_rounds {
            s.ack_round();
        }
        s.state.cwnd_bytes = 100 * s.mss();
        s.hand_over_to(Box::new(Westwood::default()));
        s
    }

    #[test]
    fn take_over_seeds_the_estimate_so_an_early_loss_keeps_the_pipe_full() {
        let mut s = taken_over(0); // no queue: RTT = min RTT
        assert_eq!(s.cwnd_segments(), 100.0);
        assert!(!s.state.in_slow_start());
        s.lose(1); // before any sample of Westwood's own
        assert!(s.cwnd_segments() >= 99.0, "a loss without queue costs nothing: {}", s.cwnd_segments());
    }

    #[test]
    fn take_over_seed_leaves_out_the_inherited_queue() {
        let mut s = taken_over(40); // smoothed RTT now 100 ms on a 50 ms path
        s.lose(1);
        // seed = 100 segments / 100 ms; × 50 ms min RTT = 50 segments: the queue goes.
        assert!((49.0..=51.0).contains(&s.cwnd_segments()), "{}", s.cwnd_segments());
    }

    #[test]
    fn take_over_seed_is_capped_by_the_delivery_rate_measured() {
        let mut s = FakeSender::new(crate::simple("reno").unwrap(), 100, RTT_MS);
        s.delivery_rate_bytes_per_s = 100 * s.mss() * 1000 / RTT_MS / 4; // a quarter of cwnd/RTT
        s.ack_segments(0);
        s.hand_over_to(Box::new(Westwood::default()));
        s.lose(1);
        assert!((24.0..=26.0).contains(&s.cwnd_segments()), "{}", s.cwnd_segments());
    }

    #[test]
    fn samples_span_at_least_50_ms() {
        let mut w = Westwood::default();
        let mut state = FlowState::new(TEST_MSS_BYTES, 10 * TEST_MSS_BYTES);
        report(&mut w, &mut state, 0, 0, 10_000);
        // 10 ms RTT, 10 kB per report (1 MB/s): the sample waits for 50 ms of ACKs.
        for i in 1..5 {
            report(&mut w, &mut state, i * 10_000, 10_000, 10_000);
            assert_eq!(w.bw_est, 0.0, "no sample after {} ms", i * 10);
        }
        report(&mut w, &mut state, 50_000, 10_000, 10_000);
        assert_eq!(w.bw_est, 1e6);
    }

    /// Runs a shared Westwood+ in a FakeSender, so the test can read its estimate.
    struct SharedWestwood(Arc<Mutex<Westwood>>);

    impl Algorithm for SharedWestwood {
        fn name(&self) -> &str {
            INFO.name
        }
        fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
            self.0.lock().unwrap().on_report(state, m);
        }
    }

    /// Rounds for a flow on a 1-BDP-buffered link to reach its sawtooth between one and two
    /// BDPs: slow start's loss leaves the lagging estimate at about a quarter of the link
    /// rate, and Reno's growth takes ~100 RTTs from there to fill the pipe.
    const WARMUP_ROUNDS: u32 = 250;

    fn warmed_up(spec: &str, link: &Link) -> FakeSender {
        let mut s = FakeSender::new(crate::simple(spec).unwrap(), 10, RTT_MS);
        for _ in 0..WARMUP_ROUNDS {
            s.round_on_link(link);
        }
        s
    }

    #[test]
    fn filter_converges_to_the_link_rate() {
        let link = link_with_buffer_bdps(1.0);
        let rate = link.bandwidth_bytes_per_s as f64;
        let westwood = Arc::new(Mutex::new(Westwood::default()));
        let mut s = FakeSender::new(Box::new(SharedWestwood(westwood.clone())), 10, RTT_MS);
        for _ in 0..WARMUP_ROUNDS {
            s.round_on_link(&link);
        }
        let mut delivered = 0;
        for _ in 0..100 {
            s.round_on_link(&link);
            delivered += s.delivery_rate_bytes_per_s;
            let bw = westwood.lock().unwrap().bw_est;
            assert!((bw - rate).abs() <= 0.005 * rate, "estimate {bw:.0} B/s, link {rate} B/s");
        }
        let utilisation = delivered as f64 / 100.0 / rate;
        assert!(utilisation >= 0.98, "utilisation {utilisation:.3}");
    }

    #[test]
    fn loss_sets_ssthresh_to_bandwidth_times_min_rtt() {
        let link = link_with_buffer_bdps(1.0);
        let mut s = warmed_up("westwood", &link);
        while s.state.in_recovery() {
            s.round_on_link(&link);
        }
        let cwnd = s.state.cwnd_bytes;
        s.lose(1);
        let bdp = link.bdp_bytes() as f64; // link rate × base RTT
        let ssthresh = s.state.ssthresh_bytes as f64;
        assert!((ssthresh - bdp).abs() <= 0.005 * bdp, "ssthresh {ssthresh}, rate × min RTT {bdp}");
        assert_eq!(s.state.cwnd_bytes, cwnd.min(s.state.ssthresh_bytes));
        s.timeout();
        assert_eq!(s.cwnd_segments(), 2.0);
        assert!((s.state.ssthresh_bytes as f64 - bdp).abs() <= 0.005 * bdp);
    }

    #[test]
    fn min_rtt_is_measured_again_after_a_timeout() {
        let mut w = Westwood::default();
        let mut state = FlowState::new(TEST_MSS_BYTES, 100 * TEST_MSS_BYTES);
        let mut now = 0;
        for _ in 0..40 {
            now += 50_000;
            report(&mut w, &mut state, now, 50_000, 50_000); // 1 MB/s at 50 ms
        }
        let timeout = Measurement { now_us: now, timeout: true, ..Default::default() };
        state.observe(&timeout);
        w.on_report(&mut state, &timeout);
        assert_eq!(state.ssthresh_bytes, 50_000, "1 MB/s × 50 ms");
        for _ in 0..40 {
            now += 100_000;
            report(&mut w, &mut state, now, 100_000, 100_000); // a longer path, same rate
        }
        let loss = Measurement { now_us: now, lost_packets: 1, ..Default::default() };
        state.observe(&loss);
        w.on_report(&mut state, &loss);
        assert_eq!(state.ssthresh_bytes, 100_000, "1 MB/s × the new 100 ms minimum");
    }

    #[test]
    fn loss_does_not_cut_below_what_the_path_carries() {
        // No queue: the ACK rate is cwnd/RTT, so bw_est·min_rtt is the window itself.
        let mut s = FakeSender::new(crate::simple("westwood").unwrap(), 10, RTT_MS);
        s.ack_round();
        s.lose(1); // ends slow start at 20 segments
        for _ in 0..40 {
            s.ack_round();
        }
        let cwnd = s.cwnd_segments();
        s.lose(1);
        // The filter lags a growing window by about 14 RTTs of Reno growth (+1 segment each).
        assert!(s.cwnd_segments() >= cwnd - 16.0, "cwnd {cwnd} -> {}", s.cwnd_segments());
        assert!(s.cwnd_segments() > cwnd * 0.6, "not halved");
    }

    /// Average link utilisation over 100 rounds with one non-congestion loss every
    /// `loss_every` rounds, once the flow has filled the pipe.
    fn utilisation_under_random_loss(spec: &str, loss_every: u32) -> f64 {
        let link = link_with_buffer_bdps(1.0);
        let mut s = warmed_up(spec, &link);
        let mut delivered = 0;
        for round in 1..=100 {
            s.round_on_link(&link);
            delivered += s.delivery_rate_bytes_per_s;
            if round % loss_every == 0 {
                s.lose(1);
            }
        }
        delivered as f64 / 100.0 / link.bandwidth_bytes_per_s as f64
    }

    #[test]
    fn random_loss_does_not_halve_a_full_pipe() {
        let westwood = utilisation_under_random_loss("westwood", 5);
        let reno = utilisation_under_random_loss("reno", 5);
        assert!(westwood >= 0.97, "Westwood+ keeps the pipe full: {westwood:.3}");
        assert!(reno <= 0.5, "Reno halves at every loss: {reno:.3}");
    }

    #[test]
    fn single_random_loss_with_full_pipe_keeps_about_one_bdp() {
        let link = link_with_buffer_bdps(1.0);
        let bdp = link.bdp_bytes() as f64;
        let mut cut_to = Vec::new();
        for spec in ["westwood", "reno"] {
            let mut s = warmed_up(spec, &link);
            // Just past a congestion event: the pipe is full with a small queue.
            while s.state.in_recovery() || !(1.05..1.3).contains(&(s.state.cwnd_bytes as f64 / bdp))
            {
                s.round_on_link(&link);
            }
            s.lose(1);
            cut_to.push(s.state.cwnd_bytes as f64 / bdp);
        }
        let (westwood, reno) = (cut_to[0], cut_to[1]);
        assert!((0.995..=1.005).contains(&westwood), "Westwood+ to {westwood:.3} BDP");
        assert!(reno <= 0.65, "Reno halves below the BDP, to {reno:.3} BDP");
    }
}
