//! A xorshift64 generator (Marsaglia, 2003): the seeded, reproducible stream behind the
//! synthetic reports and inputs of the agent's `--bench-reports`, the selector's benchmark and
//! tests. Not for anything that needs real randomness.

pub struct XorShift64(u64);

impl XorShift64 {
    /// A generator starting from `seed` (0 would stay 0, so it is made odd).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number from 0 to `bound - 1` (a modulo: slightly uneven, which no caller minds).
    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    /// A number in [0, `hi`), from the top 53 bits.
    pub fn uniform(&mut self, hi: f64) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * hi
    }
}
