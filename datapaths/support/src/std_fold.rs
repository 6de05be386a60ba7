//! `#[repr(C)]` mirrors of `datapaths/bpf/std_fold.bpf.h`, the standard program's per-ACK
//! fold that both datapaths' BPF programs run. Sizes are asserted here and by the header's
//! `_Static_assert`s.

use std::mem::size_of;

use ccswitch_protocol::standard::{report, NO_RTT_SAMPLE_US};

use crate::pod::Pod;

/// The report registers `struct ccsw_std_regs` holds: all but the last three, which
/// [`StdAggregation`] holds.
pub const STD_REGS: usize = report::EXTRA_ACKED;

/// `struct ccsw_std_regs`: the report registers, each at its index in a MEASURE
/// (`ccswitch_protocol::standard::report`), but for the last three.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StdRegs {
    pub fields: [u64; STD_REGS],
}

impl StdRegs {
    /// The registers as a program (re)start leaves them (`ccsw_std_reset`).
    pub fn reset() -> Self {
        let mut r = Self::default();
        r.fields[report::MINRTT] = NO_RTT_SAMPLE_US;
        r
    }

    /// The report these registers and `agg` make, in MEASURE order.
    pub fn report(&self, agg: &StdAggregation) -> [u64; report::COUNT] {
        let mut fields = [0; report::COUNT];
        fields[..STD_REGS].copy_from_slice(&self.fields);
        fields[report::EXTRA_ACKED] = agg.extra_acked;
        fields[report::AGG_EPOCH_US] = agg.epoch_us;
        fields[report::AGG_EPOCH_ACKED] = agg.epoch_acked;
        fields
    }
}

/// `struct ccsw_std_fold`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StdFold {
    pub regs: StdRegs,
    pub micros_zero_us: u64,
    pub start_us: u64,
}

/// `struct ccsw_std_ack`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StdAck {
    pub now_us: u64,
    pub rate_incoming: u64,
    pub pacing_rate: u64,
    pub bytes_acked: u32,
    pub lost_packets: u32,
    pub ecn_packets: u32,
    pub was_timeout: u32,
    pub rtt_us: u32,
    pub bytes_in_flight: u32,
    pub cwnd_bytes: u32,
    pub agg_rate: u32,
}

/// `struct ccsw_std_reporting`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StdReporting {
    pub idle_report_us: u64,
    pub window_use_pct: u32,
    pub per_ack: u32,
}

/// `struct ccsw_std_aggregation`: the program's last three report registers,
/// `Report.extra_acked` and the ACK epoch's.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StdAggregation {
    pub extra_acked: u64,
    pub epoch_us: u64,
    pub epoch_acked: u64,
}

/// `struct ccsw_std_rate_sample`: `bytes` delivered over `interval_us` (0: no sample).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StdRateSample {
    pub bytes: u64,
    pub interval_us: u64,
}

impl StdRateSample {
    /// The rate in bytes/s, as the shim computes `Flow.rate_incoming` from such a sample.
    pub fn rate(&self) -> u64 {
        if self.interval_us == 0 {
            return 0;
        }
        self.bytes.wrapping_mul(1_000_000) / self.interval_us
    }
}

/// `struct ccsw_std_sampled_fold`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StdSampledFold {
    pub fold: StdFold,
    pub fastest: StdRateSample,
}

const _: () = assert!(size_of::<StdRegs>() == 72);
const _: () = assert!(size_of::<StdFold>() == 88);
const _: () = assert!(size_of::<StdAck>() == 56);
const _: () = assert!(size_of::<StdReporting>() == 16);
const _: () = assert!(size_of::<StdRateSample>() == 16);
const _: () = assert!(size_of::<StdSampledFold>() == 104);
const _: () = assert!(size_of::<StdAggregation>() == 24);

// SAFETY: #[repr(C)], integers only, explicitly padded.
unsafe impl Pod for StdRegs {}
unsafe impl Pod for StdFold {}
unsafe impl Pod for StdAck {}
unsafe impl Pod for StdReporting {}
unsafe impl Pod for StdRateSample {}
unsafe impl Pod for StdSampledFold {}
unsafe impl Pod for StdAggregation {}
