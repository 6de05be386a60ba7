//! Features of one flow, computed from the reports of the agent's standard datapath program.
//!
//! The selector's rules (Mystique's Table I, MCC's WiFi rule) look at a flow's path through a
//! few statistics of its recent measurements. A [`FeatureTracker`] keeps them for one flow:
//!
//! - **RTT statistics** (min, mean, max, population standard deviation, coefficient of
//!   variation = std / mean, normalised range = (max - min) / mean) over the RTT samples in
//!   the window. A report carries one RTT sample when `rtt_us > 0`.
//! - **Loss rate** = lost packets / (acknowledged packets + lost packets) over the reports in
//!   the window, a report's acknowledged packets being `ceil(acked_bytes / mss)`.
//! - **Delivery rate**: the latest sample and the largest one in the window.
//! - **Bytes** acknowledged and **time** elapsed (datapath clock) since the flow's first
//!   report, over the whole flow whatever the window.
//!
//! The window counts RTT samples, at most one per round trip: a report's RTT sample opens a
//! new slot only once that RTT has elapsed since the previous slot opened. The standard
//! program's per-RTT reports each open one; reports that come sooner (per-ACK reports, as BBR's
//! Startup asks for, or reports sent at once on loss) add their acknowledgements, losses and
//! rates to the pending slot and drop their RTT sample, so a window of N samples covers N round
//! trips whatever the algorithm's reporting. Each slot holds one RTT sample plus the losses,
//! acknowledgements and rate samples of the reports since the previous slot, so loss and rate
//! cover the same stretch of the flow as the RTTs. Reports after the newest slot wait in a
//! pending slot that the statistics already include. Two kinds of window:
//!
//! - [`FeatureWindow::FirstSamples`]`(N)`: the first N samples of the flow (MCC decides "within
//!   the first N samples"); once full, the window statistics freeze.
//! - [`FeatureWindow::Sliding`]`(N)`: the last N samples, for decisions that follow the path.
//!
//! `observe` is O(1) and never allocates (the ring is allocated once); `features` is O(N),
//! two passes over the ring so the variance does not suffer from cancellation.

use ccswitch_algorithms::Measurement;
use serde::Serialize;

const US_PER_MS: f64 = 1_000.0;
const US_PER_S: f64 = 1_000_000.0;
const BITS_PER_BYTE: f64 = 8.0;
const BITS_PER_MEGABIT: f64 = 1_000_000.0;

/// More samples than this would make every report's O(window) work noticeable.
pub const MAX_WINDOW_SAMPLES: usize = 10_000;

/// Which of a flow's RTT samples the window statistics cover.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FeatureWindow {
    /// The flow's first N samples; later reports do not change the window statistics.
    FirstSamples(usize),
    /// The last N samples.
    Sliding(usize),
}

impl FeatureWindow {
    /// The window of a policy or model file: `kind` is "first" or "sliding", `samples` 1 to
    /// [`MAX_WINDOW_SAMPLES`].
    pub fn from_kind(kind: &str, samples: usize) -> Result<Self, String> {
        if !(1..=MAX_WINDOW_SAMPLES).contains(&samples) {
            return Err(format!("samples = {samples}: must be between 1 and {MAX_WINDOW_SAMPLES}"));
        }
        match kind {
            "first" => Ok(FeatureWindow::FirstSamples(samples)),
            "sliding" => Ok(FeatureWindow::Sliding(samples)),
            other => Err(format!("kind = {other:?}: must be \"first\" or \"sliding\"")),
        }
    }

    /// "first" or "sliding", as files name it.
    pub fn kind(self) -> &'static str {
        match self {
            FeatureWindow::FirstSamples(_) => "first",
            FeatureWindow::Sliding(_) => "sliding",
        }
    }

    /// How many RTT samples fill the window (at least 1).
    pub fn samples(self) -> usize {
        match self {
            FeatureWindow::FirstSamples(n) | FeatureWindow::Sliding(n) => n.max(1),
        }
    }
}

impl std::fmt::Display for FeatureWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FeatureWindow::FirstSamples(n) => write!(f, "first {n} samples"),
            FeatureWindow::Sliding(n) => write!(f, "last {n} samples"),
        }
    }
}

/// What the selector's rules see of a flow. Times in ms or s, rates in Mbit/s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Features {
    pub min_rtt_ms: f64,
    pub mean_rtt_ms: f64,
    pub max_rtt_ms: f64,
    /// Population standard deviation of the RTT samples.
    pub rtt_std_ms: f64,
    /// Coefficient of variation, std / mean (0 without samples).
    pub rtt_cov: f64,
    /// (max - min) / mean (0 without samples).
    pub rtt_norm_range: f64,
    /// Lost packets / (acknowledged packets + lost packets).
    pub loss_rate: f64,
    /// The latest delivery-rate sample in the window.
    pub delivery_rate_mbps: f64,
    pub max_delivery_rate_mbps: f64,
    /// Bytes acknowledged since the flow began.
    pub bytes: f64,
    /// Seconds since the flow's first report, datapath clock.
    pub elapsed_s: f64,
    /// RTT samples in the window.
    pub samples: u64,
}

impl Features {
    /// Every feature's name, in the order of [`Features::at`]; rules refer to them by name.
    pub const NAMES: [&'static str; 12] = [
        "min_rtt_ms",
        "mean_rtt_ms",
        "max_rtt_ms",
        "rtt_std_ms",
        "rtt_cov",
        "rtt_norm_range",
        "loss_rate",
        "delivery_rate_mbps",
        "max_delivery_rate_mbps",
        "bytes",
        "elapsed_s",
        "samples",
    ];

    /// The feature called `name`, `None` for an unknown name.
    pub fn get(&self, name: &str) -> Option<f64> {
        Self::index_of(name).map(|i| self.at(i))
    }

    /// The position of `name` in [`Features::NAMES`].
    pub fn index_of(name: &str) -> Option<usize> {
        Self::NAMES.iter().position(|n| *n == name)
    }

    /// The feature at position `index` of [`Features::NAMES`] (rules resolve names once, at
    /// load time, and read by position on every report).
    pub fn at(&self, index: usize) -> f64 {
        match index {
            0 => self.min_rtt_ms,
            1 => self.mean_rtt_ms,
            2 => self.max_rtt_ms,
            3 => self.rtt_std_ms,
            4 => self.rtt_cov,
            5 => self.rtt_norm_range,
            6 => self.loss_rate,
            7 => self.delivery_rate_mbps,
            8 => self.max_delivery_rate_mbps,
            9 => self.bytes,
            10 => self.elapsed_s,
            11 => self.samples as f64,
            _ => panic!("feature index {index} out of range (there are {})", Self::NAMES.len()),
        }
    }
}

/// One RTT sample and what the reports up to it (since the previous sample) measured. A flow
/// keeps a window of them, so the RTT and packet counts take 32 bits, saturating (71 minutes,
/// 4 billion packets within one round trip): 32 bytes a sample rather than 40.
#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// 0 in the pending slot, which has no RTT sample yet.
    rtt_us: u32,
    acked_packets: u32,
    lost_packets: u32,
    /// The slot's latest and largest delivery-rate samples, bytes/s (0: none).
    latest_rate: u64,
    max_rate: u64,
}

const _: () = assert!(std::mem::size_of::<Slot>() == 32);

/// `v` in 32 bits, the largest value standing for anything larger.
fn saturated(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl Slot {
    fn absorb(&mut self, m: &Measurement, mss_bytes: u64) {
        self.acked_packets = self.acked_packets.saturating_add(saturated(m.acked_bytes.div_ceil(mss_bytes)));
        self.lost_packets = self.lost_packets.saturating_add(saturated(m.lost_packets));
        if m.delivery_rate_bytes_per_s > 0 {
            self.latest_rate = m.delivery_rate_bytes_per_s;
            self.max_rate = self.max_rate.max(m.delivery_rate_bytes_per_s);
        }
    }
}

/// The features of one flow, updated report by report.
#[derive(Clone, Debug)]
pub struct FeatureTracker {
    window: FeatureWindow,
    /// Ring of the window's samples; once full, `next` is the oldest (next to overwrite).
    slots: Vec<Slot>,
    next: usize,
    /// Reports since the newest slot.
    pending: Slot,
    /// When the newest slot opened (datapath clock, µs).
    slot_opened_us: Option<u64>,
    total_acked_bytes: u64,
    first_us: Option<u64>,
    last_us: u64,
}

impl FeatureTracker {
    pub fn new(window: FeatureWindow) -> Self {
        Self {
            window,
            slots: Vec::with_capacity(window.samples()),
            next: 0,
            pending: Slot::default(),
            slot_opened_us: None,
            total_acked_bytes: 0,
            first_us: None,
            last_us: 0,
        }
    }

    pub fn window(&self) -> FeatureWindow {
        self.window
    }

    /// Start a new window of another shape, keeping the whole-flow totals (bytes, elapsed).
    pub fn restart_window(&mut self, window: FeatureWindow) {
        self.window = window;
        self.slots = Vec::with_capacity(window.samples());
        self.next = 0;
        self.pending = Slot::default();
        self.slot_opened_us = None;
    }

    /// Whether the window has all its samples.
    pub fn window_full(&self) -> bool {
        self.slots.len() == self.capacity()
    }

    /// RTT samples in the window.
    pub fn samples(&self) -> usize {
        self.slots.len()
    }

    fn capacity(&self) -> usize {
        self.window.samples()
    }

    fn frozen(&self) -> bool {
        matches!(self.window, FeatureWindow::FirstSamples(_)) && self.window_full()
    }

    /// Absorb one report. `mss_bytes` converts acknowledged bytes into packets for the loss
    /// rate.
    pub fn observe(&mut self, m: &Measurement, mss_bytes: u64) {
        self.total_acked_bytes = self.total_acked_bytes.saturating_add(m.acked_bytes);
        self.first_us.get_or_insert(m.now_us);
        self.last_us = self.last_us.max(m.now_us);
        if self.frozen() {
            return;
        }
        self.pending.absorb(m, mss_bytes.max(1));
        let round_elapsed = self.slot_opened_us.map_or(true, |t| m.now_us.saturating_sub(t) >= m.rtt_us);
        if m.rtt_us > 0 && round_elapsed {
            self.slot_opened_us = Some(m.now_us);
            let slot = Slot { rtt_us: saturated(m.rtt_us), ..std::mem::take(&mut self.pending) };
            self.push(slot);
        }
    }

    fn push(&mut self, slot: Slot) {
        let capacity = self.capacity();
        if self.slots.len() < capacity {
            self.slots.push(slot);
        } else {
            self.slots[self.next] = slot;
        }
        self.next = (self.next + 1) % capacity;
    }

    /// The window's slots, newest first.
    fn newest_first(&self) -> impl Iterator<Item = &Slot> {
        let capacity = self.capacity();
        let newest = self.next + capacity - 1;
        (0..self.slots.len()).map(move |k| &self.slots[(newest - k) % capacity])
    }

    pub fn features(&self) -> Features {
        let mut f = Features {
            bytes: self.total_acked_bytes as f64,
            elapsed_s: self.first_us.map_or(0.0, |first| (self.last_us - first) as f64 / US_PER_S),
            samples: self.slots.len() as u64,
            ..Features::default()
        };
        self.rtt_statistics(&mut f);
        self.loss_and_rate(&mut f);
        f
    }

    fn rtt_statistics(&self, f: &mut Features) {
        if self.slots.is_empty() {
            return;
        }
        let n = self.slots.len() as f64;
        let (mut min, mut max, mut sum) = (u64::MAX, 0u64, 0.0);
        for s in &self.slots {
            min = min.min(u64::from(s.rtt_us));
            max = max.max(u64::from(s.rtt_us));
            sum += f64::from(s.rtt_us);
        }
        let mean = sum / n;
        let variance = self.slots.iter().map(|s| (f64::from(s.rtt_us) - mean).powi(2)).sum::<f64>() / n;
        let std = variance.sqrt();
        f.min_rtt_ms = min as f64 / US_PER_MS;
        f.max_rtt_ms = max as f64 / US_PER_MS;
        f.mean_rtt_ms = mean / US_PER_MS;
        f.rtt_std_ms = std / US_PER_MS;
        if mean > 0.0 {
            f.rtt_cov = std / mean;
            f.rtt_norm_range = (max - min) as f64 / mean;
        }
    }

    fn loss_and_rate(&self, f: &mut Features) {
        let (mut acked, mut lost, mut max_rate) = (0u64, 0u64, 0u64);
        let mut latest_rate = 0;
        for s in std::iter::once(&self.pending).chain(self.newest_first()) {
            acked = acked.saturating_add(u64::from(s.acked_packets));
            lost = lost.saturating_add(u64::from(s.lost_packets));
            max_rate = max_rate.max(s.max_rate);
            if latest_rate == 0 {
                latest_rate = s.latest_rate;
            }
        }
        let packets = acked.saturating_add(lost);
        if packets > 0 {
            f.loss_rate = lost as f64 / packets as f64;
        }
        f.delivery_rate_mbps = mbps(latest_rate);
        f.max_delivery_rate_mbps = mbps(max_rate);
    }
}

fn mbps(bytes_per_s: u64) -> f64 {
    bytes_per_s as f64 * BITS_PER_BYTE / BITS_PER_MEGABIT
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1_000;

    fn report(now_ms: u64, rtt_ms: u64) -> Measurement {
        Measurement {
            now_us: now_ms * 1_000,
            rtt_us: rtt_ms * 1_000,
            acked_bytes: 10 * MSS,
            ..Measurement::default()
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn track(window: FeatureWindow, rtts_ms: &[u64]) -> FeatureTracker {
        let mut t = FeatureTracker::new(window);
        for (i, &rtt) in rtts_ms.iter().enumerate() {
            t.observe(&report(100 * i as u64, rtt), MSS);
        }
        t
    }

    #[test]
    fn rtt_statistics_of_a_known_series() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, population std 2.
        let f = track(FeatureWindow::Sliding(8), &[2, 4, 4, 4, 5, 5, 7, 9]).features();
        assert!(close(f.min_rtt_ms, 2.0) && close(f.max_rtt_ms, 9.0), "{f:?}");
        assert!(close(f.mean_rtt_ms, 5.0), "{f:?}");
        assert!(close(f.rtt_std_ms, 2.0), "{f:?}");
        assert!(close(f.rtt_cov, 0.4), "{f:?}");
        assert!(close(f.rtt_norm_range, 7.0 / 5.0), "{f:?}");
        assert_eq!(f.samples, 8);
    }

    #[test]
    fn a_steady_series_has_no_spread() {
        let f = track(FeatureWindow::Sliding(5), &[30; 5]).features();
        assert!(close(f.mean_rtt_ms, 30.0) && f.rtt_std_ms == 0.0 && f.rtt_cov == 0.0 && f.rtt_norm_range == 0.0);
    }

    #[test]
    fn an_empty_tracker_is_all_zero() {
        let t = FeatureTracker::new(FeatureWindow::Sliding(4));
        assert_eq!(t.features(), Features::default());
        assert!(!t.window_full());
    }

    #[test]
    fn loss_rate_counts_packets_rounded_up() {
        let mut t = FeatureTracker::new(FeatureWindow::Sliding(10));
        // 9 500 bytes acknowledged = 10 packets (the last one partial), 2 lost: 2 / 12.
        t.observe(&Measurement { now_us: 1, rtt_us: 20_000, acked_bytes: 9_500, lost_packets: 2, ..Default::default() }, MSS);
        assert!(close(t.features().loss_rate, 2.0 / 12.0), "{:?}", t.features());
    }

    #[test]
    fn reports_without_an_rtt_sample_count_at_once_and_join_the_next_slot() {
        let mut t = FeatureTracker::new(FeatureWindow::Sliding(2));
        t.observe(&report(0, 10), MSS); // 10 packets
        t.observe(&Measurement { now_us: 50_000, lost_packets: 5, ..Default::default() }, MSS);
        assert_eq!(t.samples(), 1);
        assert!(close(t.features().loss_rate, 5.0 / 15.0));
        t.observe(&report(100, 10), MSS); // the loss joins this slot
        t.observe(&report(200, 10), MSS);
        assert_eq!(t.samples(), 2);
        assert!(close(t.features().loss_rate, 5.0 / 25.0));
        t.observe(&report(300, 10), MSS); // and leaves the window with it
        assert_eq!(t.features().loss_rate, 0.0);
    }

    #[test]
    fn reports_within_a_round_trip_share_its_slot() {
        // Per-RTT reports at 100 ms over a 100 ms path, and per-ACK reports every 10 ms over the
        // same stretch: the same slots, the same acknowledgements.
        let mut per_rtt = FeatureTracker::new(FeatureWindow::FirstSamples(3));
        let mut per_ack = FeatureTracker::new(FeatureWindow::FirstSamples(3));
        for round in 1..=3u64 {
            per_rtt.observe(&Measurement { now_us: round * 100_000, rtt_us: 100_000, acked_bytes: 10 * MSS, ..Default::default() }, MSS);
            for k in 1..=10u64 {
                let now_us = (round - 1) * 100_000 + k * 10_000;
                per_ack.observe(&Measurement { now_us, rtt_us: 100_000, acked_bytes: MSS, ..Default::default() }, MSS);
            }
        }
        // The per-ACK stream opened its slots at 10, 110 and 210 ms.
        assert_eq!((per_ack.samples(), per_rtt.samples()), (3, 3));
        assert_eq!(per_ack.features().bytes, per_rtt.features().bytes);
        // A sooner sample (a report at once on loss) joins the pending slot with its loss.
        let mut t = FeatureTracker::new(FeatureWindow::Sliding(4));
        t.observe(&report(0, 50), MSS);
        t.observe(&Measurement { now_us: 20_000, rtt_us: 80_000, lost_packets: 1, ..Default::default() }, MSS);
        assert_eq!(t.samples(), 1);
        assert!(close(t.features().max_rtt_ms, 50.0) && close(t.features().loss_rate, 1.0 / 11.0));
    }

    /// A sample holds 32-bit counts: values beyond saturate, they never wrap.
    #[test]
    fn samples_beyond_32_bits_saturate() {
        let mut t = FeatureTracker::new(FeatureWindow::Sliding(2));
        let huge = u64::from(u32::MAX) + 5;
        t.observe(&Measurement { now_us: 1, rtt_us: huge, lost_packets: huge, ..Default::default() }, MSS);
        t.observe(&Measurement { now_us: 2, lost_packets: huge, ..Default::default() }, MSS);
        t.observe(&Measurement { now_us: huge + 2, rtt_us: 1_000, acked_bytes: 1_000, ..Default::default() }, MSS);
        let f = t.features();
        assert!(close(f.max_rtt_ms, f64::from(u32::MAX) / 1e3) && close(f.min_rtt_ms, 1.0), "{f:?}");
        assert!(f.loss_rate > 0.99 && f.loss_rate < 1.0, "{f:?}");
    }

    #[test]
    fn first_samples_freeze_after_n() {
        let mut t = track(FeatureWindow::FirstSamples(3), &[10, 20, 30]);
        assert!(t.window_full());
        let frozen = t.features();
        t.observe(&Measurement { now_us: 900_000, rtt_us: 500_000, acked_bytes: 4_000, lost_packets: 9, delivery_rate_bytes_per_s: 1, ..Default::default() }, MSS);
        let later = t.features();
        assert!(close(later.mean_rtt_ms, 20.0) && later.loss_rate == 0.0 && later.samples == 3, "{later:?}");
        assert_eq!(later.delivery_rate_mbps, frozen.delivery_rate_mbps);
        // The whole-flow figures go on.
        assert_eq!(later.bytes, frozen.bytes + 4_000.0);
        assert!(close(later.elapsed_s, 0.9), "{later:?}");
    }

    #[test]
    fn sliding_covers_the_last_n() {
        let t = track(FeatureWindow::Sliding(3), &[10, 20, 30, 40, 50]);
        let f = t.features();
        assert!(close(f.min_rtt_ms, 30.0) && close(f.max_rtt_ms, 50.0) && close(f.mean_rtt_ms, 40.0), "{f:?}");
        assert_eq!(f.samples, 3);
        assert_eq!(f.bytes, 5.0 * 10.0 * MSS as f64);
        assert!(close(f.elapsed_s, 0.4));
    }

    #[test]
    fn delivery_rate_is_the_latest_sample_and_the_window_maximum() {
        let mut t = FeatureTracker::new(FeatureWindow::Sliding(2));
        for (i, rate) in [5_000_000u64, 1_000_000, 2_000_000].into_iter().enumerate() {
            t.observe(&Measurement { now_us: 10_000 * i as u64, rtt_us: 10_000, delivery_rate_bytes_per_s: rate, ..Default::default() }, MSS);
        }
        let f = t.features();
        assert!(close(f.delivery_rate_mbps, 16.0), "{f:?}");
        // The 5 MB/s sample slid out of the window.
        assert!(close(f.max_delivery_rate_mbps, 16.0), "{f:?}");
        // A report without a rate sample keeps the latest one.
        t.observe(&Measurement { now_us: 30_000, rtt_us: 10_000, ..Default::default() }, MSS);
        assert!(close(t.features().delivery_rate_mbps, 16.0));
    }

    #[test]
    fn restarting_the_window_keeps_the_flow_totals() {
        let mut t = track(FeatureWindow::Sliding(4), &[10, 20, 30, 40]);
        t.restart_window(FeatureWindow::FirstSamples(2));
        let f = t.features();
        assert_eq!((f.samples, f.bytes), (0, 40.0 * MSS as f64));
        assert!(close(f.elapsed_s, 0.3));
        t.observe(&report(400, 70), MSS);
        t.observe(&report(500, 90), MSS);
        assert!(t.window_full() && close(t.features().mean_rtt_ms, 80.0));
    }

    #[test]
    fn features_by_name() {
        let f = track(FeatureWindow::Sliding(8), &[2, 4, 4, 4, 5, 5, 7, 9]).features();
        for (i, name) in Features::NAMES.iter().enumerate() {
            assert_eq!(f.get(name), Some(f.at(i)), "{name}");
        }
        assert_eq!(f.get("rtt_cov"), Some(f.rtt_cov));
        assert_eq!(f.get("samples"), Some(8.0));
        assert_eq!(f.get("nope"), None);
        let json = serde_json::to_value(f).unwrap();
        assert_eq!(json.as_object().unwrap().len(), Features::NAMES.len());
        assert!(Features::NAMES.iter().all(|n| json.get(n).is_some()));
    }
}
