//! The egress program's fold of the standard program against the shim's interpreter, the
//! reference: random ACK sequences run through `ccswitch_ccp::CcpFlow` (the standard program as
//! the agent installs it), through the BPF fold (`ccsw_std_fold_ack` of
//! datapaths/bpf/std_fold.bpf.h, which on_ack runs; here through its test program with
//! BPF_PROG_TEST_RUN), and through the shim's half of the fold (`ShimFold`, which folds the
//! ACKs the port sends up). Every ACK must report the same, with the same fields. The BPF part
//! needs root.

use std::sync::Arc;

use ccswitch_ccp::program::standard::{self, control, report};
use ccswitch_ccp::wire::{self, Msg, UpdateField};
use ccswitch_ccp::{CcpFlow, Primitives, Program};
use ccswitch_datapath_support::rng::SplitMix64;
use ccswitch_ovs::abi::{OvsFoldTest, StdAck};
use ccswitch_ovs::events::Folded;
use ccswitch_ovs::fold::ShimFold;
use ccswitch_ovs::loader::{AttachOptions, OvsDatapath};

fn standard_program() -> Arc<Program> {
    let (msg, _) = wire::decode(standard::INSTALL_MESSAGE).unwrap();
    let Msg::InstallExpr(install) = msg else { panic!("an INSTALL_EXPR") };
    Arc::new(Program::from_install(&install).unwrap())
}

fn per_ack(on: bool) -> UpdateField {
    UpdateField { reg_type: 0, reg_index: control::PER_ACK as u32, value: u64::from(on) }
}

/// One ACK as the port or the shim measures it: sizes, losses and timing vary by sequence.
fn random_ack(rng: &mut SplitMix64, now_us: u64, rtt_us: u32) -> StdAck {
    let packets = rng.below(4) as u32;
    StdAck {
        now_us,
        rate_incoming: if rng.chance(60) { rng.below(30_000_000) } else { 0 },
        bytes_acked: packets * 1448,
        lost_packets: if rng.chance(3) { 1 + rng.below(4) as u32 } else { 0 },
        ecn_packets: if rng.chance(4) { packets } else { 0 },
        was_timeout: u32::from(rng.chance(1)),
        rtt_us,
        bytes_in_flight: rng.below(3_000_000) as u32,
    }
}

fn prims(a: &StdAck) -> Primitives {
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

/// Runs `seeds` random flows of 500 ACKs; calls `check(seed, ack index, ack, start, per_ack,
/// the interpreter's report)` for each ACK.
fn for_random_flows(seeds: u64, mut check: impl FnMut(u64, usize, &StdAck, u64, bool, Option<Vec<u64>>)) -> (u64, u64) {
    let program = standard_program();
    let (mut acks, mut reports) = (0, 0);
    for seed in 0..seeds {
        let mut rng = SplitMix64(seed);
        let mut now_us = 1_000_000 + rng.below(1 << 40);
        let mut start_us = now_us;
        let mut mode = rng.chance(20);
        let mut flow = CcpFlow::new(1, 14_480, 1448);
        flow.change_program(program.clone(), &[per_ack(mode)], start_us).unwrap();
        let mut rtt_us: u32 = if rng.chance(30) { 0 } else { 500 + rng.below(300_000) as u32 };
        for i in 0..500 {
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
                // A restart (a handover between simple algorithms), at this ACK's time; the
                // datapath tells restarts apart by their start, which the session keeps rising.
                start_us = now_us.max(start_us + 1);
                mode = rng.chance(20);
                flow.change_program(program.clone(), &[per_ack(mode)], start_us).unwrap();
            } else if rng.chance(1) {
                mode = !mode;
                flow.update_fields(&[per_ack(mode)]).unwrap();
            }
            let a = random_ack(&mut rng, now_us, rtt_us);
            let step = flow.on_ack(&prims(&a), now_us);
            assert!(step.error.is_none(), "seed {seed} ack {i}: interpreter fault {:?}", step.error);
            let want = step.report.map(|m| m.fields);
            if let Some(f) = &want {
                assert_eq!(f.len(), report::COUNT);
            }
            reports += u64::from(want.is_some());
            acks += 1;
            check(seed, i, &a, start_us, mode, want);
        }
    }
    (acks, reports)
}

#[test]
fn the_port_programs_fold_reports_as_the_interpreter() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    let dp = OvsDatapath::load_detached(&AttachOptions { max_flows: 16, ring_bytes: 1 << 16, slab_slots: 16, ..Default::default() })
        .expect("load the port programs");
    let mut t = OvsFoldTest::default();
    let mut last_seed = u64::MAX;
    let (acks, reports) = for_random_flows(200, |seed, i, a, start_us, mode, want| {
        if seed != last_seed {
            t = OvsFoldTest::default();
            last_seed = seed;
        }
        t.ack = *a;
        t.start_us = start_us;
        t.per_ack = u32::from(mode);
        dp.run_fold(&mut t).unwrap();
        let got = (t.reported != 0).then(|| t.report.fields.to_vec());
        assert_eq!(got, want, "seed {seed} ack {i} (start {start_us}, per_ack {mode}): {a:?}");
    });
    assert_eq!(acks, 100_000);
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs: both kinds compared");
}

#[test]
fn the_shims_fold_reports_as_the_interpreter() {
    let mut fold: Option<ShimFold> = None;
    let (acks, reports) = for_random_flows(200, |seed, i, a, start_us, mode, want| {
        if i == 0 || fold.as_ref().map(ShimFold::start_us) != Some(start_us) {
            fold = Some(ShimFold::new(start_us, mode));
        }
        let f = fold.as_mut().expect("set");
        f.set_per_ack(mode);
        let got = f.fold_ack(&prims(a)).map(|r| r.to_vec());
        assert_eq!(got, want, "seed {seed} ack {i} (start {start_us}, per_ack {mode}): {a:?}");
    });
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs");
}

#[test]
fn registers_the_port_folded_and_handed_over_report_with_the_shims_next_ack() {
    // The port folded three ACKs without a report (no RTT sample yet), then sent up an ACK
    // that carries a loss: the shim merges the registers and folds that ACK, and the report
    // covers all four, as the interpreter's would.
    let start = 1_000_000;
    let mut shim = ShimFold::new(start, false);
    let mut regs = [0u64; report::COUNT];
    regs[report::ACKED] = 3 * 1448;
    regs[report::RTT] = 0xffff_ffff;
    regs[report::MINRTT] = 0xffff_ffff;
    regs[report::INFLIGHT] = 20_000;
    regs[report::RATE] = 9_000_000;
    regs[report::NOW] = start + 300;
    let handed = Folded { flow_id: 1, ts_ns: 0, start_us: start, ack: 0, window_bytes: 0, acks: 3, reported: false, fields: regs };
    assert_eq!(shim.merge(&handed), None, "handed over, not a report");
    let loss = Primitives { bytes_acked: 0, lost_pkts_sample: 1, rtt_sample_us: 0, bytes_in_flight: 18_000, rate_incoming: 1_000, now: start + 400, ..Primitives::default() };
    let r = shim.fold_ack(&loss).expect("a loss reports");
    assert_eq!(r[report::ACKED], 3 * 1448);
    assert_eq!(r[report::LOST], 1);
    assert_eq!(r[report::INFLIGHT], 18_000, "the latest ACK's");
    assert_eq!(r[report::RATE], 9_000_000, "the maximum");
    assert_eq!(r[report::NOW], start + 400);
    // Registers of an earlier program start are dropped, as the interpreter resets them.
    let stale = Folded { start_us: start - 1, reported: true, ..handed };
    assert_eq!(shim.merge(&stale), None);
    // A report the port made: merged with what the shim holds, sent as one.
    shim.fold_ack(&Primitives { bytes_acked: 1448, rtt_sample_us: 0, now: start + 500, ..Primitives::default() });
    let mut regs2 = regs;
    regs2[report::ACKED] = 1448;
    regs2[report::NOW] = start + 900;
    let r = shim.merge(&Folded { fields: regs2, reported: true, acks: 1, ..handed }).expect("the port's report");
    assert_eq!((r[report::ACKED], r[report::NOW]), (2 * 1448, start + 900));
}
