//! The kernel's fold of the standard program against the shim's interpreter, the reference:
//! the same ACK sequences run through `ccswitch_ccp::CcpFlow` (the standard program as the agent
//! installs it) and through the BPF fold that `cong_control` runs (its test program, with
//! BPF_PROG_TEST_RUN), and every ACK must report the same, with the same fields. Needs root.

use ccswitch_ccp::program::fold;
use ccswitch_ccp::CcpFlow;
use ccswitch_datapath_support::std_fold::{StdAck, StdRateSample};
use ccswitch_datapath_support::testing::{for_random_flows, primitives, standard_program, Growth, Restarts};
use ccswitch_protocol::standard::{report, GROW_RATE_UNIT};
use ccswitch_kernel::abi::{self, KernelDirectiveSlot, KernelFoldTest};
use ccswitch_kernel::{Fallback, KernelDatapath, LoadOptions};
use std::sync::atomic::{AtomicU64, Ordering};

/// The directive the kernel datapath writes for a flow's fold (`KernelDatapath::set_fold`).
fn directive(mode: fold::FoldMode, start_us: u64) -> KernelDirectiveSlot {
    let mut d = KernelDirectiveSlot {
        fold_start_us: start_us,
        loss_cwnd_bytes: mode.loss_cwnd_bytes,
        vm_slot_or_agg_rate: mode.agg_rate,
        ..Default::default()
    };
    abi::set_growth(&mut d, &mode.growth);
    match mode.reporting {
        fold::FoldReporting::PerAck => d.fold = abi::FOLD_PER_ACK,
        fold::FoldReporting::PerRtt { window_use_pct, idle_report_us } => {
            d.fold = abi::FOLD_PER_RTT;
            d.fold_window_pct = u16::try_from(window_use_pct).unwrap_or(u16::MAX);
            d.fold_idle_us = u32::try_from(idle_report_us).unwrap_or(u32::MAX);
        }
    }
    d
}

/// A folded flow's directive, reporting per RTT with the program's defaults, started at
/// `start_us`, its window `cwnd_bytes` written as the shim's `cwnd_seq`-th.
fn per_rtt_directive(start_us: u64, cwnd_bytes: u32, cwnd_seq: u32) -> KernelDirectiveSlot {
    KernelDirectiveSlot {
        fold: abi::FOLD_PER_RTT,
        fold_window_pct: 50,
        fold_idle_us: 1_000_000,
        fold_start_us: start_us,
        cwnd_bytes,
        cwnd_seq,
        ..Default::default()
    }
}

/// One ACK as cong_control folds it: its measurements, and its delivery-rate sample (the
/// pair it keeps instead of `ack.rate_incoming`, which is 0).
#[derive(Debug, Clone, Copy, Default)]
struct FoldAck {
    ack: StdAck,
    sample: StdRateSample,
}

/// What the interpreter did on one ACK: its report and the window its growth or loss clause
/// commanded.
struct Want {
    report: Option<Vec<u64>>,
    cwnd_set: Option<u32>,
}


/// One ACK through the kernel fold, checked against what the interpreter did on it.
fn check(dp: &KernelDatapath, t: &mut KernelFoldTest, a: FoldAck, mode: fold::FoldMode, start_us: u64, want: &Want, what: &str) {
    t.ack = StdAck { rate_incoming: 0, ..a.ack };
    t.sample = a.sample;
    t.directive = directive(mode, start_us);
    dp.run_fold(t).unwrap();
    let got = (t.reported != 0).then(|| t.report.report(&t.report_agg).to_vec());
    assert_eq!(got, want.report, "{what}: {a:?}");
    // The growth and loss clauses: the window the interpreter commands is the one the fold
    // set (the interpreter commands none when it is the window the flow has already).
    let set = Some(t.cwnd_set).filter(|&w| w != 0 && w != a.ack.cwnd_bytes);
    assert_eq!(set, want.cwnd_set, "{what}: window set, {a:?}");
}

/// One ACK through both, the interpreter first: its report.
fn both(dp: &KernelDatapath, flow: &mut CcpFlow, t: &mut KernelFoldTest, a: FoldAck, start_us: u64, what: &str) -> Option<Vec<u64>> {
    flow.sync_datapath(a.ack.cwnd_bytes, a.ack.pacing_rate);
    let step = flow.on_ack(&primitives(&a.ack, a.sample.rate()), a.ack.now_us);
    assert!(step.error.is_none(), "{what}: interpreter fault {:?}", step.error);
    let want = Want { report: step.report.map(|m| m.fields), cwnd_set: step.cwnd_bytes };
    if let Some(fields) = &want.report {
        assert_eq!(fields.len(), report::COUNT);
    }
    let mode = fold::fold_mode(flow).expect("the standard program folds");
    check(dp, t, a, mode, start_us, &want, what);
    want.report
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

#[test]
fn kernel_fold_reports_as_the_interpreter() {
    let dp = load();
    let mut t = KernelFoldTest::default();
    let totals = for_random_flows(200, Restarts::SometimesAfterTheNextAck, Growth::Presets, |r| {
        if r.index == 0 {
            t = KernelFoldTest::default();
        }
        let what = format!("seed {} ack {} (start {}, {:?})", r.seed, r.index, r.start_us, r.mode);
        let want = Want { report: r.report.clone(), cwnd_set: r.cwnd_set };
        check(&dp, &mut t, FoldAck { ack: r.ack, sample: r.sample }, r.mode, r.start_us, &want, &what);
    });
    let (acks, reports) = (totals.acks, totals.reports);
    assert_eq!(acks, 100_000);
    // Both kinds of ACK were compared: some reported, most folded silently.
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs");
    let (loss_windows, growth_windows) = (totals.loss_windows, totals.growth_windows);
    assert!(loss_windows > 500, "{loss_windows} ACKs set a loss window");
    let slow_start_windows = totals.slow_start_windows;
    assert!(growth_windows - slow_start_windows > 500, "{growth_windows} ACKs set a growth window, {slow_start_windows} of them slow start's");
    assert!(slow_start_windows > 500, "{slow_start_windows} ACKs set slow start's window");
    let (timed_windows, timed_waits) = (totals.timed_step_windows, totals.timed_step_waits);
    assert!(timed_windows > 100 && timed_waits > 500, "{timed_windows} ACKs set a timed step's window, {timed_waits} came before its time");
    let (aggregation, multi_ack) = (totals.aggregation_reports, totals.multi_ack_epoch_reports);
    assert!(aggregation > 500 && multi_ack > 200, "{aggregation} reports measured ACK aggregation, {multi_ack} over epochs of several ACKs");
    eprintln!("{acks} ACKs, {reports} reports, {loss_windows} loss windows, {growth_windows} growth windows ({slow_start_windows} slow start's, {timed_windows} timed steps'; {timed_waits} ACKs before a step's time), {aggregation} reports of aggregation ({multi_ack} over several ACKs): identical");
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
        (t.cwnd_bytes, t.cwnd_set)
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

/// The pre-set step of growth applies on the ACK that brings the bytes acknowledged since the
/// report it counts from past `grow_after`, holds until the shim writes the agent's next
/// window, and is void once another report has followed; a loss once it is earned cuts to the
/// grown window's cut (`grow_loss_cwnd`), before it to `loss_cwnd`.
#[test]
fn a_step_of_growth_applies_on_the_ack_that_earns_it() {
    let dp = load();
    let report_at = 1_000_000u64;
    let fresh = || KernelFoldTest {
        directive: KernelDirectiveSlot {
            loss_cwnd_bytes: 5 * 1448,
            grow_cwnd_bytes: 11 * 1448,
            grow_after_bytes: 4 * 1448 - 1,
            grow_from_us: report_at as u32,
            grow_loss_cwnd_bytes: 5 * 1448 + 724,
            ..per_rtt_directive(report_at, 10 * 1448, 3)
        },
        ..Default::default()
    };
    // ACKs of two segments 1 ms apart on a 50-ms path: no report of their own.
    let step = |t: &mut KernelFoldTest, i: u64, lost: u32| {
        t.ack = StdAck {
            now_us: report_at + 1_000 * i,
            bytes_acked: 2 * 1448,
            lost_packets: lost,
            rtt_us: 50_000,
            bytes_in_flight: 8 * 1448,
            cwnd_bytes: 10 * 1448,
            ..Default::default()
        };
        dp.run_fold(t).unwrap();
        (t.cwnd_bytes / 1448, t.cwnd_set / 1448, t.reported != 0)
    };
    let mut t = fresh();
    assert_eq!(step(&mut t, 1, 0), (10, 0, false), "2 segments acknowledged: not yet");
    assert_eq!(step(&mut t, 2, 0), (11, 11, false), "4 segments: the step");
    assert_eq!(step(&mut t, 3, 0), (11, 11, false), "and it holds");
    // The agent's next window (the report after the step brings it).
    t.directive.cwnd_bytes = 11 * 1448;
    t.directive.grow_cwnd_bytes = 0;
    t.directive.cwnd_seq = 4;
    assert_eq!(step(&mut t, 4, 0), (11, 0, false));

    // A loss before the step is earned cuts to loss_cwnd, after it to grow_loss_cwnd.
    let mut t = fresh();
    assert_eq!(step(&mut t, 1, 1), (5, 5, true), "before: the pre-set cut");
    let mut t = fresh();
    step(&mut t, 1, 0);
    step(&mut t, 2, 0);
    let (cwnd, set, reported) = step(&mut t, 3, 1);
    assert_eq!((t.cwnd_bytes, reported), (5 * 1448 + 724, true), "after: the grown window's cut ({cwnd}, {set})");

    // A report since the one the step counts from voids it: here a loss's report, whose window
    // the pre-set cut sets and holds until the agent answers.
    let mut t = fresh();
    assert_eq!(step(&mut t, 1, 1), (5, 5, true));
    t.directive.loss_cwnd_bytes = 0;
    for i in 2..=6 {
        assert_eq!(step(&mut t, i, 0), (5, 0, false), "ack {i}: no step after another report");
    }
}

/// Past the step, the window grows at the pre-set rate (`Control.grow_rate`): a burst of ACKs
/// that arrives before the agent's answer grows it all through, a segment per `cnt`
/// acknowledged, as Linux's `tcp_cong_avoid_ai` does, not once at the next burst's start.
#[test]
fn past_the_step_the_window_grows_at_the_preset_rate() {
    let dp = load();
    let report_at = 1_000_000u64;
    let cnt = 5u64;
    let mut t = KernelFoldTest {
        directive: KernelDirectiveSlot {
            grow_cwnd_bytes: 21 * 1448,
            grow_after_bytes: 3 * 1448 - 1,
            grow_from_us: report_at as u32,
            grow_rate: GROW_RATE_UNIT.div_ceil(cnt) as u32,
            ..per_rtt_directive(report_at, 20 * 1448, 3)
        },
        ..Default::default()
    };
    // A burst of one-segment ACKs 10 µs apart on a 100-ms path: no report of their own.
    let mut windows = Vec::new();
    for i in 1..=20u64 {
        t.ack = StdAck {
            now_us: report_at + 10 * i,
            bytes_acked: 1448,
            rtt_us: 100_000,
            bytes_in_flight: 19 * 1448,
            cwnd_bytes: 20 * 1448,
            ..Default::default()
        };
        dp.run_fold(&mut t).unwrap();
        assert_eq!(t.reported, 0, "ack {i}");
        windows.push(t.cwnd_bytes / 1448);
    }
    // The step on the 3rd segment, then one more on every 5th: the 8th, 13th and 18th.
    let mut want = vec![20, 20];
    for i in 3..=20 {
        want.push(21 + (i - 3) / cnt as u32);
    }
    assert_eq!(windows, want);
    // With no rate, the step only.
    t.directive.grow_rate = 0;
    t.ack.now_us += 10;
    dp.run_fold(&mut t).unwrap();
    assert_eq!(t.cwnd_bytes / 1448, 21);
}

/// A step counted from an earlier report still applies until the agent answers a later one,
/// the bytes counted across the reports between (the chain): a report comes on the first ACK
/// of a round's burst, and the answer a millisecond or more later, while the burst's other
/// ACKs arrive. A loss's report breaks the chain (see above).
#[test]
fn a_step_outlives_a_report_until_the_agent_answers_it() {
    let dp = load();
    let start = 1_000_000u64;
    let mut t = KernelFoldTest { directive: per_rtt_directive(start, 10 * 1448, 3), ..Default::default() };
    let step = |t: &mut KernelFoldTest, now_us: u64| {
        t.ack = StdAck {
            now_us,
            bytes_acked: 2 * 1448,
            rtt_us: 50_000,
            bytes_in_flight: 8 * 1448,
            cwnd_bytes: 10 * 1448,
            ..Default::default()
        };
        dp.run_fold(t).unwrap();
        (t.cwnd_bytes / 1448, t.reported != 0)
    };
    // A report once the RTT has passed (the first since the start), then one a round later.
    let first = start + 50_001;
    assert_eq!(step(&mut t, first), (10, true));
    // The agent's answer to it: a step after 6 more segments.
    t.directive.grow_cwnd_bytes = 11 * 1448;
    t.directive.grow_after_bytes = 6 * 1448 - 1;
    t.directive.grow_from_us = first as u32;
    t.directive.cwnd_seq = 4;
    assert_eq!(step(&mut t, first + 1_000), (10, false), "2 of 6");
    let second = first + 50_001;
    assert_eq!(step(&mut t, second), (10, true), "4 of 6, and a report");
    assert_eq!(step(&mut t, second + 1_000), (11, false), "6 of 6: the step, before the answer");
    // The answer to the second report carries the grown window and a step from it.
    t.directive.cwnd_bytes = 11 * 1448;
    t.directive.grow_cwnd_bytes = 12 * 1448;
    t.directive.grow_after_bytes = 11 * 1448 - 1;
    t.directive.grow_from_us = second as u32;
    t.directive.cwnd_seq = 5;
    assert_eq!(step(&mut t, second + 2_000), (11, false));

    // A loss's report carries nothing: the step from before it stays void.
    let third = second + 50_001;
    t.directive.grow_after_bytes = 4 * 1448 - 1;
    t.directive.loss_cwnd_bytes = 5 * 1448;
    t.ack = StdAck { now_us: third, bytes_acked: 0, lost_packets: 1, rtt_us: 50_000, bytes_in_flight: 8 * 1448, cwnd_bytes: 11 * 1448, ..Default::default() };
    dp.run_fold(&mut t).unwrap();
    assert_eq!((t.cwnd_bytes / 1448, t.reported != 0), (5, true), "the pre-set cut");
    for i in 1..=4 {
        assert_eq!(step(&mut t, third + 1_000 * i), (5, false), "ack {i}: no step carried over a loss");
    }
}

/// Slow start pre-set: the window grows on every ACK by what it acknowledges, from the
/// agent's window at the report it counts from, across reports the agent has not answered
/// yet; an answer that lags behind them does not take back their growth; it stops at the
/// threshold, and a loss ends it.
#[test]
fn slow_start_grows_on_every_ack_across_reports_until_a_loss() {
    let dp = load();
    let seg = 1448u32;
    let start = 1_000_000u64;
    let mut t = KernelFoldTest {
        directive: KernelDirectiveSlot {
            loss_cwnd_bytes: 8 * seg,
            growth: abi::GROWTH_SLOW_START,
            grow_cwnd_bytes: 10 * seg,
            grow_after_bytes: 30 * seg,
            grow_from_us: start as u32,
            ..per_rtt_directive(start, 10 * seg, 3)
        },
        ..Default::default()
    };
    // ACKs of two segments on a 50-ms path, snd_cwnd the window applied on the ACK before.
    let mut snd_cwnd = 10 * seg;
    let mut step = |t: &mut KernelFoldTest, now_us: u64, lost: u32| {
        t.ack = StdAck {
            now_us,
            bytes_acked: 2 * seg,
            lost_packets: lost,
            rtt_us: 50_000,
            bytes_in_flight: 14 * seg,
            cwnd_bytes: snd_cwnd,
            ..Default::default()
        };
        dp.run_fold(t).unwrap();
        snd_cwnd = t.cwnd_bytes;
        (t.cwnd_bytes / seg, t.reported != 0)
    };
    assert_eq!(step(&mut t, start + 1_000, 0), (12, false));
    assert_eq!(step(&mut t, start + 2_000, 0), (14, false));
    let first = start + 50_001;
    assert_eq!(step(&mut t, first, 0), (16, true), "a report, once the RTT has passed");
    assert_eq!(step(&mut t, first + 1_000, 0), (18, false), "growth counted across it");
    let second = first + 50_001;
    assert_eq!(step(&mut t, second, 0), (20, true), "and across another");
    // The agent's answer to the first report arrives only now: its window is behind.
    t.directive.cwnd_bytes = 16 * seg;
    t.directive.grow_cwnd_bytes = 16 * seg;
    t.directive.grow_from_us = first as u32;
    t.directive.cwnd_seq = 4;
    assert_eq!(step(&mut t, second + 1_000, 0), (20, false), "the growth is not taken back");
    // The answer to the second: growth from it, that ACK's included.
    t.directive.cwnd_bytes = 20 * seg;
    t.directive.grow_cwnd_bytes = 20 * seg;
    t.directive.grow_from_us = second as u32;
    t.directive.cwnd_seq = 5;
    for (i, want) in [24, 26, 28, 30, 30].into_iter().enumerate() {
        assert_eq!(step(&mut t, second + 2_000 + 1_000 * i as u64, 0), (want, false), "ack {i}: up to the threshold");
    }
    assert_eq!(step(&mut t, second + 10_000, 1), (8, true), "a loss: the pre-set cut");
    for i in 1..=3 {
        assert_eq!(step(&mut t, second + 10_000 + 1_000 * i, 0), (8, false), "ack {i}: slow start is over");
    }
}

/// The packets cong_control applies for a directive's window are the window divided by the
/// MSS, whichever way it moved: grown by a few segments per ACK (counted on, no division),
/// by more, cut, unchanged, or with a new MSS.
#[test]
fn a_window_in_whole_packets_is_the_division_it_avoids() {
    let dp = load();
    let mut rng = ccswitch_datapath_support::rng::SplitMix64(21);
    let mut t = abi::KernelCwndPktsTest::default();
    let (mut bytes, mut mss) = (14_480u32, 1448u32);
    let (mut counted_on, mut divided) = (0, 0);
    for i in 0..100_000 {
        match rng.below(100) {
            0..=79 => bytes = bytes.saturating_add(rng.below(4 * mss as u64 + 1) as u32), // slow start's ACKs
            80..=89 => bytes = bytes.saturating_add(rng.below(200 * mss as u64) as u32),
            90..=95 => bytes = (bytes / 2).max(1),
            96..=97 => {}
            _ => mss = [536, 1200, 1448, 8948][rng.below(4) as usize],
        }
        if bytes > 1 << 30 {
            bytes = 10 * mss;
        }
        let before = t;
        t.bytes = bytes;
        t.mss = mss;
        dp.run_cwnd_pkts(&mut t).unwrap();
        assert_eq!(t.pkts, bytes / mss, "step {i}: {bytes} bytes / {mss} from {before:?}");
        assert_eq!((t.cache_bytes, t.cache_mss, t.cache_pkts), (bytes, mss, bytes / mss), "step {i}: the cache");
        // Growth by up to four segments is counted on (GROWTH_SEGMENTS_COUNTED).
        if before.cache_mss == mss && bytes > before.cache_bytes && bytes - before.cache_bytes <= 4 * mss {
            counted_on += 1;
        } else {
            divided += 1;
        }
    }
    assert!(counted_on > 50_000 && divided > 10_000, "{counted_on} counted on, {divided} otherwise");
}
