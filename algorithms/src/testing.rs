//! A deterministic fake sender for algorithm tests: it turns "ack n segments", "lose n",
//! "advance time", "change the RTT" into the [`Measurement`]s the agent would deliver, and
//! can run whole round trips over a modelled bottleneck [`Link`] (bandwidth, base RTT, a
//! drop-tail queue, optionally random or periodic non-congestive loss) for algorithms that
//! react to delay and delivery rate. [`FakeSender::hand_over_to`] hands the flow to another
//! algorithm mid-flow exactly as the agent does.

use crate::{Algorithm, FlowState, Measurement, SenderReductions};

pub const TEST_MSS_BYTES: u32 = 1448;

pub struct FakeSender {
    pub state: FlowState,
    pub algorithm: Box<dyn Algorithm>,
    pub rtt_us: u64,
    pub now_us: u64,
    /// Delivery rate reported with each ACK, bytes/s.
    pub delivery_rate_bytes_per_s: u64,
    /// Packets put on links so far: the index of a packet in a link's loss pattern.
    pub link_packets: u64,
    /// The window reductions a datapath in the sender's kernel reports with each measurement
    /// (`None`: a datapath that cannot know).
    pub sender_reductions: Option<SenderReductions>,
}

impl FakeSender {
    pub fn new(algorithm: Box<dyn Algorithm>, init_cwnd_segments: u32, rtt_ms: u64) -> Self {
        Self {
            state: FlowState::new(TEST_MSS_BYTES, init_cwnd_segments * TEST_MSS_BYTES),
            algorithm,
            rtt_us: rtt_ms * 1000,
            now_us: 0,
            delivery_rate_bytes_per_s: 0,
            link_packets: 0,
            sender_reductions: None,
        }
    }

    /// `algorithm` after `rounds` round trips over a 20 Mbit/s, 40-ms link with a quarter BDP
    /// of buffer (losses every few rounds): slow start, losses, recoveries and avoidance, for
    /// checks on every round of a lossy flow.
    pub fn after_rounds_on_a_lossy_link(algorithm: Box<dyn Algorithm>, rounds: usize) -> Self {
        let link = Link::new(20, 40, 25_000);
        let mut s = Self::new(algorithm, 10, 40);
        for _ in 0..rounds {
            s.round_on_link(&link);
        }
        s
    }

    /// Hand the flow to `next` mid-flow, as the agent does (MCC §3.1.1): the shared state is
    /// prepared for a handover, `next` takes it over, and it gets the following reports.
    /// Returns the algorithm that ran until now.
    pub fn hand_over_to(&mut self, mut next: Box<dyn Algorithm>) -> Box<dyn Algorithm> {
        self.algorithm.hand_over(&mut self.state);
        self.state.prepare_handover();
        next.take_over(&mut self.state);
        std::mem::replace(&mut self.algorithm, next)
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
        self.algorithm.on_report(&mut self.state, &m);
    }

    fn base(&self) -> Measurement {
        Measurement {
            now_us: self.now_us,
            rtt_us: self.rtt_us,
            min_rtt_us: self.rtt_us,
            bytes_in_flight: self.state.cwnd_bytes,
            delivery_rate_bytes_per_s: self.delivery_rate_bytes_per_s,
            sender_reductions: self.sender_reductions,
            ..Default::default()
        }
    }

    /// One report acknowledging `n` segments.
    pub fn ack_segments(&mut self, n: u64) {
        let m = Measurement { acked_bytes: n * self.mss(), ..self.base() };
        self.deliver(m);
    }

    /// One report acknowledging `bytes` (not necessarily whole segments).
    pub fn ack_bytes(&mut self, bytes: u64) {
        let m = Measurement { acked_bytes: bytes, ..self.base() };
        self.deliver(m);
    }

    /// One report acknowledging `n` segments of a flow its application holds back: only
    /// `in_flight` segments remain outstanding after them, whatever the window allows.
    pub fn ack_segments_held_back(&mut self, n: u64, in_flight: u64) {
        let m = Measurement {
            acked_bytes: n * self.mss(),
            bytes_in_flight: in_flight * self.mss(),
            ..self.base()
        };
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

    /// One report of `lost` segments marked lost on an ACK after which `in_flight` segments
    /// are in flight, as Linux counts them (neither SACKed nor lost).
    pub fn lose_with_in_flight(&mut self, lost: u64, in_flight: u64) {
        let m = Measurement { lost_packets: lost, bytes_in_flight: in_flight * self.mss(), ..self.base() };
        self.deliver(m);
    }

    /// One report acknowledging `acked` segments whose last ACK marks `lost` segments lost,
    /// as the datapath sends it: at once on the ACK that reveals the loss.
    pub fn ack_and_lose(&mut self, acked: u64, lost: u64) {
        let m = Measurement { acked_bytes: acked * self.mss(), lost_packets: lost, ..self.base() };
        self.deliver(m);
    }

    /// The sender's TCP enters a window reduction (it says so from now on).
    pub fn sender_enters_reduction(&mut self) {
        let entered = self.sender_reductions.map_or(0, |r| r.entered);
        self.sender_reductions = Some(SenderReductions { entered: entered + 1, in_reduction: true });
    }

    /// The sender's TCP leaves its window reduction (it says so from now on).
    pub fn sender_leaves_reduction(&mut self) {
        let entered = self.sender_reductions.map_or(0, |r| r.entered);
        self.sender_reductions = Some(SenderReductions { entered, in_reduction: false });
    }

    /// How often the algorithm wants reports now.
    pub fn reporting(&self) -> crate::Reporting {
        self.algorithm.reporting()
    }

    /// One round trip over `link`: the sender puts its window (or, if it paces, what its rate
    /// allows in one RTT) on the link; what exceeds the path's BDP queues, adding delay; what
    /// exceeds the queue is dropped, and of the rest the link's [`LinkLoss`] pattern loses
    /// some more. One report then acknowledges what was delivered, with the queueing delay in
    /// its RTT, the delivery rate, and all losses.
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
        let carried = sent - dropped;
        let carried_packets = carried.div_ceil(mss);
        let random_lost = link.loss.lost_among(self.link_packets, carried_packets);
        self.link_packets += carried_packets;
        let delivered = carried.saturating_sub(random_lost * mss);
        let lost_packets = dropped.div_ceil(mss) + random_lost;
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
        LinkRound { sent_bytes: sent, delivered_bytes: delivered, queue_bytes: queue, lost_packets, rtt_us }
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
    /// Non-congestive loss of packets that got through the queue.
    pub loss: LinkLoss,
}

impl Link {
    pub fn new(mbit_per_s: u64, base_rtt_ms: u64, buffer_bytes: u64) -> Self {
        Self {
            bandwidth_bytes_per_s: mbit_per_s * 1_000_000 / 8,
            base_rtt_us: base_rtt_ms * 1000,
            buffer_bytes,
            loss: LinkLoss::None,
        }
    }

    pub fn with_loss(self, loss: LinkLoss) -> Self {
        Self { loss, ..self }
    }

    pub fn bdp_bytes(&self) -> u64 {
        (self.bandwidth_bytes_per_s as u128 * self.base_rtt_us as u128 / 1_000_000) as u64
    }
}

/// What happened during one [`FakeSender::round_on_link`].
#[derive(Clone, Copy, Debug)]
pub struct LinkRound {
    pub sent_bytes: u64,
    /// What reached the receiver: sent less queue overflow and non-congestive losses.
    pub delivered_bytes: u64,
    pub queue_bytes: u64,
    pub lost_packets: u64,
    pub rtt_us: u64,
}

/// Non-congestive loss on a [`Link`] (a lossy radio hop, say), decided per packet by the
/// packet's index among all packets a sender has put on links, so runs are reproducible.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum LinkLoss {
    #[default]
    None,
    /// Packets `n − 1`, `2n − 1`, ... are lost (one in `n`).
    EveryNth(u64),
    /// Each packet is lost with probability `per_million / 10⁶`, drawn from `seed`.
    Random { per_million: u32, seed: u64 },
}

impl LinkLoss {
    /// How many of the `count` packets from index `first` on are lost.
    pub fn lost_among(&self, first: u64, count: u64) -> u64 {
        (first..first + count).filter(|&index| self.loses(index)).count() as u64
    }

    fn loses(&self, index: u64) -> bool {
        match *self {
            LinkLoss::None => false,
            LinkLoss::EveryNth(n) => n > 0 && (index + 1).is_multiple_of(n),
            LinkLoss::Random { per_million, seed } => {
                splitmix64(seed ^ splitmix64(index)) % 1_000_000 < u64::from(per_million)
            }
        }
    }
}

/// SplitMix64's output function: a well-mixed 64-bit hash of `x` (a counter-based generator).
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_loss_loses_one_in_n() {
        let loss = LinkLoss::EveryNth(25);
        assert_eq!(loss.lost_among(0, 24), 0);
        assert_eq!(loss.lost_among(0, 25), 1);
        assert_eq!(loss.lost_among(24, 1), 1);
        assert_eq!(loss.lost_among(0, 2500), 100);
        assert_eq!(LinkLoss::None.lost_among(0, 1000), 0);
    }

    #[test]
    fn random_loss_has_its_rate_and_is_reproducible() {
        let loss = LinkLoss::Random { per_million: 40_000, seed: 7 };
        let lost = loss.lost_among(0, 100_000);
        assert!((3_700..=4_300).contains(&lost), "4% of 100000 packets: {lost}");
        assert_eq!(loss.lost_among(0, 100_000), lost, "same seed, same losses");
        let other = LinkLoss::Random { per_million: 40_000, seed: 8 };
        let same_pattern = (0..1000).filter(|&i| other.loses(i) == loss.loses(i)).count();
        assert!(same_pattern < 1000, "another seed draws other losses");
    }

    #[test]
    fn a_lossy_link_delivers_less_and_reports_the_losses() {
        struct Fixed;
        impl Algorithm for Fixed {
            fn name(&self) -> &str {
                "fixed"
            }
            fn on_report(&mut self, _: &mut FlowState, _: &Measurement) {}
        }
        // 12 Mbit/s, 10 ms: a 15 000-byte BDP; a 10-segment window fits without queueing.
        let link = Link::new(12, 10, 0).with_loss(LinkLoss::EveryNth(4));
        let mut s = FakeSender::new(Box::new(Fixed), 10, 10);
        let r = s.round_on_link(&link);
        assert_eq!((r.sent_bytes, r.lost_packets), (10 * s.mss(), 2));
        assert_eq!(r.delivered_bytes, 8 * s.mss());
        let r = s.round_on_link(&link); // packets 10..20: 11, 15, 19 lost
        assert_eq!(r.lost_packets, 3);
        assert_eq!(s.link_packets, 20);
    }
}
