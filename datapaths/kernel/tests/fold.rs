//! The kernel's fold of the standard program against the shim's interpreter, the reference:
//! the same ACK sequences run through `ccswitch_ccp::CcpFlow` (the standard program as the agent
//! installs it) and through the BPF fold that `cong_control` runs (its test program, with
//! BPF_PROG_TEST_RUN), and every ACK must report the same, with the same fields. Needs root.

use ccswitch_ccp::program::fold;
use ccswitch_ccp::{CcpFlow, Primitives, Program};
use ccswitch_datapath_support::rng::SplitMix64;
use ccswitch_protocol::lang::reg_type;
use ccswitch_protocol::standard::{self, control, report};
use ccswitch_protocol::wire::{self, Msg, UpdateField};
use ccswitch_datapath_support::std_fold::{StdAck, StdRateSample};
use ccswitch_kernel::abi::{self, KernelFoldTest, KernelDirectiveSlot};
use ccswitch_kernel::{Fallback, KernelDatapath, LoadOptions};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn standard_program() -> Arc<Program> {
    let (msg, _) = wire::decode(standard::INSTALL_MESSAGE).unwrap();
    let Msg::InstallExpr(install) = msg else { panic!("an INSTALL_EXPR") };
    Arc::new(Program::from_install(&install).unwrap())
}

fn control_update(index: usize, value: u64) -> UpdateField {
    UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: index as u32, value }
}

fn per_ack_update(on: bool) -> UpdateField {
    control_update(control::PER_ACK, u64::from(on))
}

/// The directive the kernel datapath writes for a flow's fold (`KernelDatapath::set_fold`).
fn directive(flow: &CcpFlow, start_us: u64) -> KernelDirectiveSlot {
    let mode = fold::fold_mode(flow).expect("the standard program folds");
    let mut d = KernelDirectiveSlot {
        fold_start_us: start_us,
        loss_cwnd_bytes: mode.loss_cwnd_bytes,
        ..Default::default()
    };
    match mode.reporting {
        fold::FoldReporting::PerAck => d.fold = abi::FOLD_PER_ACK,
        fold::FoldReporting::PerRtt { window_use_pct, idle_report_us } => {
            d.fold = abi::FOLD_PER_RTT;
            d.fold_window_pct = window_use_pct;
            d.fold_idle_us = idle_report_us;
        }
    }
    d
}

/// One ACK as cong_control folds it: its measurements and its delivery-rate sample.
#[derive(Debug, Clone, Copy, Default)]
struct FoldAck {
    ack: StdAck,
    sample: StdRateSample,
}

/// The primitives the shim's interpreter reads for `a`, with the window and rate it holds.
fn primitives(flow: &mut CcpFlow, a: &FoldAck) -> Primitives {
    let (ack, sample) = (&a.ack, &a.sample);
    flow.sync_datapath(ack.cwnd_bytes, ack.pacing_rate);
    Primitives {
        bytes_acked: u64::from(ack.bytes_acked),
        packets_acked: u64::from(ack.bytes_acked / 1448),
        ecn_packets: u64::from(ack.ecn_packets),
        lost_pkts_sample: u64::from(ack.lost_packets),
        was_timeout: ack.was_timeout != 0,
        rtt_sample_us: u64::from(ack.rtt_us),
        rate_incoming: sample.rate(),
        bytes_in_flight: u64::from(ack.bytes_in_flight),
        now: ack.now_us,
        ..Primitives::default()
    }
}

/// ACKs on which the loss clause set a window, in both.
static LOSS_WINDOWS_SET: AtomicU64 = AtomicU64::new(0);

/// One ACK through both: the interpreter's report, checked equal to the kernel fold's.
fn both(dp: &KernelDatapath, flow: &mut CcpFlow, t: &mut KernelFoldTest, a: FoldAck, start_us: u64, what: &str) -> Option<Vec<u64>> {
    let prims = primitives(flow, &a);
    let step = flow.on_ack(&prims, a.ack.now_us);
    assert!(step.error.is_none(), "{what}: interpreter fault {:?}", step.error);
    let ack = a.ack;
    t.ack = ack;
    t.sample = a.sample;
    t.directive = directive(flow, start_us);
    dp.run_fold(t).unwrap();
    let want = step.report.map(|m| m.fields);
    if let Some(fields) = &want {
        assert_eq!(fields.len(), report::COUNT);
    }
    let got = (t.reported != 0).then(|| t.report.fields.to_vec());
    assert_eq!(got, want, "{what}: {a:?}");
    // The loss clause: the window the interpreter commands is the one the fold set (the
    // interpreter commands none when it is the window the flow has already).
    let set = Some(t.loss_cwnd_set).filter(|&w| w != 0 && w != ack.cwnd_bytes);
    assert_eq!(set, step.cwnd_bytes, "{what}: loss window, {a:?}");
    LOSS_WINDOWS_SET.fetch_add(u64::from(set.is_some()), Ordering::Relaxed);
    want
}

fn load() -> KernelDatapath {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    // One name per load: the tests run in parallel, and a name is registered once at a time.
    static LOADS: AtomicU64 = AtomicU64::new(0);
    KernelDatapath::load(LoadOptions {
        fallback: Fallback::Reno,
        cc_name: format!("ccsw_f{}_{}", std::process::id() % 1_000_000, LOADS.fetch_add(1, Ordering::Relaxed)),
        ..Default::default()
    })
    .expect("load datapath")
}

/// One ACK of a flow whose path, losses and timing vary by sequence.
fn random_ack(rng: &mut SplitMix64, now_us: u64, rtt_us: u32) -> FoldAck {
    let mss = 1448;
    let packets = rng.below(4) as u32;
    let rate_sample = rng.chance(70);
    // Byte counts past 2^32 take the kernel's dividing path, the rest its cross-multiplication.
    let huge = rng.chance(2);
    let interval_bound = if rng.chance(5) { 1 << 31 } else { 1_000_000 };
    let sample = StdRateSample {
        bytes: if !rate_sample { 0 } else if huge { (1 << 32) + rng.below(1 << 36) } else { 1 + rng.below(4_000_000) },
        interval_us: if rate_sample { 1 + rng.below(interval_bound) } else { 0 },
    };
    let ack = StdAck {
        now_us,
        bytes_acked: packets * mss,
        lost_packets: if rng.chance(3) { 1 + rng.below(5) as u32 } else { 0 },
        ecn_packets: if rng.chance(5) { packets } else { 0 },
        was_timeout: u32::from(rng.chance(1)),
        rtt_us,
        bytes_in_flight: rng.below(2_000_000) as u32,
        // Windows above and below what is in flight: the flow held by its window or not.
        cwnd_bytes: 2 * mss + rng.below(3_000_000) as u32,
        pacing_rate: if rng.chance(10) { 1 + rng.below(10_000_000) } else { 0 },
        ..Default::default()
    };
    FoldAck { ack, sample }
}

#[test]
fn kernel_fold_reports_as_the_interpreter() {
    let dp = load();
    let program = standard_program();
    let (mut acks, mut reports) = (0u64, 0u64);

    for seed in 0..200u64 {
        let mut rng = SplitMix64(seed);
        let mut now_us = 1_000_000 + rng.below(1 << 40);
        let mut start_us = now_us;
        let mut per_ack = rng.chance(20);
        let mut flow = CcpFlow::new(1, 14_480, 1448);
        flow.change_program(program.clone(), &[per_ack_update(per_ack)], start_us).unwrap();
        let mut t = KernelFoldTest::default();
        // Some flows have no RTT sample for a while (the program then reads infinity).
        let mut rtt_us: u32 = if rng.chance(30) { 0 } else { 1_000 + rng.below(300_000) as u32 };

        for i in 0..500 {
            now_us += match rng.below(10) {
                0 => 0,
                1..=7 => rng.below(500),
                8 => rng.below(400_000),
                _ => rng.below(5_000_000),
            };
            if rng.chance(10) {
                rtt_us = 1_000 + rng.below(300_000) as u32;
            }
            if rng.chance(1) {
                // The agent restarts the program (a handover between simple algorithms);
                // sometimes its message is stamped after the next ACK's time. Each restart
                // has a later start than the one before, as the session gives it (sync_fold).
                let stamped = if rng.chance(50) { now_us } else { now_us + rng.below(5_000) };
                start_us = stamped.max(start_us + 1);
                per_ack = rng.chance(20);
                flow.change_program(program.clone(), &[per_ack_update(per_ack)], start_us).unwrap();
            } else if rng.chance(1) {
                // Reporting mode changed without a restart.
                per_ack = !per_ack;
                flow.update_fields(&[per_ack_update(per_ack)]).unwrap();
            } else if rng.chance(1) {
                // The agent moves the window share or the idle interval.
                flow.update_fields(&[
                    control_update(control::WINDOW_USE_PCT, rng.below(150)),
                    control_update(control::IDLE_REPORT_US, rng.below(3_000_000)),
                ])
                .unwrap();
            } else if rng.chance(5) {
                // The agent pre-sets the window of a loss, or none.
                let loss_cwnd = if rng.chance(30) { 0 } else { 2 * 1448 + rng.below(2_000_000) };
                flow.update_fields(&[control_update(control::LOSS_CWND, loss_cwnd)]).unwrap();
            }
            let ack = random_ack(&mut rng, now_us, rtt_us);
            let what = format!("seed {seed} ack {i} at {now_us} µs (start {start_us}, per_ack {per_ack})");
            let reported = both(&dp, &mut flow, &mut t, ack, start_us, &what);
            acks += 1;
            reports += u64::from(reported.is_some());
        }
    }
    assert_eq!(acks, 100_000);
    // Both kinds of ACK were compared: some reported, most folded silently.
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs");
    let loss_windows = LOSS_WINDOWS_SET.load(Ordering::Relaxed);
    assert!(loss_windows > 500, "{loss_windows} ACKs set a loss window");
    eprintln!("{acks} ACKs, {reports} reports, {loss_windows} loss windows: identical");
}

/// Two flows on a 10 ms path for 5 s, an ACK every 500 µs: one whose window holds it (all of
/// it in flight) reports once per RTT; one held by its receiver (a tenth of its window in
/// flight) reports only every `Control.idle_report_us` (1 s), and at once on a loss. The
/// kernel fold and the interpreter agree on every ACK.
#[test]
fn a_window_limited_flow_reports_per_rtt_and_a_receiver_limited_one_at_the_idle_interval() {
    let dp = load();
    let program = standard_program();
    let (rtt_us, mss, cwnd) = (10_000u32, 1448u32, 100 * 1448u32);
    let run = |in_flight: u32, loss_at_us: Option<u64>| -> Vec<u64> {
        let start_us = 1_000_000u64;
        let mut flow = CcpFlow::new(1, cwnd, mss);
        flow.change_program(program.clone(), &[], start_us).unwrap();
        let mut t = KernelFoldTest::default();
        let mut report_times = Vec::new();
        for i in 1..=10_000u64 {
            let now_us = start_us + 500 * i;
            let lost = loss_at_us.is_some_and(|at| now_us == start_us + at);
            let ack = FoldAck {
                ack: StdAck {
                    now_us,
                    bytes_acked: 2 * mss,
                    lost_packets: u32::from(lost),
                    rtt_us,
                    bytes_in_flight: in_flight - 2 * mss,
                    cwnd_bytes: cwnd,
                    ..Default::default()
                },
                sample: StdRateSample { bytes: u64::from(in_flight), interval_us: u64::from(rtt_us) },
            };
            if both(&dp, &mut flow, &mut t, ack, start_us, &format!("in flight {in_flight}, ack {i}")).is_some() {
                report_times.push(now_us - start_us);
            }
        }
        report_times
    };

    let window_limited = run(cwnd, None);
    // Micros must exceed the RTT: a report every 10.5 ms.
    assert_eq!(window_limited.len(), 476, "{window_limited:?}");
    assert!(window_limited.windows(2).all(|w| w[1] - w[0] == 10_500));

    let receiver_limited = run(cwnd / 10, None);
    assert_eq!(receiver_limited, vec![1_000_500, 2_001_000, 3_001_500, 4_002_000], "every idle interval");

    let lossy = run(cwnd / 10, Some(1_500_000));
    assert_eq!(lossy, vec![1_000_500, 1_500_000, 2_500_500, 3_501_000, 4_501_500], "at once on the loss");
}

/// The window a loss sets holds until the shim writes the agent's next window: on the ACK
/// that reveals the loss, on the ACKs after it (lossy or not: the same window again, never a
/// lower one), and no longer once `cwnd_seq` moves. With no window pre-set, a loss leaves the
/// directive's window alone.
#[test]
fn a_loss_sets_the_preset_window_until_the_agents_next_window() {
    let dp = load();
    let mut t = KernelFoldTest::default();
    t.directive = KernelDirectiveSlot {
        fold: abi::FOLD_PER_RTT,
        fold_window_pct: 50,
        fold_idle_us: 1_000_000,
        cwnd_bytes: 100_000,
        loss_cwnd_bytes: 50_000,
        cwnd_seq: 7,
        ..Default::default()
    };
    let step = |t: &mut KernelFoldTest, lost: u32| {
        t.ack = StdAck { now_us: 1_000_000, lost_packets: lost, cwnd_bytes: 100_000, ..Default::default() };
        dp.run_fold(t).unwrap();
        (t.cwnd_bytes, t.loss_cwnd_set)
    };
    assert_eq!(step(&mut t, 0), (100_000, 0), "no loss: the directive's window");
    assert_eq!(step(&mut t, 2), (50_000, 50_000), "the loss sets the pre-set window");
    assert_eq!(step(&mut t, 0), (50_000, 0), "and it holds");
    // The agent's window for the loss is not yet written, but its next pre-set is (a flow in
    // recovery: none); a further loss sets the window in force again, not a lower one.
    t.directive.loss_cwnd_bytes = 25_000;
    assert_eq!(step(&mut t, 1), (25_000, 25_000));
    t.directive.loss_cwnd_bytes = 0;
    assert_eq!(step(&mut t, 1), (25_000, 0), "no pre-set: the window in force stays");
    // The shim writes the agent's answer: its window rules again.
    t.directive.cwnd_bytes = 60_000;
    t.directive.cwnd_seq = 8;
    assert_eq!(step(&mut t, 0), (60_000, 0));
    assert_eq!(step(&mut t, 0), (60_000, 0));
}
