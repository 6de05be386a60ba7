//! A deterministic fake sender for algorithm tests: it turns "ack n segments", "lose n",
//! "advance time", "change the RTT" into the [`Measurement`]s the agent would deliver.

use crate::{Algorithm, FlowState, Measurement};

pub const TEST_MSS_BYTES: u32 = 1448;

pub struct FakeSender {
    pub state: FlowState,
    pub algorithm: Box<dyn Algorithm>,
    pub rtt_us: u64,
    pub now_us: u64,
    /// Delivery rate reported with each ACK, bytes/s.
    pub delivery_rate_bytes_per_s: u64,
}

impl FakeSender {
    pub fn new(algorithm: Box<dyn Algorithm>, init_cwnd_segments: u32, rtt_ms: u64) -> Self {
        Self {
            state: FlowState::new(TEST_MSS_BYTES, init_cwnd_segments * TEST_MSS_BYTES),
            algorithm,
            rtt_us: rtt_ms * 1000,
            now_us: 0,
            delivery_rate_bytes_per_s: 0,
        }
    }

    pub fn mss(&self) -> u64 {
        u64::from(TEST_MSS_BYTES)
    }

    pub fn cwnd_segments(&self) -> f64 {
        self.state.cwnd_bytes as f64 / self.mss() as f64
    }

    pub fn advance_ms(&mut self, ms: u64) {
        self.now_us += ms * 1000;
    }

    pub fn set_rtt_ms(&mut self, ms: u64) {
        self.rtt_us = ms * 1000;
    }

    fn deliver(&mut self, m: Measurement) {
        self.state.observe(&m);
        self.algorithm.on_measurement(&mut self.state, &m);
    }

    fn base(&self) -> Measurement {
        Measurement {
            now_us: self.now_us,
            rtt_us: self.rtt_us,
            min_rtt_us: self.rtt_us,
            bytes_in_flight: self.state.cwnd_bytes,
            delivery_rate_bytes_per_s: self.delivery_rate_bytes_per_s,
            ..Default::default()
        }
    }

    /// One report acknowledging `n` segments.
    pub fn ack_segments(&mut self, n: u64) {
        let m = Measurement { acked_bytes: n * self.mss(), ..self.base() };
        self.deliver(m);
    }

    /// One RTT passes and the whole window is acknowledged in one report.
    pub fn ack_round(&mut self) {
        self.advance_ms(self.rtt_us / 1000);
        let segments = self.state.cwnd_bytes / self.mss();
        self.ack_segments(segments);
    }

    /// One report of `n` lost segments.
    pub fn lose(&mut self, n: u64) {
        let m = Measurement { lost_packets: n, ..self.base() };
        self.deliver(m);
    }

    /// One report of a retransmission timeout.
    pub fn timeout(&mut self) {
        let m = Measurement { timeout: true, ..self.base() };
        self.deliver(m);
    }
}
