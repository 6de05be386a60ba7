//! The kernel's fold of the standard program against the shim's interpreter, the reference:
//! the same ACK sequences run through `ccswitch_ccp::CcpFlow` (the standard program as the agent
//! installs it) and through the BPF fold that `cong_control` runs (its test program, with
//! BPF_PROG_TEST_RUN), and every ACK must report the same, with the same fields. Needs root.

use ccswitch_ccp::program::standard::{self, control, report};
use ccswitch_datapath_support::rng::SplitMix64;
use ccswitch_ccp::wire::{self, Msg, UpdateField};
use ccswitch_ccp::{CcpFlow, Primitives, Program};
use ccswitch_kernel::abi::{FoldAck, FoldTest};
use ccswitch_kernel::{Fallback, KernelDatapath, LoadOptions};
use std::sync::Arc;

fn standard_program() -> Arc<Program> {
    let (msg, _) = wire::decode(standard::INSTALL_MESSAGE).unwrap();
    let Msg::InstallExpr(install) = msg else { panic!("an INSTALL_EXPR") };
    Arc::new(Program::from_install(&install).unwrap())
}

fn per_ack_update(on: bool) -> UpdateField {
    UpdateField { reg_type: 0, reg_index: control::PER_ACK as u32, value: u64::from(on) }
}

/// One ACK of a flow whose path, losses and timing vary by sequence.
fn random_ack(rng: &mut SplitMix64, now_us: u64, rtt_us: u32) -> FoldAck {
    let mss = 1448;
    let packets = rng.below(4) as u32;
    FoldAck {
        now_us,
        rate_incoming: if rng.chance(70) { rng.below(20_000_000) } else { 0 },
        bytes_acked: packets * mss,
        lost_packets: if rng.chance(3) { 1 + rng.below(5) as u32 } else { 0 },
        ecn_packets: if rng.chance(5) { packets } else { 0 },
        was_timeout: u32::from(rng.chance(1)),
        rtt_us,
        bytes_in_flight: rng.below(2_000_000) as u32,
    }
}

#[test]
fn kernel_fold_reports_as_the_interpreter() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    let dp = KernelDatapath::load(LoadOptions {
        fallback: Fallback::Reno,
        cc_name: format!("ccsw_f{}", std::process::id() % 1_000_000),
        ..Default::default()
    })
    .expect("load datapath");
    let program = standard_program();
    let (mut acks, mut reports) = (0u64, 0u64);

    for seed in 0..200u64 {
        let mut rng = SplitMix64(seed);
        let mut now_us = 1_000_000 + rng.below(1 << 40);
        let mut start_us = now_us;
        let mut per_ack = rng.chance(20);
        let mut flow = CcpFlow::new(1, 14_480, 1448);
        flow.change_program(program.clone(), &[per_ack_update(per_ack)], start_us).unwrap();
        let mut t = FoldTest::default();
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
                // sometimes its message is stamped after the next ACK's time.
                start_us = if rng.chance(50) { now_us } else { now_us + rng.below(5_000) };
                per_ack = rng.chance(20);
                flow.change_program(program.clone(), &[per_ack_update(per_ack)], start_us).unwrap();
            } else if rng.chance(1) {
                // Reporting mode changed without a restart.
                per_ack = !per_ack;
                flow.update_fields(&[per_ack_update(per_ack)]).unwrap();
            }
            let ack = random_ack(&mut rng, now_us, rtt_us);
            let prims = Primitives {
                bytes_acked: u64::from(ack.bytes_acked),
                packets_acked: u64::from(ack.bytes_acked / 1448),
                ecn_packets: u64::from(ack.ecn_packets),
                lost_pkts_sample: u64::from(ack.lost_packets),
                was_timeout: ack.was_timeout != 0,
                rtt_sample_us: u64::from(ack.rtt_us),
                rate_incoming: ack.rate_incoming,
                bytes_in_flight: u64::from(ack.bytes_in_flight),
                now: now_us,
                ..Primitives::default()
            };
            let step = flow.on_ack(&prims, now_us);
            assert!(step.error.is_none(), "seed {seed} ack {i}: interpreter fault {:?}", step.error);

            t.ack = ack;
            t.start_us = start_us;
            t.per_ack = u32::from(per_ack);
            dp.run_fold(&mut t).unwrap();

            let want = step.report.map(|m| m.fields);
            if let Some(fields) = &want {
                assert_eq!(fields.len(), report::COUNT);
            }
            let got = (t.reported != 0).then(|| t.report.fields());
            assert_eq!(got, want, "seed {seed} ack {i} at {now_us} µs (start {start_us}, per_ack {per_ack}): {ack:?}");
            acks += 1;
            reports += u64::from(want.is_some());
        }
    }
    assert_eq!(acks, 100_000);
    // Both kinds of ACK were compared: some reported, most folded silently.
    assert!(reports > 5_000 && acks - reports > 20_000, "{reports} reports of {acks} ACKs");
    eprintln!("{acks} ACKs, {reports} reports: identical");
}
