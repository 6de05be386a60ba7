//! Measurement, as Linux does it: RTT samples only from never-retransmitted segments (Karn),
//! srtt/rttvar/min_rtt as RFC 6298, and delivery-rate samples as `net/ipv4/tcp_rate.c` (each
//! segment remembers the flow's delivered count and times when it was sent).

use super::scoreboard::Seg;
use super::{sent_after, SenderFlow};

/// The flow's state when a segment was (re)transmitted (`tcp_rate_skb_sent`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TxState {
    delivered: u64,
    delivered_ns: u64,
    first_tx_ns: u64,
}

/// One rate sample in the making (`struct rate_sample`).
#[derive(Debug, Default)]
pub(super) struct RateSample {
    prior_delivered: u64,
    prior_ns: u64,
    snd_interval_ns: u64,
    last_end: u64,
    valid: bool,
}

/// What one ACK delivered.
#[derive(Debug, Default)]
pub(super) struct Delivery {
    pub(super) acked_bytes: u64,
    pub(super) acked_pkts: u64,
    pub(super) delivered_bytes: u64,
    pub(super) delivered_pkts: u64,
    /// Send time of the newest newly delivered never-retransmitted segment.
    pub(super) rtt_sent_ns: Option<u64>,
    pub(super) rate: RateSample,
}

impl SenderFlow {
    pub(super) fn tx_state(&self) -> TxState {
        TxState { delivered: self.delivered, delivered_ns: self.delivered_ns, first_tx_ns: self.first_tx_ns }
    }

    pub(super) fn deliver(&mut self, seg: &mut Seg, now: u64, d: &mut Delivery) {
        let tx = seg.tx.take();
        self.record_delivery(seg.sent_ns, seg.end, seg.end - seg.start, seg.pkts, seg.retransmitted, tx, now, d);
    }

    /// A segment is newly delivered (cumulatively acknowledged or SACKed).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_delivery(
        &mut self,
        sent_ns: u64,
        end: u64,
        bytes: u64,
        pkts: u64,
        retransmitted: bool,
        tx: Option<TxState>,
        now: u64,
        d: &mut Delivery,
    ) {
        self.delivered += bytes;
        d.delivered_bytes += bytes;
        d.delivered_pkts += pkts;
        let rtt = now.saturating_sub(sent_ns);
        if !retransmitted {
            d.rtt_sent_ns = Some(d.rtt_sent_ns.map_or(sent_ns, |t| t.max(sent_ns)));
        }
        self.rack_advance(sent_ns, end, rtt, retransmitted);
        if let Some(tx) = tx {
            let rs = &mut d.rate;
            if !rs.valid || sent_after(sent_ns, self.first_tx_ns, end, rs.last_end) {
                rs.prior_delivered = tx.delivered;
                rs.prior_ns = tx.delivered_ns;
                rs.snd_interval_ns = sent_ns.saturating_sub(tx.first_tx_ns);
                rs.last_end = end;
                rs.valid = true;
                self.first_tx_ns = sent_ns;
            }
        }
    }

    pub(super) fn rtt_update(&mut self, rtt: u64) {
        self.last_rtt_ns = rtt;
        self.min_rtt_ns = self.min_rtt_ns.min(rtt);
        if self.srtt_ns == 0 {
            self.srtt_ns = rtt.max(1);
            self.rttvar_ns = rtt / 2;
        } else {
            let err = self.srtt_ns.abs_diff(rtt);
            self.rttvar_ns = (3 * self.rttvar_ns + err) / 4;
            self.srtt_ns = ((7 * self.srtt_ns + rtt) / 8).max(1);
        }
    }

    /// (rate_outgoing, rate_incoming) of this ACK in bytes/s, 0 = no sample; also updates
    /// the validated delivery rate (`tcp_rate_gen`).
    pub(super) fn rate_generate(&mut self, d: &Delivery, now: u64) -> (u64, u64) {
        let rs = &d.rate;
        if !rs.valid || d.delivered_bytes == 0 {
            return (0, 0);
        }
        let delta = self.delivered - rs.prior_delivered;
        let snd = rs.snd_interval_ns;
        let ack = now.saturating_sub(rs.prior_ns);
        let per_s = |interval: u64| {
            if interval == 0 { 0 } else { (u128::from(delta) * 1_000_000_000 / u128::from(interval)) as u64 }
        };
        let interval = snd.max(ack);
        // Shorter than a round trip: the ACKs were compressed, the sample overestimates.
        if interval > 0 && (self.min_rtt_ns == u64::MAX || interval >= self.min_rtt_ns) {
            self.delivery_rate = per_s(interval);
        }
        (per_s(snd), per_s(ack))
    }
}
