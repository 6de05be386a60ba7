//! NewReno (RFC 5681, RFC 6582), as Linux's `tcp_reno_*` helpers do it.
//!
//! Slow start grows the window by the bytes acknowledged until ssthresh; congestion
//! avoidance adds one MSS per window of data acknowledged (one per RTT when the flow is
//! window-limited). A loss halves the window once per congestion event (`ssthresh =
//! max(cwnd/2, 2 MSS)`, `cwnd = ssthresh`); a retransmission timeout sets ssthresh the same
//! way and restarts from one segment, as `tcp_enter_loss` does (two here: the datapath's
//! floor), then slow-starts back to ssthresh. A loss is answered from the window grown by
//! the bytes its report acknowledges, in slow start (see [`FlowState::classify`]) and in
//! avoidance. The next step of avoidance is pre-set in the datapath ([`Reno::growth_step`]).
//!
//! Slow start is pre-set in the datapath ([`Reno::slow_start`]), which grows the window on
//! every ACK as Linux does, so Reno reports once per RTT throughout. Grown by the agent once
//! per RTT, each round grew by the one before it (1.6 times a round, not 2: a 2 MB transfer
//! on a 300-ms path took 1.29 times the kernel's Reno's time); reporting per ACK instead cost
//! a report and an answer per ACK and still lagged by the answer's delay.
//!
//! Taking over a running flow (MCC §3.1.1): Reno's only variable of its own is the
//! avoidance credit, which restarts at zero; the inherited window and `ssthresh = cwnd` put
//! the flow in congestion avoidance at once.

use crate::{Algorithm, AlgorithmInfo, FlowState, GrowthStep, Make, Measurement, SlowStart, WindowEvent};

pub const INFO: AlgorithmInfo = AlgorithmInfo {
    name: "reno",
    summary: "NewReno: slow start, +1 MSS per RTT, halve on loss",
    source: "RFC 5681, RFC 6582; Linux net/ipv4/tcp_cong.c (tcp_reno_*)",
    params: &[],
    make: Make::Simple(|_| Box::new(Reno::default())),
};

/// Multiplicative decrease on loss (Reno halves).
const BETA_NUM: u64 = 1;
const BETA_DEN: u64 = 2;
/// Window after a timeout, in segments (`tcp_enter_loss` restarts from one).
const LOSS_WINDOW_SEGMENTS: u64 = 1;

#[derive(Debug, Default)]
pub struct Reno {
    /// Bytes acknowledged in congestion avoidance not yet turned into window growth.
    ca_acked_bytes: u64,
}

impl Reno {
    /// Half the window in whole segments, as `tcp_reno_ssthresh` halves `snd_cwnd` (packets,
    /// rounded down). Halving bytes instead left a fraction of a segment that the datapath's
    /// window (whole segments) could not send but avoidance had to earn: a window of 6.2
    /// segments sends 6 a round and grows after 7 were acknowledged (at 1% loss on a 50-ms
    /// path, 0.83 segments per RTT against the kernel's 0.94).
    fn reduced_window(state: &FlowState) -> u64 {
        let mss = state.mss_bytes.max(1);
        (state.cwnd_bytes / mss * BETA_NUM / BETA_DEN * mss).max(state.min_cwnd_bytes())
    }

    fn congestion_avoidance(&mut self, state: &mut FlowState, acked_bytes: u64) {
        // Linux's tcp_cong_avoid_ai with w = cwnd: one MSS per cwnd bytes acknowledged.
        self.ca_acked_bytes += acked_bytes;
        if self.ca_acked_bytes >= state.cwnd_bytes {
            let segments = self.ca_acked_bytes / state.cwnd_bytes;
            self.ca_acked_bytes -= segments * state.cwnd_bytes;
            state.cwnd_bytes += segments * state.mss_bytes;
        }
    }
}

impl Algorithm for Reno {
    fn name(&self) -> &str {
        INFO.name
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        self.respond(state, m);
    }

    fn window_on_loss(&self, state: &FlowState) -> Option<u64> {
        (!state.in_recovery()).then(|| Self::reduced_window(state))
    }

    /// In congestion avoidance or recovering into it: one MSS once
    /// the credit reaches a window, as the next report's [`Reno::congestion_avoidance`] would
    /// grant it, after the bytes that end the recovery episode (no credit). Counting those in
    /// the step matters: the agent learns that an episode ended only from the report after it,
    /// up to a round late, where Linux starts counting on the ACK that ends it.
    fn growth_step(&self, state: &FlowState) -> Option<GrowthStep> {
        if state.in_slow_start() {
            return None;
        }
        let still_needed = state.cwnd_bytes.saturating_sub(self.ca_acked_bytes).max(1);
        Some(GrowthStep {
            after_bytes: state.recovery_bytes_left() + still_needed - 1,
            cwnd_bytes: state.cwnd_bytes + state.mss_bytes,
            acked_per_byte: 0,
            not_before_us: 0,
        })
    }

    fn slow_start(&self, state: &FlowState) -> Option<SlowStart> {
        state.slow_start_preset()
    }

    fn take_over(&mut self, _state: &mut FlowState) {
        *self = Self::default();
    }
}

impl Reno {
    fn respond(&mut self, state: &mut FlowState, m: &Measurement) {
        match state.classify(m) {
            WindowEvent::Timeout => {
                state.ssthresh_bytes = Self::reduced_window(state);
                state.cwnd_bytes =
                    (LOSS_WINDOW_SEGMENTS * state.mss_bytes).max(state.min_cwnd_bytes());
                self.ca_acked_bytes = 0;
            }
            WindowEvent::CongestionEvent { acked_bytes } => {
                // The ACKs before the loss earned their growth first, as Linux grows on each
                // (and the datapath on a pre-set step) before the ACK that reveals the loss
                // cuts.
                if acked_bytes > 0 {
                    self.congestion_avoidance(state, acked_bytes);
                }
                state.ssthresh_bytes = Self::reduced_window(state);
                state.cwnd_bytes = state.ssthresh_bytes;
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
    use crate::testing::FakeSender;
    use crate::Reporting;

    fn sender(init_cwnd: u32) -> FakeSender {
        FakeSender::new(Box::new(Reno::default()), init_cwnd, 50)
    }

    #[test]
    fn take_over_keeps_the_window_in_avoidance_with_a_fresh_credit() {
        let mut s = sender(10);
        s.ack_round();
        s.lose(1);
        s.ack_segments(20); // the 20 segments in flight at the loss: recovery over, 10 in avoidance
        s.ack_segments(9); // credit of 9 segments towards the next one
        s.state.ssthresh_bytes = u64::MAX; // as if the previous algorithm were in slow start
        s.state.prepare_handover();
        s.algorithm.take_over(&mut s.state);
        assert_eq!(s.cwnd_segments(), 10.0);
        assert!(!s.state.in_slow_start());
        s.ack_segments(9);
        assert_eq!(s.cwnd_segments(), 10.0, "the old credit is gone");
        s.ack_segments(1);
        assert_eq!(s.cwnd_segments(), 11.0);
    }

    #[test]
    fn slow_start_doubles_per_round() {
        let mut s = sender(10);
        for expected in [20.0, 40.0, 80.0] {
            s.ack_round();
            assert_eq!(s.cwnd_segments(), expected);
        }
    }

    #[test]
    fn loss_halves_and_avoidance_adds_one_mss_per_round() {
        let mut s = sender(10);
        for _ in 0..3 {
            s.ack_round();
        }
        s.lose(1);
        assert_eq!(s.cwnd_segments(), 40.0);
        assert_eq!(s.state.ssthresh_bytes, 40 * s.mss());
        s.ack_round(); // half of the 80 segments in flight at the loss: still recovering
        assert_eq!(s.cwnd_segments(), 40.0);
        s.ack_round(); // the other half: recovery ends, and its ACKs are no growth credit
        assert_eq!(s.cwnd_segments(), 40.0);
        for i in 1..=5 {
            s.ack_round();
            assert_eq!(s.cwnd_segments(), 40.0 + i as f64);
        }
    }

    #[test]
    fn one_reduction_per_window_of_data() {
        let mut s = sender(32);
        s.ack_round();
        s.lose(1); // 64 segments in flight
        s.advance_ms(10);
        s.lose(3);
        assert_eq!(s.cwnd_segments(), 32.0, "losses from the same window are the same event");
        s.advance_ms(100);
        s.ack_segments(60);
        let cwnd = s.state.cwnd_bytes;
        s.lose(1);
        assert_eq!(s.state.cwnd_bytes, cwnd, "the window in flight at the loss is not yet acked");
        s.ack_segments(4);
        s.lose(1);
        assert_eq!(s.state.cwnd_bytes, cwnd / 2, "once it is, a loss is a new event");
    }

    /// Counting every byte delivered, recovery runs out early when a segment sent during it
    /// is delivered in place of an old one that was lost too; that loss, revealed a segment
    /// or two later, is the same event (Linux's `snd_una` has not passed it), while a loss
    /// reported with a round of new data past the count is a new one.
    #[test]
    fn a_second_hole_in_the_old_data_is_the_same_event_even_past_the_count() {
        let mut s = sender(10);
        s.ack_round(); // 20 segments
        s.lose_with_in_flight(1, 6);
        assert_eq!(s.cwnd_segments(), 10.0);
        s.ack_and_lose(8, 1); // 6 counted, 2 past the count, then the second hole
        assert_eq!(s.cwnd_segments(), 10.0, "not cut twice");
        assert!(s.state.in_recovery(), "until the second hole's retransmission is delivered");
        s.ack_segments(10);
        assert!(!s.state.in_recovery());
        s.ack_segments(5);
        s.ack_and_lose(12, 1); // no count left: a new event
        assert_eq!(s.cwnd_segments(), 5.0);
        s.ack_and_lose(10, 1); // 10 segments in flight at the loss: 10 counted, none past it
        assert_eq!(s.cwnd_segments(), 5.0);
        s.ack_and_lose(5 + 10, 1); // a round of new data past the count: a new event, from the
        assert_eq!(s.cwnd_segments(), 3.0, "window grown by those 10 segments (7), halved");
    }

    /// Told by the sender's kernel where its window reductions begin and end, the episodes
    /// follow its: a loss inside the kernel's running Recovery is no new event however much was
    /// delivered past the count, one that began a new Recovery is one before the count runs
    /// out, and the episode ends with the kernel's.
    #[test]
    fn the_senders_reductions_decide_the_episodes() {
        let mut s = sender(10);
        s.sender_leaves_reduction();
        s.ack_round(); // 20 segments
        s.sender_enters_reduction();
        s.lose_with_in_flight(1, 6);
        assert_eq!(s.cwnd_segments(), 10.0);
        s.ack_and_lose(6 + 20, 1); // a round past the count, the kernel still in that Recovery
        assert_eq!(s.cwnd_segments(), 10.0, "not cut inside the kernel's reduction");
        assert!(s.state.in_recovery(), "the episode extended");
        s.ack_segments(2);
        assert!(s.state.in_recovery());
        s.sender_enters_reduction();
        s.ack_and_lose(1, 1);
        assert_eq!(s.cwnd_segments(), 5.0, "cut where the kernel entered its next reduction");
        s.ack_segments(1);
        assert!(s.state.in_recovery());
        s.sender_leaves_reduction();
        s.ack_segments(1);
        assert!(!s.state.in_recovery(), "over when the kernel's is, the count not run out");
        s.lose(1);
        assert_eq!(s.cwnd_segments(), 5.0, "a loss outside any reduction (the Loss state) cuts nothing");
        assert!(!s.state.in_recovery(), "nor holds");
        s.sender_enters_reduction(); // ECN's CWR: Reno does not answer ECN
        s.ack_segments(1);
        assert_eq!(s.cwnd_segments(), 5.0);
        s.lose(1);
        assert_eq!(s.cwnd_segments(), 2.0, "answered at the next loss, inside the CWR that took it in");
    }

    #[test]
    fn window_holds_during_recovery() {
        let mut s = sender(20);
        s.ack_round();
        s.lose(1); // 40 segments in flight: recovery until they are acknowledged
        assert_eq!(s.cwnd_segments(), 20.0);
        s.ack_segments(39);
        assert_eq!(s.cwnd_segments(), 20.0, "no growth while recovering");
        s.ack_segments(1);
        assert_eq!(s.cwnd_segments(), 20.0);
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 21.0, "congestion avoidance resumes once recovery ends");
    }

    #[test]
    fn timeout_restarts_from_minimum_and_slow_starts_to_half() {
        let mut s = sender(40);
        s.ack_round();
        s.timeout();
        assert_eq!(s.cwnd_segments(), 2.0);
        assert_eq!(s.state.ssthresh_bytes, 40 * s.mss());
        for _ in 0..4 {
            s.ack_round();
        }
        assert_eq!(s.cwnd_segments(), 32.0);
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 40.0, "slow start stops at ssthresh");
        s.ack_round();
        assert_eq!(s.cwnd_segments(), 41.0);
    }

    /// Linux grows the window on every ACK of slow start, so when the ACK that marks a loss
    /// arrives the window already holds the growth of the ACKs before it, and
    /// `tcp_reno_ssthresh` halves that (T-Mobile LTE: 453 segments at the loss, ssthresh 226).
    #[test]
    fn a_loss_in_slow_start_halves_the_window_grown_by_the_acks_before_it() {
        let mut s = sender(10);
        s.ack_round();
        s.ack_round(); // 40 segments
        s.ack_and_lose(30, 2); // Linux: 40 + 30 = 70 at the loss
        assert_eq!(s.state.ssthresh_bytes, 35 * s.mss());
        assert_eq!(s.cwnd_segments(), 35.0);
        s.ack_and_lose(10, 3);
        assert_eq!(s.cwnd_segments(), 35.0, "the same episode: no growth, no second halving");
    }

    /// The window through one loss episode in congestion avoidance, as Linux's Reno: halved
    /// once at the loss (ssthresh = cwnd/2 of the window, not of what is in flight), held
    /// while the data in flight at the loss is acknowledged (those ACKs go to the rate
    /// reduction, not to growth), then +1 segment per window acknowledged after recovery.
    #[test]
    fn a_loss_episode_in_avoidance_follows_linux_reno() {
        let mut s = sender(10);
        s.ack_round();
        s.lose(1); // 20 segments in flight
        assert_eq!((s.cwnd_segments(), s.state.ssthresh_bytes / s.mss()), (10.0, 10));
        s.ack_segments(19);
        assert_eq!(s.cwnd_segments(), 10.0, "held while recovering");
        s.ack_segments(1 + 10); // the last of the 20 ends recovery; 10 acknowledged after it
        assert_eq!(s.cwnd_segments(), 11.0);
        for expected in [12.0, 13.0, 14.0] {
            s.ack_round();
            assert_eq!(s.cwnd_segments(), expected);
        }
        s.ack_and_lose(5, 1); // avoidance's bytes before a loss do not slow-start
        assert_eq!((s.cwnd_segments(), s.state.ssthresh_bytes / s.mss()), (7.0, 7));
        s.ack_segments(13);
        assert_eq!(s.cwnd_segments(), 7.0);
        s.ack_segments(1 + 6);
        assert_eq!(s.cwnd_segments(), 7.0, "6 segments after recovery: no growth yet");
        s.ack_segments(1);
        assert_eq!(s.cwnd_segments(), 8.0);
    }

    /// Linux's Recovery ends on the ACK that takes `snd_una` past what was sent at the loss:
    /// once what was in flight then (SACKed and lost segments excluded) has been delivered,
    /// the retransmission of the last lost segment ends it, and that ACK's segment is the
    /// first of avoidance's credit.
    #[test]
    fn recovery_ends_once_what_was_in_flight_and_the_lost_segments_are_delivered() {
        let mut s = sender(10);
        s.ack_round(); // 20 segments
        s.lose_with_in_flight(1, 16); // 3 SACKed, 1 lost
        assert_eq!(s.cwnd_segments(), 10.0);
        s.ack_segments(16);
        assert!(!s.state.in_recovery(), "the retransmission comes next and ends recovery");
        s.ack_segments(9); // the retransmission and 8 more: 9 of the 10 that earn a segment
        assert_eq!(s.cwnd_segments(), 10.0);
        s.ack_segments(1);
        assert_eq!(s.cwnd_segments(), 11.0);

        s.ack_round();
        s.ack_round(); // 13 segments
        s.lose_with_in_flight(3, 8); // 2 SACKed, 3 lost: 8 + 2 retransmissions in recovery
        assert_eq!(s.cwnd_segments(), 6.0);
        s.ack_segments(9);
        assert!(s.state.in_recovery());
        s.ack_segments(1);
        assert!(!s.state.in_recovery());
    }

    #[test]
    fn slow_start_is_pre_set_while_the_window_binds_and_after_a_timeout() {
        let mut s = sender(10);
        s.ack_round();
        assert_eq!(s.reporting(), Reporting::PerRtt, "the datapath grows the window per ACK");
        let preset = |s: &FakeSender| s.algorithm.slow_start(&s.state);
        assert_eq!(preset(&s), Some(SlowStart { cwnd_bytes: 20 * s.mss(), until_bytes: u64::MAX }));
        assert_eq!(s.algorithm.growth_step(&s.state), None);
        s.lose(1);
        assert_eq!(preset(&s), None, "a congestion event ends slow start");
        s.ack_segments(20); // recovery over at 10 segments
        s.ack_round();
        s.ack_round(); // 12 segments in avoidance
        assert_eq!(preset(&s), None);
        s.timeout();
        assert_eq!(s.cwnd_segments(), 2.0);
        assert_eq!(preset(&s), Some(SlowStart { cwnd_bytes: 2 * s.mss(), until_bytes: 6 * s.mss() }));
        for expected in 3..=6 {
            s.ack_segments(1);
            assert_eq!(s.cwnd_segments(), expected as f64, "one segment per segment acknowledged");
        }
        assert_eq!(preset(&s), None, "back at ssthresh");
        assert!(s.algorithm.growth_step(&s.state).is_some(), "avoidance's step instead");
    }

    #[test]
    fn window_never_below_two_segments() {
        let mut s = sender(2);
        for _ in 0..5 {
            s.ack_round();
            s.lose(1);
        }
        assert_eq!(s.cwnd_segments(), 2.0);
    }
}
