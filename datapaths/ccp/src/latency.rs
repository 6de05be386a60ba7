//! Report → directive latency: how long after the ACK that triggered a report the agent's
//! answer to it reached the shim. A log-linear histogram (8 sub-buckets per power of two,
//! so a quantile is exact below 8 µs and within 12.5% above) that costs one increment per
//! answer and a fixed 4 KB.

/// Sub-buckets per power of two.
const SUB: usize = 8;
const SUB_BITS: u32 = 3;
const BUCKETS: usize = SUB * (64 - SUB_BITS as usize + 1);

#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self { counts: vec![0; BUCKETS], total: 0 }
    }
}

fn bucket(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let exp = 63 - us.leading_zeros(); // >= SUB_BITS
    let sub = ((us >> (exp - SUB_BITS)) as usize) & (SUB - 1);
    (exp - SUB_BITS + 1) as usize * SUB + sub
}

/// The largest value that falls in bucket `b`.
fn upper_edge(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let exp = (b / SUB) as u32 + SUB_BITS - 1;
    let sub = (b % SUB) as u64;
    let low = (1u64 << exp) + (sub << (exp - SUB_BITS));
    low + ((1u64 << (exp - SUB_BITS)) - 1) // the last bucket ends at u64::MAX
}

impl LatencyHistogram {
    pub fn record(&mut self, us: u64) {
        self.counts[bucket(us)] += 1;
        self.total += 1;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `q`-quantile (0..=1) in µs, as its bucket's upper edge; `None` when empty.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(upper_edge(b));
            }
        }
        unreachable!("rank <= total")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_in_order_within_an_eighth() {
        let mut last = 0;
        for us in (0..100_000u64).chain([u64::MAX / 2, u64::MAX]) {
            let b = bucket(us);
            assert!(b >= last && b < BUCKETS, "{us}");
            last = b;
            let edge = upper_edge(b);
            assert!(edge >= us && (edge - us) as f64 <= us as f64 / 8.0 + 1.0, "{us} -> {edge}");
        }
    }

    #[test]
    fn quantiles_of_a_known_distribution() {
        let mut h = LatencyHistogram::default();
        assert_eq!(h.quantile(0.5), None);
        for us in 1..=1000 {
            h.record(us);
        }
        assert_eq!(h.count(), 1000);
        let within = |got: u64, want: u64| got >= want && got <= want + want / 8;
        assert!(within(h.quantile(0.5).unwrap(), 500));
        assert!(within(h.quantile(0.99).unwrap(), 990));
        assert!(within(h.quantile(1.0).unwrap(), 1000));
        assert_eq!(h.quantile(0.0), Some(1));
    }
}
