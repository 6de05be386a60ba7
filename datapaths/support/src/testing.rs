//! What both datapaths' fold tests share: random flows of ACKs driven through the shim's
//! interpreter (`ccswitch_ccp::CcpFlow` running the standard program as the agent installs
//! it, its controls varied), the reference each datapath's fold must report as.

use std::sync::Arc;

use ccswitch_ccp::program::fold::{fold_mode, FoldMode};
use ccswitch_ccp::{CcpFlow, Primitives, Program};
use ccswitch_protocol::lang::reg_type;
use ccswitch_protocol::standard::{self, control, report, GROW_RATE_UNIT};
use ccswitch_protocol::wire::{self, Msg, UpdateField};

use crate::rng::SplitMix64;
use crate::std_fold::{StdAck, StdRateSample};

/// The standard program, as the agent installs it.
pub fn standard_program() -> Arc<Program> {
    let (msg, _) = wire::decode(standard::INSTALL_MESSAGE).expect("the standard program decodes");
    let Msg::InstallExpr(install) = msg else { panic!("an INSTALL_EXPR") };
    Arc::new(Program::from_install(&install).expect("the standard program compiles"))
}

/// An update of control register `index`.
pub fn control_update(index: usize, value: u64) -> UpdateField {
    UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: index as u32, value }
}

/// What the interpreter reads for `a`, whose incoming rate is `rate_incoming` (bytes/s).
pub fn primitives(a: &StdAck, rate_incoming: u64) -> Primitives {
    Primitives {
        bytes_acked: u64::from(a.bytes_acked),
        packets_acked: u64::from(a.bytes_acked / 1448),
        ecn_packets: u64::from(a.ecn_packets),
        lost_pkts_sample: u64::from(a.lost_packets),
        was_timeout: a.was_timeout != 0,
        rtt_sample_us: u64::from(a.rtt_us),
        rate_incoming,
        bytes_in_flight: u64::from(a.bytes_in_flight),
        now: a.now_us,
        ..Primitives::default()
    }
}

/// Controls of a flow: reporting per ACK or not, the window share that binds, the idle
/// interval, a loss window or none, a rate ACK aggregation is measured against or none, and a
/// step of growth, slow start or neither, counted from
/// `micros_zero_us` (where the program's Micros counts from now: the latest report's ACK or
/// the start, as the agent answers), from `previous_report_us` (the report before, whose
/// answer the agent sent before the latest's: growth counted across the latest) or from an
/// earlier time; never from before `grow_from_floor_us`, the last one set (the agent answers
/// reports in order, each from the latest report it has had).
fn random_controls(
    rng: &mut SplitMix64,
    growth: Growth,
    micros_zero_us: u64,
    previous_report_us: u64,
    grow_from_floor_us: &mut u64,
) -> Vec<UpdateField> {
    let grow_from = match rng.below(100) {
        0..=59 => micros_zero_us,
        60..=79 => previous_report_us,
        _ => rng.below(micros_zero_us + 1),
    }
    .max(*grow_from_floor_us);
    *grow_from_floor_us = grow_from;
    let preset = growth == Growth::Presets && rng.chance(60);
    let slow_start = preset && rng.chance(50);
    let step = preset && !slow_start;
    let measures_aggregation = growth == Growth::Presets && rng.chance(40);
    let ss_cwnd = 4_000 + rng.below(3_000_000);
    // A step's byte count, or slow start's threshold, which the same register holds.
    let grow_after = if slow_start {
        [u64::from(u32::MAX), ss_cwnd + rng.below(3_000_000), rng.below(ss_cwnd)][rng.below(3) as usize]
    } else {
        [0, 1448, rng.below(100_000), rng.below(3_000_000)][rng.below(4) as usize]
    };
    // Past a step: none, Cubic's rates (a byte per 2 to 20 acknowledged, and far slower at
    // its plateau), or any up to one byte per byte, the most the fold takes.
    // A step that also waits on time (BBR's probe_rtt exit) has no rate past it: the kernel's
    // directive holds one of the two. Its time is near the latest report's (the agent sets it
    // from there), before and after the ACKs to come.
    let timed = step && rng.chance(30);
    let grow_not_before = if timed { (micros_zero_us + rng.below(2_000_000)).saturating_sub(rng.below(500_000)).max(1) } else { 0 };
    let grow_rate = match rng.below(10) {
        _ if timed => 0,
        0..=2 => 0,
        3..=5 => GROW_RATE_UNIT.div_ceil(2 + rng.below(19)),
        6 => GROW_RATE_UNIT.div_ceil(1 + rng.below(100_000)),
        _ => rng.below(GROW_RATE_UNIT + 1),
    };
    vec![
        control_update(control::GROW_CWND, if step { 4_000 + rng.below(3_000_000) } else { 0 }),
        control_update(control::GROW_AFTER, grow_after),
        control_update(control::GROW_FROM, grow_from),
        control_update(control::GROW_LOSS_CWND, if step && rng.chance(70) { 4_000 + rng.below(1_000_000) } else { 0 }),
        control_update(control::SS_CWND, if slow_start { ss_cwnd } else { 0 }),
        control_update(control::GROW_RATE, grow_rate),
        control_update(control::GROW_NOT_BEFORE, grow_not_before),
        control_update(control::PER_ACK, u64::from(rng.chance(15))),
        control_update(control::WINDOW_USE_PCT, if rng.chance(20) { rng.below(150) } else { [50, 50, 0, 80, 100][rng.below(5) as usize] }),
        control_update(control::IDLE_REPORT_US, [1_000_000, 1_000_000, 50_000, 5_000_000, rng.below(3_000_000)][rng.below(5) as usize]),
        control_update(control::LOSS_CWND, if rng.chance(50) { 4_000 + rng.below(1_000_000) } else { 0 }),
        // A rate about that of the flow's ACKs, above and below: epochs that restart and grow.
        control_update(
            control::AGG_RATE,
            if measures_aggregation { [rng.below(40_000_000), rng.below(40_000_000), rng.below(1 << 32)][rng.below(3) as usize] } else { 0 },
        ),
    ]
}

/// The most bytes a random ACK acknowledges.
const MAX_ACK_BYTES: u64 = 3 * 1448;

/// One ACK of a flow whose path, losses and timing vary by sequence. Its rate sample's byte
/// count is sometimes past 2^32 (the kernel's dividing path; the rest cross-multiply).
fn random_ack(rng: &mut SplitMix64, now_us: u64, rtt_us: u32) -> (StdAck, StdRateSample) {
    let mss = 1448;
    let packets = rng.below(4) as u32;
    const _: () = assert!(3 * 1448 == MAX_ACK_BYTES);
    let sample = if rng.chance(70) {
        let interval_bound = if rng.chance(5) { 1 << 31 } else { 1_000_000 };
        let huge = rng.chance(2);
        StdRateSample {
            bytes: if huge { (1 << 32) + rng.below(1 << 36) } else { 1 + rng.below(4_000_000) },
            interval_us: 1 + rng.below(interval_bound),
        }
    } else {
        StdRateSample::default()
    };
    let ack = StdAck {
        now_us,
        rate_incoming: sample.rate(),
        pacing_rate: if rng.chance(10) { 1 + rng.below(10_000_000) } else { 0 },
        bytes_acked: packets * mss,
        lost_packets: if rng.chance(3) { 1 + rng.below(5) as u32 } else { 0 },
        ecn_packets: if rng.chance(4) { packets } else { 0 },
        was_timeout: u32::from(rng.chance(1)),
        rtt_us,
        bytes_in_flight: rng.below(2_000_000) as u32,
        // Windows above and below what is in flight: the flow held by its window or not.
        cwnd_bytes: 2 * mss + rng.below(3_000_000) as u32,
        agg_rate: 0,
    };
    (ack, sample)
}

/// One ACK of a random flow and what the interpreter did on it.
#[derive(Debug, Clone)]
pub struct RandomAck {
    pub seed: u64,
    /// The ACK's index in its flow: 0 starts a new flow.
    pub index: usize,
    /// The program's start and controls as the agent last set them.
    pub start_us: u64,
    pub mode: FoldMode,
    /// The ACK; `ack.rate_incoming` is `sample`'s rate.
    pub ack: StdAck,
    pub sample: StdRateSample,
    /// The interpreter's report on it.
    pub report: Option<Vec<u64>>,
    /// The window its growth or loss clause commanded (none when the flow holds that window
    /// already).
    pub cwnd_set: Option<u32>,
}

/// How many ACKs, reports, and windows set by the loss and the growth clauses
/// [`for_random_flows`] compared.
#[derive(Debug, Clone, Copy, Default)]
pub struct ComparedCounts {
    pub acks: u64,
    pub reports: u64,
    pub loss_windows: u64,
    pub growth_windows: u64,
    /// Of the growth windows, those slow start set, and those a step that waits on time set.
    pub slow_start_windows: u64,
    pub timed_step_windows: u64,
    /// ACKs that came while a step waited on a time not yet passed.
    pub timed_step_waits: u64,
    /// Reports that measured ACK aggregation (`Report.extra_acked` not 0), and of them those
    /// whose epoch spanned ACKs (more than one ACK's bytes beyond the rate).
    pub aggregation_reports: u64,
    pub multi_ack_epoch_reports: u64,
}

/// When the agent's restarts of the program are stamped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restarts {
    /// At the time of the ACK they precede, or later.
    AtTheNextAck,
    /// Half of them a little after the next ACK's time (up to 5 ms).
    SometimesAfterTheNextAck,
}

/// Whether the agent pre-sets growth (the standard program's growth clauses: a step, slow
/// start) and a rate to measure ACK aggregation against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// Now and then, as it does for algorithms that step in congestion avoidance or
    /// slow-start, or that allow for ACK aggregation.
    Presets,
    /// Never: for a datapath that folds neither the growth clauses nor the aggregation
    /// clauses (the ovs datapath, whose window moves with the agent's answers only and which
    /// leaves a flow that measures aggregation to the session's interpreter).
    None,
}

/// Runs `seeds` random flows of 500 ACKs each through the interpreter and hands every ACK to
/// `check`. The agent restarts the program now and then (a handover between simple
/// algorithms, stamped as `restarts` says), or changes its controls without a restart.
pub fn for_random_flows(seeds: u64, restarts: Restarts, growth: Growth, mut check: impl FnMut(&RandomAck)) -> ComparedCounts {
    let program = standard_program();
    let mut totals = ComparedCounts::default();
    for seed in 0..seeds {
        let mut rng = SplitMix64(seed);
        let mut now_us = 1_000_000 + rng.below(1 << 40);
        let mut start_us = now_us;
        let mut micros_zero_us = start_us;
        // The latest report and the one before it (0: none since the start).
        let (mut latest_report_us, mut previous_report_us) = (0, 0);
        let mut flow = CcpFlow::new(1, 14_480, 1448);
        let mut grow_from_floor_us = 0;
        let controls = random_controls(&mut rng, growth, micros_zero_us, previous_report_us, &mut grow_from_floor_us);
        flow.change_program(program.clone(), &controls, start_us).expect("the program starts");
        // Some flows have no RTT sample for a while (the program then reads infinity).
        let mut rtt_us: u32 = if rng.chance(30) { 0 } else { 500 + rng.below(300_000) as u32 };
        for index in 0..500 {
            now_us += match rng.below(10) {
                0 => 0,
                1..=7 => rng.below(500),
                8 => rng.below(400_000),
                _ => rng.below(5_000_000),
            };
            if rng.chance(10) {
                rtt_us = 500 + rng.below(300_000) as u32;
            }
            if rng.chance(1) {
                // Each restart has a later start than the one before, as the session gives it.
                let late = restarts == Restarts::SometimesAfterTheNextAck && rng.chance(50);
                let stamped = if late { now_us + rng.below(5_000) } else { now_us };
                start_us = stamped.max(start_us + 1);
                // Growth is never counted from later than the ACK (the agent counts it from a
                // report it has had), where the clause's Ack.now - grow_from would underflow.
                (latest_report_us, previous_report_us, grow_from_floor_us) = (0, 0, 0);
                let controls = random_controls(&mut rng, growth, start_us.min(now_us), previous_report_us, &mut grow_from_floor_us);
                flow.change_program(program.clone(), &controls, start_us).expect("the program restarts");
                micros_zero_us = start_us;
            } else if rng.chance(2) {
                let controls = random_controls(&mut rng, growth, micros_zero_us.min(now_us), previous_report_us, &mut grow_from_floor_us);
                flow.update_fields(&controls).expect("controls update");
            }
            let mode = fold_mode(&flow).expect("the standard program folds");
            let (ack, sample) = random_ack(&mut rng, now_us, rtt_us);
            flow.sync_datapath(ack.cwnd_bytes, ack.pacing_rate);
            let step = flow.on_ack(&primitives(&ack, ack.rate_incoming), now_us);
            assert!(step.error.is_none(), "seed {seed} ack {index}: interpreter fault {:?}", step.error);
            let report = step.report.map(|m| m.fields);
            if let Some(f) = &report {
                assert_eq!(f.len(), report::COUNT);
                totals.aggregation_reports += u64::from(f[report::EXTRA_ACKED] > 0);
                totals.multi_ack_epoch_reports += u64::from(f[report::EXTRA_ACKED] > MAX_ACK_BYTES);
            }
            totals.acks += 1;
            let waits = mode.growth.not_before_us > 0 && (now_us as u32).wrapping_sub(mode.growth.not_before_us) as i32 <= 0;
            totals.timed_step_waits += u64::from(mode.growth.cwnd_bytes > 0 && waits);
            totals.reports += u64::from(report.is_some());
            if step.cwnd_bytes.is_some() {
                if ack.lost_packets > 0 && mode.loss_cwnd_bytes > 0 {
                    totals.loss_windows += 1;
                } else {
                    totals.growth_windows += 1;
                    totals.slow_start_windows += u64::from(mode.growth.slow_start_cwnd_bytes > 0);
                    totals.timed_step_windows += u64::from(mode.growth.not_before_us > 0);
                }
            }
            if report.is_some() {
                (latest_report_us, previous_report_us) = (now_us, latest_report_us);
                micros_zero_us = now_us;
            }
            check(&RandomAck { seed, index, start_us, mode, ack, sample, report, cwnd_set: step.cwnd_bytes });
        }
    }
    totals
}
