//! The ovs datapath's fold of the standard program against the shim's interpreter, the
//! reference: random ACK sequences run through `ccswitch_ccp::CcpFlow` (the standard program as
//! the agent installs it, its controls varied) and through the fold, and every ACK must report
//! the same, with the same fields, and set the same loss window. The fold is in two halves:
//! the port's (`ccsw_std_fold_ack` of datapaths/bpf/std_fold.bpf.h, which the egress program
//! runs; here through its test program, with BPF_PROG_TEST_RUN) and the shim's (`ShimFold`,
//! for the ACKs the port sends up). Each half is compared alone, and then both together as the
//! datapath splits the work: ACKs that carry no loss, timeout or ECN folded by the port, the
//! rest by the shim after the port hands its registers over. The port's half needs root.

use std::sync::Arc;

use ccswitch_ccp::program::fold::{fold_mode, FoldMode, FoldReporting};
use ccswitch_protocol::standard::{self, control, report};
use ccswitch_protocol::wire::{self, Msg, UpdateField};
use ccswitch_ccp::{CcpFlow, Primitives, Program};
use ccswitch_datapath_support::rng::SplitMix64;
use ccswitch_datapath_support::std_fold::{StdAck, StdFold, StdRegs, StdReporting};
use ccswitch_ovs::abi::OvsFoldTest;
use ccswitch_ovs::events::Folded;
use ccswitch_ovs::fold::ShimFold;
use ccswitch_ovs::loader::{AttachOptions, OvsDatapath};

fn standard_program() -> Arc<Program> {
    let (msg, _) = wire::decode(standard::INSTALL_MESSAGE).unwrap();
    let Msg::InstallExpr(install) = msg else { panic!("an INSTALL_EXPR") };
    Arc::new(Program::from_install(&install).unwrap())
}

fn set(index: usize, value: u64) -> UpdateField {
    UpdateField { reg_type: 0, reg_index: index as u32, value }
}

/// Controls of a flow: reporting per ACK or not, the window share that binds, the idle
/// interval, and a loss window or none.
fn random_controls(rng: &mut SplitMix64) -> Vec<UpdateField> {
    vec![
        set(control::PER_ACK, u64::from(rng.chance(15))),
        set(control::WINDOW_USE_PCT, [50, 50, 0, 80, 100][rng.below(5) as usize]),
        set(control::IDLE_REPORT_US, [1_000_000, 1_000_000, 50_000, 5_000_000][rng.below(4) as usize]),
        set(control::LOSS_CWND, if rng.chance(50) { 4_000 + rng.below(1_000_000) } else { 0 }),
    ]
}

/// One ACK: sizes, losses, marks, windows, pacing and timing vary by sequence.
fn random_ack(rng: &mut SplitMix64, now_us: u64, rtt_us: u32) -> StdAck {
    let packets = rng.below(4) as u32;
    StdAck {
        now_us,
        rate_incoming: if rng.chance(60) { rng.below(30_000_000) } else { 0 },
        pacing_rate: if rng.chance(10) { 1 + rng.below(10_000_000) } else { 0 },
        bytes_acked: packets * 1448,
        lost_packets: if rng.chance(3) { 1 + rng.below(4) as u32 } else { 0 },
        ecn_packets: if rng.chance(3) { packets } else { 0 },
        was_timeout: u32::from(rng.chance(1)),
        rtt_us,
        bytes_in_flight: rng.below(2_000_000) as u32,
        // Windows above and below what is in flight: the flow held by its window or not.
        cwnd_bytes: 2896 + rng.below(3_000_000) as u32,
        _pad0: 0,
    }
}

/// The interpreter's primitives for `a`, with the window and rate the program holds.
fn primitives(flow: &mut CcpFlow, a: &StdAck) -> Primitives {
    flow.sync_datapath(a.cwnd_bytes, a.pacing_rate);
    Primitives {
        bytes_acked: u64::from(a.bytes_acked),
        packets_acked: u64::from(a.bytes_acked / 1448),
        ecn_packets: u64::from(a.ecn_packets),
        lost_pkts_sample: u64::from(a.lost_packets),
        was_timeout: a.was_timeout != 0,
        rtt_sample_us: u64::from(a.rtt_us),
        rate_incoming: a.rate_incoming,
        bytes_in_flight: u64::from(a.bytes_in_flight),
        now: a.now_us,
        ..Primitives::default()
    }
}

fn reporting(mode: FoldMode) -> StdReporting {
    match mode.reporting {
        FoldReporting::PerAck => StdReporting { per_ack: 1, ..Default::default() },
        FoldReporting::PerRtt { window_use_pct, idle_report_us } => StdReporting { idle_report_us, window_use_pct, per_ack: 0 },
    }
}

/// What the interpreter did on one ACK: its report and the window its loss clause set.
struct Want {
    report: Option<Vec<u64>>,
    loss_cwnd: Option<u32>,
}

/// Runs `seeds` random flows of 500 ACKs; `check(seed, index, ack, start, mode, what the
/// interpreter did)` for each. A new seed starts with index 0.
fn for_random_flows(seeds: u64, mut check: impl FnMut(u64, usize, &StdAck, u64, FoldMode, Want)) -> (u64, u64) {
    let program = standard_program();
    let (mut acks, mut reports) = (0, 0);
    for seed in 0..seeds {
        let mut rng = SplitMix64(seed);
        let mut now_us = 1_000_000 + rng.below(1 << 40);
        let mut start_us = now_us;
        let mut flow = CcpFlow::new(1, 14_480, 1448);
        flow.change_program(program.clone(), &random_controls(&mut rng), start_us).unwrap();
        let mut rtt_us: u32 = if rng.chance(30) { 0 } else { 500 + rng.below(300_000) as u32 };
        for i in 0..500 {
            now_us += match rng.below(10) {
                0 => 0,
                1..=7 => rng.below(500),
                8 => rng.below(400_000),
                _ => rng.below(3_000_000),
            };
            if rng.chance(10) {
                rtt_us = 500 + rng.below(300_000) as u32;
            }
            if rng.chance(1) {
                // A restart (a handover between simple algorithms); the session gives each
                // restart a later start than the last.
                start_us = now_us.max(start_us + 1);
                flow.change_program(program.clone(), &random_controls(&mut rng), start_us).unwrap();
            } else if rng.chance(2) {
                // The agent changes the controls without a restart.
                flow.update_fields(&random_controls(&mut rng)).unwrap();
            }
            let mode = fold_mode(&flow).expect("the standard program folds");
            let a = random_ack(&mut rng, now_us, rtt_us);
            let prims = primitives(&mut flow, &a);
            let step = flow.on_ack(&prims, now_us);
            assert!(step.error.is_none(), "seed {seed} ack {i}: interpreter fault {:?}", step.error);
            let report = step.report.map(|m| m.fields);
            if let Some(f) = &report {
                assert_eq!(f.len(), report::COUNT);
            }
            reports += u64::from(report.is_some());
            acks += 1;
            check(seed, i, &a, start_us, mode, Want { report, loss_cwnd: step.cwnd_bytes });
        }
    }
    (acks, reports)
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
    let (acks, reports) = for_random_flows(200, |seed, i, a, start_us, mode, want| {
        if i == 0 {
            t = OvsFoldTest::default();
        }
        t.ack = *a;
        t.start_us = start_us;
        t.reporting = reporting(mode);
        dp.run_fold(&mut t).unwrap();
        let got = (t.reported != 0).then(|| t.report.fields.to_vec());
        assert_eq!(got, want.report, "seed {seed} ack {i} (start {start_us}, {mode:?}): {a:?}");
    });
    assert_eq!(acks, 100_000);
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs: both kinds compared");
}

#[test]
fn the_shims_fold_reports_and_sets_the_loss_window_as_the_interpreter() {
    let mut fold: Option<ShimFold> = None;
    let mut loss_windows = 0;
    let (acks, reports) = for_random_flows(200, |seed, i, a, start_us, mode, want| {
        if i == 0 || fold.as_ref().map(ShimFold::start_us) != Some(start_us) {
            fold = Some(ShimFold::new(start_us, mode));
        }
        let f = fold.as_mut().expect("set");
        f.set_mode(mode);
        let mut p = Primitives { rtt_sample_us: u64::from(a.rtt_us), ..Primitives::default() };
        p.bytes_acked = u64::from(a.bytes_acked);
        p.ecn_packets = u64::from(a.ecn_packets);
        p.lost_pkts_sample = u64::from(a.lost_packets);
        p.was_timeout = a.was_timeout != 0;
        p.rate_incoming = a.rate_incoming;
        p.bytes_in_flight = u64::from(a.bytes_in_flight);
        p.now = a.now_us;
        let step = f.fold_ack(&p, a.cwnd_bytes, a.pacing_rate);
        let got = step.report.map(|r| r.to_vec());
        assert_eq!(got, want.report, "seed {seed} ack {i} (start {start_us}, {mode:?}): {a:?}");
        assert_eq!(commanded(step.loss_cwnd, a), want.loss_cwnd, "seed {seed} ack {i}: loss window, {a:?}");
        loss_windows += u32::from(want.loss_cwnd.is_some());
    });
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs");
    assert!(loss_windows > 500, "{loss_windows} loss windows compared");
}

/// The port's state as the egress program keeps it, and the shim's, for one flow.
struct Split {
    port: StdFold,
    port_acks: u32,
    shim: ShimFold,
}

#[test]
fn the_port_and_the_shim_folding_in_turn_report_as_the_interpreter() {
    let dp = load();
    let mut split: Option<Split> = None;
    let (mut by_port, mut by_shim, mut handed_over) = (0u64, 0u64, 0u64);
    let (acks, reports) = for_random_flows(200, |seed, i, a, start_us, mode, want| {
        let what = format!("seed {seed} ack {i} (start {start_us}, {mode:?}): {a:?}");
        if i == 0 || split.as_ref().map(|s| s.shim.start_us()) != Some(start_us) {
            split = Some(Split { port: StdFold::default(), port_acks: 0, shim: ShimFold::new(start_us, mode) });
        }
        let s = split.as_mut().expect("set");
        s.shim.set_mode(mode);
        let folded = |regs: StdRegs, acks: u32, reported: bool| Folded {
            flow_id: 1, ts_ns: 0, start_us, ack: 0, window_bytes: 0, acks, reported, fields: regs.fields,
        };
        // The port folds what carries no loss signal, timeout or ECN mark, unless the shim
        // holds ECN marks it has not reported (the hold); otherwise it takes some ACKs at
        // random, as the shim's recovery would hold them.
        let to_port = a.lost_packets == 0 && a.was_timeout == 0 && a.ecn_packets == 0 && !s.shim.holds_ecn() && (i * 7 + seed as usize) % 5 != 0;
        let got = if to_port {
            by_port += 1;
            let mut t = OvsFoldTest { state: s.port, ack: *a, reporting: reporting(mode), start_us, ..Default::default() };
            // As the egress program does (fold_routine_ack): a new start resets the
            // registers, and Micros restarted where the shim last reported.
            if t.state.start_us != start_us {
                t.state = StdFold { micros_zero_us: start_us, start_us, ..StdFold::default() };
                t.state.regs.fields[report::MINRTT] = standard::NO_RTT_SAMPLE_US;
                s.port_acks = 0;
            }
            t.state.micros_zero_us = t.state.micros_zero_us.max(s.shim.micros_zero_us());
            dp.run_fold(&mut t).unwrap();
            s.port = t.state;
            s.port_acks += 1;
            if t.reported != 0 {
                let report = s.shim.merge(&folded(t.report, s.port_acks, true));
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
                assert_eq!(s.shim.merge(&folded(s.port.regs, s.port_acks, false)), None);
                s.port.regs = StdRegs::default();
                s.port.regs.fields[report::MINRTT] = standard::NO_RTT_SAMPLE_US;
                s.port_acks = 0;
            }
            let p = Primitives {
                bytes_acked: u64::from(a.bytes_acked),
                ecn_packets: u64::from(a.ecn_packets),
                lost_pkts_sample: u64::from(a.lost_packets),
                was_timeout: a.was_timeout != 0,
                rtt_sample_us: u64::from(a.rtt_us),
                rate_incoming: a.rate_incoming,
                bytes_in_flight: u64::from(a.bytes_in_flight),
                now: a.now_us,
                ..Primitives::default()
            };
            let step = s.shim.fold_ack(&p, a.cwnd_bytes, a.pacing_rate);
            assert_eq!(commanded(step.loss_cwnd, a), want.loss_cwnd, "{what}: loss window");
            step.report
        };
        assert_eq!(got.map(|r| r.to_vec()), want.report, "{what}");
    });
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
    assert_eq!(shim.merge(&handed), None, "handed over, not a report");
    let loss = Primitives { lost_pkts_sample: 1, bytes_in_flight: 18_000, rate_incoming: 1_000, now: start + 400, ..Primitives::default() };
    let r = shim.fold_ack(&loss, 100_000, 0).report.expect("a loss reports");
    assert_eq!(r[report::ACKED], 3 * 1448);
    assert_eq!(r[report::LOST], 1);
    assert_eq!(r[report::INFLIGHT], 18_000, "the latest ACK's");
    assert_eq!(r[report::RATE], 9_000_000, "the maximum");
    assert_eq!(r[report::NOW], start + 400);
    assert_eq!(shim.micros_zero_us(), start + 400, "Micros restarts at the report");
    // Registers of an earlier program start are dropped, as the interpreter resets them.
    assert_eq!(shim.merge(&Folded { start_us: start - 1, reported: true, ..handed }), None);
}
