//! The ovs datapath's fold of the standard program against the shim's interpreter, the
//! reference: random ACK sequences run through `ccswitch_ccp::CcpFlow` (the standard program as
//! the agent installs it, its controls varied) and through the fold, and every ACK must report
//! the same, with the same fields, and set the same loss window. The fold is in two halves:
//! the port's (`ccsw_std_fold_ack` of datapaths/bpf/std_fold.bpf.h, which the egress program
//! runs; here through its test program, with BPF_PROG_TEST_RUN) and the shim's (`ShimFold`,
//! for the ACKs the port sends up). Each half is compared alone, and then both together as the
//! datapath splits the work: ACKs that carry no loss, timeout or ECN folded by the port, the
//! rest by the shim after the port hands its registers over. The port's half needs root.

use ccswitch_ccp::program::fold::{FoldMode, FoldReporting};
use ccswitch_ccp::Primitives;
use ccswitch_datapath_support::std_fold::{StdAck, StdFold, StdRegs, StdReporting};
use ccswitch_datapath_support::testing::{for_random_flows, primitives, Growth, Restarts};
use ccswitch_ovs::abi::OvsFoldTest;
use ccswitch_ovs::events::Folded;
use ccswitch_ovs::fold::ShimFold;
use ccswitch_ovs::loader::{AttachOptions, OvsDatapath};
use ccswitch_protocol::standard::report;

fn reporting(mode: FoldMode) -> StdReporting {
    match mode.reporting {
        FoldReporting::PerAck => StdReporting { per_ack: 1, ..Default::default() },
        FoldReporting::PerRtt { window_use_pct, idle_report_us } => StdReporting { idle_report_us, window_use_pct, per_ack: 0 },
    }
}

fn load() -> OvsDatapath {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    OvsDatapath::load_detached(&AttachOptions { max_flows: 16, ring_bytes: 1 << 16, slab_slots: 16, ..Default::default() })
        .expect("load the port programs")
}

/// The window the loss clause set, as the interpreter commands it: none when the flow holds
/// that window already.
fn commanded(loss_cwnd: Option<u32>, a: &StdAck) -> Option<u32> {
    loss_cwnd.filter(|&w| w != a.cwnd_bytes)
}

#[test]
fn the_port_programs_fold_reports_as_the_interpreter() {
    let dp = load();
    let mut t = OvsFoldTest::default();
    let totals = for_random_flows(200, Restarts::SometimesAfterTheNextAck, Growth::None, |r| {
        if r.index == 0 {
            t = OvsFoldTest::default();
        }
        t.ack = r.ack;
        t.start_us = r.start_us;
        t.reporting = reporting(r.mode);
        dp.run_fold(&mut t).unwrap();
        let got = (t.reported != 0).then(|| t.report.report(&Default::default()).to_vec());
        assert_eq!(got, r.report, "{r:?}");
    });
    let (acks, reports) = (totals.acks, totals.reports);
    assert_eq!(acks, 100_000);
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs: both kinds compared");
}

#[test]
fn the_shims_fold_reports_and_sets_the_loss_window_as_the_interpreter() {
    let mut fold: Option<ShimFold> = None;
    let mut loss_windows = 0;
    let totals = for_random_flows(200, Restarts::SometimesAfterTheNextAck, Growth::None, |r| {
        if r.index == 0 || fold.as_ref().map(ShimFold::start_us) != Some(r.start_us) {
            fold = Some(ShimFold::new(r.start_us, r.mode));
        }
        let f = fold.as_mut().expect("set");
        f.set_mode(r.mode);
        let a = &r.ack;
        let step = f.fold_ack(&primitives(a, a.rate_incoming), a.cwnd_bytes, a.pacing_rate);
        let got = step.report.map(|r| r.to_vec());
        assert_eq!(got, r.report, "{r:?}");
        assert_eq!(commanded(step.loss_cwnd, a), r.cwnd_set, "loss window, {r:?}");
        loss_windows += u32::from(r.cwnd_set.is_some());
    });
    let (acks, reports) = (totals.acks, totals.reports);
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs");
    assert!(loss_windows > 500, "{loss_windows} loss windows compared");
}

/// The port's state as the egress program keeps it, and the shim's, for one flow.
struct Split {
    port: StdFold,
    port_acks: u32,
    /// The port reported under the current start (CCSW_F_FOLD_REPORTED).
    port_reported: bool,
    shim: ShimFold,
}

#[test]
fn the_port_and_the_shim_folding_in_turn_report_as_the_interpreter() {
    let dp = load();
    let mut split: Option<Split> = None;
    let (mut by_port, mut by_shim, mut handed_over) = (0u64, 0u64, 0u64);
    let totals = for_random_flows(200, Restarts::SometimesAfterTheNextAck, Growth::None, |r| {
        let (seed, i, a, start_us, mode) = (r.seed, r.index, &r.ack, r.start_us, r.mode);
        let what = format!("{r:?}");
        if i == 0 || split.as_ref().map(|s| s.shim.start_us()) != Some(start_us) {
            split = Some(Split { port: StdFold::default(), port_acks: 0, port_reported: false, shim: ShimFold::new(start_us, mode) });
        }
        let s = split.as_mut().expect("set");
        s.shim.set_mode(mode);
        let folded = |regs: StdRegs, acks: u32, reported: bool| Folded {
            flow_id: 1, ts_ns: 0, start_us, ack: 0, window_bytes: 0, acks, reported, fields: regs.report(&Default::default()),
        };
        // The port folds what carries no loss signal, timeout or ECN mark, unless the shim
        // holds ECN marks it has not reported (the hold); otherwise it takes some ACKs at
        // random, as the shim's recovery would hold them.
        let to_port = a.lost_packets == 0 && a.was_timeout == 0 && a.ecn_packets == 0 && !s.shim.holds_ecn() && (i * 7 + seed as usize) % 5 != 0;
        let got = if to_port {
            by_port += 1;
            let mut t = OvsFoldTest { state: s.port, ack: *a, reporting: reporting(mode), start_us, ..Default::default() };
            // As the egress program does (fold_routine_ack): a new start resets the
            // registers, and Micros restarted where the shim last reported, if it reported
            // under this start after the port last did.
            if t.state.start_us != start_us {
                t.state = StdFold { regs: StdRegs::reset(), micros_zero_us: start_us, start_us };
                s.port_acks = 0;
                s.port_reported = false;
            }
            // The directive carries the shim's latest report under this start, 0 if none.
            let shim_zero = s.shim.reported_at_us().unwrap_or(0);
            if shim_zero != 0 && (!s.port_reported || shim_zero > t.state.micros_zero_us) {
                t.state.micros_zero_us = shim_zero;
            }
            dp.run_fold(&mut t).unwrap();
            s.port = t.state;
            s.port_acks += 1;
            s.port_reported |= t.reported != 0;
            if t.reported != 0 {
                let report = s.shim.merge(&folded(t.report, s.port_acks, true)).report;
                s.port_acks = 0;
                report
            } else {
                None
            }
        } else {
            by_shim += 1;
            if s.port_acks > 0 {
                // The port hands its registers over before the ACK it sends up.
                handed_over += 1;
                assert_eq!(s.shim.merge(&folded(s.port.regs, s.port_acks, false)).report, None);
                s.port.regs = StdRegs::reset();
                s.port_acks = 0;
            }
            let p = primitives(a, a.rate_incoming);
            let step = s.shim.fold_ack(&p, a.cwnd_bytes, a.pacing_rate);
            assert_eq!(commanded(step.loss_cwnd, a), r.cwnd_set, "{what}: loss window");
            step.report
        };
        assert_eq!(got.map(|r| r.to_vec()), r.report, "{what}");
    });
    let (acks, reports) = (totals.acks, totals.reports);
    assert_eq!(acks, 100_000);
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs");
    assert!(by_port > 50_000 && by_shim > 10_000 && handed_over > 5_000, "{by_port} by the port, {by_shim} by the shim, {handed_over} handed over");
}

#[test]
fn registers_the_port_handed_over_report_with_the_shims_next_ack() {
    // The port folded three ACKs without a report, then sent up an ACK that carries a loss:
    // the shim merges the registers and folds that ACK, and the report covers all four.
    let start = 1_000_000;
    let mode = FoldMode::PER_RTT;
    let mut shim = ShimFold::new(start, mode);
    let mut regs = [0u64; report::COUNT];
    regs[report::ACKED] = 3 * 1448;
    regs[report::RTT] = 0xffff_ffff;
    regs[report::MINRTT] = 0xffff_ffff;
    regs[report::INFLIGHT] = 20_000;
    regs[report::RATE] = 9_000_000;
    regs[report::NOW] = start + 300;
    let handed = Folded { flow_id: 1, ts_ns: 0, start_us: start, ack: 0, window_bytes: 0, acks: 3, reported: false, fields: regs };
    assert_eq!(shim.merge(&handed).report, None, "handed over, not a report");
    assert_eq!(shim.reported_at_us(), None, "no report under this start yet: the port restarts Micros at the start");
    let loss = Primitives { lost_pkts_sample: 1, bytes_in_flight: 18_000, rate_incoming: 1_000, now: start + 400, ..Primitives::default() };
    let r = shim.fold_ack(&loss, 100_000, 0).report.expect("a loss reports");
    assert_eq!(r[report::ACKED], 3 * 1448);
    assert_eq!(r[report::LOST], 1);
    assert_eq!(r[report::INFLIGHT], 18_000, "the latest ACK's");
    assert_eq!(r[report::RATE], 9_000_000, "the maximum");
    assert_eq!(r[report::NOW], start + 400);
    assert_eq!(shim.micros_zero_us(), start + 400, "Micros restarts at the report");
    assert_eq!(shim.reported_at_us(), Some(start + 400), "which the directive carries to the port");
    // Registers of an earlier program start are dropped, as the interpreter resets them.
    assert_eq!(shim.merge(&Folded { start_us: start - 1, reported: true, ..handed }).report, None);
}

#[test]
fn slow_start_grows_the_window_at_the_shims_grain_across_reports_until_a_loss() {
    // Slow start pre-set from the program's start: 10 segments, up to 40. The shim folds some
    // ACKs itself and merges the registers the port folded; the window is what the program's
    // slow start would have set by then, across a report the agent has not answered.
    let (start, seg) = (1_000_000u64, 1448u64);
    let mut mode = FoldMode::PER_RTT;
    mode.growth.from_us = start;
    mode.growth.slow_start_cwnd_bytes = 10 * seg as u32;
    mode.growth.after_bytes = 40 * seg as u32;
    mode.loss_cwnd_bytes = 8 * seg as u32;
    let mut shim = ShimFold::new(start, mode);
    let ack = |now: u64, lost: u64| Primitives {
        bytes_acked: 2 * seg,
        lost_pkts_sample: lost,
        rtt_sample_us: 50_000,
        bytes_in_flight: 30 * seg,
        now,
        ..Primitives::default()
    };
    let segs = |s: ccswitch_ovs::fold::FoldStep| s.slow_start_cwnd.map(|w| u64::from(w) / seg);
    assert_eq!(segs(shim.fold_ack(&ack(start + 1_000, 0), 10 * seg as u32, 0)), Some(12));
    let mut regs = [0u64; report::COUNT];
    regs[report::ACKED] = 6 * seg;
    regs[report::RTT] = 50_000;
    regs[report::MINRTT] = 50_000;
    regs[report::NOW] = start + 5_000;
    let batch = Folded { flow_id: 1, ts_ns: 0, start_us: start, ack: 0, window_bytes: 0, acks: 3, reported: false, fields: regs };
    assert_eq!(segs(shim.merge(&batch)), Some(18), "the port's three ACKs");
    regs[report::NOW] = start + 50_001;
    let step = shim.merge(&Folded { reported: true, fields: regs, ..batch });
    assert!(step.report.is_some());
    assert_eq!(segs(step), Some(24), "a report: counted before it");
    assert_eq!(segs(shim.fold_ack(&ack(start + 51_000, 0), 24 * seg as u32, 0)), Some(26), "and across it");
    // The agent answers the report: growth from its window (24) and the bytes since.
    mode.growth.from_us = start + 50_001;
    mode.growth.slow_start_cwnd_bytes = 24 * seg as u32;
    shim.set_mode(mode);
    assert_eq!(segs(shim.fold_ack(&ack(start + 52_000, 0), 24 * seg as u32, 0)), Some(28));
    for _ in 0..10 {
        shim.fold_ack(&ack(start + 53_000, 0), 30 * seg as u32, 0);
    }
    assert_eq!(segs(shim.fold_ack(&ack(start + 54_000, 0), 40 * seg as u32, 0)), Some(40), "at most the threshold");
    let loss = shim.fold_ack(&ack(start + 55_000, 1), 40 * seg as u32, 0);
    assert_eq!((loss.loss_cwnd, loss.slow_start_cwnd), (Some(8 * seg as u32), None), "a loss ends it");
    assert_eq!(segs(shim.fold_ack(&ack(start + 56_000, 0), 8 * seg as u32, 0)), None, "the chain is broken");
}
