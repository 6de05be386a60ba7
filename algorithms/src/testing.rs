//! A deterministic fake sender for algorithm tests: it turns "ack n segments", "lose n",
//! "advance time", "change the RTT" into the [`Measurement`]s the agent would deliver, and
//! can run whole round trips over a modelled bottleneck [`Link`] (bandwidth, base RTT, a
//! drop-tail queue) for algorithms that react to delay and delivery rate.

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

    /// One round trip over `link`: the sender puts its window (or, if it paces, what its rate
    /// allows in one RTT) on the link; what exceeds the path's BDP queues, adding delay; what
    /// exceeds the queue is dropped. One report then acknowledges what was delivered, with
    /// the queueing delay in its RTT, the delivery rate, and the drops as losses.
    pub fn round_on_link(&mut self, link: &Link) -> LinkRound {
        let mss = self.mss();
        let bdp = link.bdp_bytes();
        let mut sent = self.state.cwnd_bytes;
        if let Some(rate) = self.state.pacing_rate_bytes_per_s {
            let rtt_us = self.rtt_us.max(link.base_rtt_us);
            sent = sent.min((rate as u128 * rtt_us as u128 / 1_000_000) as u64).max(mss);
        }
        let queued = sent.saturating_sub(bdp);
        let dropped = queued.saturating_sub(link.buffer_bytes);
        let queue = queued - dropped;
        let rtt_us = link.base_rtt_us + queue * 1_000_000 / link.bandwidth_bytes_per_s.max(1);
        let delivered = sent - dropped;
        let lost_packets = dropped.div_ceil(mss);
        self.rtt_us = rtt_us;
        self.now_us += rtt_us;
        let delivery_rate = (delivered as u128 * 1_000_000 / rtt_us.max(1) as u128) as u64;
        self.delivery_rate_bytes_per_s = delivery_rate.min(link.bandwidth_bytes_per_s);
        let m = Measurement {
            acked_bytes: delivered,
            lost_packets,
            bytes_in_flight: sent,
            ..self.base()
        };
        self.deliver(m);
        LinkRound { sent_bytes: sent, queue_bytes: queue, lost_packets, rtt_us }
    }

    /// One report of a retransmission timeout.
    pub fn timeout(&mut self) {
        let m = Measurement { timeout: true, ..self.base() };
        self.deliver(m);
    }
}

/// A bottleneck for [`FakeSender::round_on_link`].
#[derive(Clone, Copy, Debug)]
pub struct Link {
    pub bandwidth_bytes_per_s: u64,
    pub base_rtt_us: u64,
    /// Drop-tail queue beyond the path's BDP, bytes.
    pub buffer_bytes: u64,
}

impl Link {
    pub fn new(mbit_per_s: u64, base_rtt_ms: u64, buffer_bytes: u64) -> Self {
        Self {
            bandwidth_bytes_per_s: mbit_per_s * 1_000_000 / 8,
            base_rtt_us: base_rtt_ms * 1000,
            buffer_bytes,
        }
    }

    pub fn bdp_bytes(&self) -> u64 {
        (self.bandwidth_bytes_per_s as u128 * self.base_rtt_us as u128 / 1_000_000) as u64
    }
}

/// What happened during one [`FakeSender::round_on_link`].
#[derive(Clone, Copy, Debug)]
pub struct LinkRound {
    pub sent_bytes: u64,
    pub queue_bytes: u64,
    pub lost_packets: u64,
    pub rtt_us: u64,
}
