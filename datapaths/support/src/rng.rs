//! splitmix64: a small seedable generator for the datapaths' randomized tests (mutated frames,
//! random ACK sequences), so that a failing seed replays exactly. Not for anything secret.

pub struct SplitMix64(pub u64);

/// splitmix64's finaliser: a bijection of u64 whose every output bit depends on every input
/// bit. Also a hash for draws that must depend on a key alone (per-segment loss).
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl SplitMix64 {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform enough in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_replays_and_draws_stay_in_range() {
        let (mut a, mut b) = (SplitMix64(42), SplitMix64(42));
        let xs: Vec<u64> = (0..100).map(|_| a.below(7)).collect();
        assert_eq!(xs, (0..100).map(|_| b.below(7)).collect::<Vec<_>>());
        assert!(xs.iter().all(|&x| x < 7) && xs.iter().any(|&x| x != xs[0]));
    }
}
