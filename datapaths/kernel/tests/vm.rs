//! The BPF interpreter of CCP programs against the shim's, the reference: random valid
//! programs (every op, every register kind, faults included) and the standard program run the
//! same evaluations through `ccswitch_ccp::CcpFlow` and through `ccsw_vm_test`
//! (BPF_PROG_TEST_RUN), with the same control-register updates between them, and every
//! evaluation must end alike: the same fault, report and fields, window and rate. Needs root.

use std::sync::Arc;

use ccswitch_ccp::program::ExecError;
use ccswitch_ccp::{CcpFlow, Primitives, Program};
use ccswitch_protocol::lang::{
    reg_type, Op, DEF_INFINITY_SENTINEL, MAX_LOCAL_REGS, MAX_TMP_REGS, NUM_IMPLICIT_REGS, NUM_PRIMITIVES,
};
use ccswitch_protocol::standard;
use ccswitch_protocol::wire::{self, ExprRecord, InstallExpr, InstrRecord, Msg, RegRecord, UpdateField};
use ccswitch_datapath_support::rng::SplitMix64;
use ccswitch_kernel::abi::{self, VmTest, VM_PRIMITIVES};
use ccswitch_kernel::vm::{self, VmUnfit};
use ccswitch_kernel::{Fallback, KernelDatapath, LoadOptions};

const MSS: u32 = 1448;

fn reg(reg_type: u8, value: u32) -> RegRecord {
    RegRecord { reg_type, value }
}

/// A register to write: report, control, tmp, local or implicit (the flags, Micros, Cwnd
/// and Rate included), the implicit ones often, so that conditions and reports happen.
fn writable(rng: &mut SplitMix64, report_regs: u32) -> RegRecord {
    match rng.below(10) {
        0..=3 => reg(reg_type::IMPLICIT, rng.below(NUM_IMPLICIT_REGS as u64) as u32),
        4 | 5 => {
            let t = if rng.chance(50) { reg_type::VOLATILE_REPORT } else { reg_type::NONVOLATILE_REPORT };
            reg(t, rng.below(u64::from(report_regs.max(1)) + 2) as u32)
        }
        6 => {
            let t = if rng.chance(50) { reg_type::VOLATILE_CONTROL } else { reg_type::NONVOLATILE_CONTROL };
            reg(t, rng.below(6) as u32)
        }
        7 | 8 => reg(reg_type::TMP, rng.below(MAX_TMP_REGS as u64) as u32),
        _ => reg(reg_type::LOCAL, rng.below(MAX_LOCAL_REGS as u64) as u32),
    }
}

/// An operand to read: anything writable, an immediate (small, large or 0) or a primitive.
fn readable(rng: &mut SplitMix64, report_regs: u32) -> RegRecord {
    match rng.below(10) {
        0..=2 => {
            let v = match rng.below(4) {
                0 => 0,
                1 => rng.below(12) as u32,
                2 => rng.below(100_000) as u32,
                _ => rng.next() as u32,
            };
            reg(reg_type::IMMEDIATE, v)
        }
        3..=5 => reg(reg_type::PRIMITIVE, rng.below(NUM_PRIMITIVES as u64) as u32),
        _ => writable(rng, report_regs),
    }
}

/// A random program libccp accepts: a `Def` preamble of report and control defaults, then
/// instructions of every other op, and expressions over ranges of them.
fn random_program(rng: &mut SplitMix64, uid: u32) -> InstallExpr {
    let (reports, controls) = (rng.below(5) as u32, rng.below(4) as u32);
    let mut instructions = Vec::new();
    for i in 0..reports {
        let t = if rng.chance(50) { reg_type::VOLATILE_REPORT } else { reg_type::NONVOLATILE_REPORT };
        let v = if rng.chance(20) { DEF_INFINITY_SENTINEL } else { rng.below(1000) as u32 };
        instructions.push(InstrRecord { op: Op::Def as u8, res: reg(t, i), left: reg(t, i), right: reg(reg_type::IMMEDIATE, v) });
    }
    for i in 0..controls {
        let t = if rng.chance(50) { reg_type::VOLATILE_CONTROL } else { reg_type::NONVOLATILE_CONTROL };
        let v = rng.below(1000) as u32;
        instructions.push(InstrRecord { op: Op::Def as u8, res: reg(t, i), left: reg(t, i), right: reg(reg_type::IMMEDIATE, v) });
    }
    let preamble = instructions.len() as u32;
    let body = 1 + rng.below(30) as u32;
    for _ in 0..body {
        let op = loop {
            let op = rng.below(15) as u8;
            if op != Op::Def as u8 {
                break op;
            }
        };
        instructions.push(InstrRecord {
            op,
            res: writable(rng, reports),
            left: readable(rng, reports),
            right: readable(rng, reports),
        });
    }
    let range = |rng: &mut SplitMix64| {
        let start = preamble + rng.below(u64::from(body)) as u32;
        let len = rng.below(u64::from(preamble + body - start) + 1).min(5) as u32;
        (start, len)
    };
    let expressions = (0..1 + rng.below(5))
        .map(|_| {
            let ((cond_start, num_cond), (body_start, num_body)) = (range(rng), range(rng));
            ExprRecord { cond_start, num_cond, body_start, num_body }
        })
        .collect();
    InstallExpr { sid: 0, program_uid: uid, expressions, instructions }
}

fn random_prims(rng: &mut SplitMix64, now_us: u64) -> Primitives {
    let mut n = |bound: u64| if rng.chance(20) { 0 } else { rng.below(bound) };
    Primitives {
        bytes_acked: n(100_000),
        packets_acked: n(70),
        bytes_misordered: n(10_000),
        packets_misordered: n(8),
        ecn_bytes: n(5_000),
        ecn_packets: n(4),
        lost_pkts_sample: n(3),
        was_timeout: rng.chance(2),
        rtt_sample_us: if rng.chance(10) { 0 } else { rng.below(500_000) },
        rate_outgoing: rng.below(50_000_000),
        rate_incoming: rng.below(50_000_000),
        bytes_in_flight: rng.below(3_000_000),
        packets_in_flight: rng.below(2_000),
        bytes_pending: rng.below(100_000),
        now: now_us,
    }
}

/// By libccp's primitive codes (portus's `Scope`, `Primitive` in the reference).
fn by_code(p: &Primitives) -> [u64; VM_PRIMITIVES] {
    let mut v = [0u64; VM_PRIMITIVES];
    v[..15].copy_from_slice(&[
        p.bytes_acked,
        p.bytes_misordered,
        p.ecn_bytes,
        p.ecn_packets,
        p.lost_pkts_sample,
        p.now,
        p.packets_acked,
        p.packets_misordered,
        p.bytes_in_flight,
        p.bytes_pending,
        p.packets_in_flight,
        p.rate_incoming,
        p.rate_outgoing,
        p.rtt_sample_us,
        u64::from(p.was_timeout),
    ]);
    v
}

fn fault_code(e: Option<ExecError>) -> u32 {
    match e {
        None => 0,
        Some(ExecError::AddOverflow { .. }) => 1,
        Some(ExecError::SubUnderflow { .. }) => 2,
        Some(ExecError::MulOverflow { .. }) => 3,
        Some(ExecError::DivByZero { .. }) => 4,
    }
}

struct Outcomes {
    evaluations: u64,
    reports: u64,
    faults: u64,
    cwnd_changes: u64,
}

/// Runs `program` through both interpreters for `steps` evaluations.
fn compare(dp: &KernelDatapath, program: Arc<Program>, rng: &mut SplitMix64, steps: usize, what: &str, out: &mut Outcomes) {
    let encoded = vm::encode(&program).unwrap_or_else(|e| panic!("{what}: {e}"));
    dp.install_vm_program(3, &encoded).unwrap();
    let mut now_us = 1_000_000 + rng.below(1 << 40);
    let mut flow = CcpFlow::new(1, 10 * MSS, MSS);
    flow.change_program(program.clone(), &[], now_us).unwrap();
    let mut t = VmTest { slot: 3, start: 1, now_us, ..VmTest::default() };
    dp.run_vm(&mut t).unwrap();
    t.start = 0;
    for i in 0..steps {
        now_us += rng.below(200_000);
        if rng.chance(10) {
            let (index, value) = (rng.below(6) as u32, rng.below(5_000));
            flow.update_fields(&[UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: index, value }]).unwrap();
            t.regs.control[index as usize] = value;
        }
        let prims = random_prims(rng, now_us);
        t.prims = by_code(&prims);
        t.now_us = now_us;
        t.cwnd_bytes = u64::from(flow.cwnd_bytes());
        t.rate = flow.rate_bytes_per_s();
        let prior_cwnd = flow.cwnd_bytes();
        let step = flow.on_ack(&prims, now_us);
        dp.run_vm(&mut t).unwrap();
        let at = format!("{what}, evaluation {i} at {now_us} µs");
        assert_eq!(t.error, fault_code(step.error), "{at}: fault {:?}", step.error);
        let want = step.report.map(|m| m.fields);
        let got = (t.reported != 0).then(|| t.report[..program.num_report_fields()].to_vec());
        assert_eq!(got, want, "{at}: report");
        assert_eq!(t.cwnd_bytes, u64::from(flow.cwnd_bytes()), "{at}: window");
        assert_eq!(t.rate, flow.rate_bytes_per_s(), "{at}: rate");
        out.evaluations += 1;
        out.reports += u64::from(want.is_some());
        out.faults += u64::from(step.error.is_some());
        out.cwnd_changes += u64::from(flow.cwnd_bytes() != prior_cwnd);
    }
}

fn load() -> KernelDatapath {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    KernelDatapath::load(LoadOptions {
        fallback: Fallback::Reno,
        cc_name: format!("ccsw_v{}", std::process::id() % 1_000_000),
        ..Default::default()
    })
    .expect("load datapath")
}

#[test]
fn the_bpf_interpreter_evaluates_as_the_shims() {
    let dp = load();
    let mut out = Outcomes { evaluations: 0, reports: 0, faults: 0, cwnd_changes: 0 };
    let mut programs = 0;
    for seed in 0..600u64 {
        let mut rng = SplitMix64(seed);
        let Ok(program) = Program::from_install(&random_program(&mut rng, 2 + seed as u32)) else { continue };
        programs += 1;
        compare(&dp, Arc::new(program), &mut rng, 40, &format!("random program {seed}"), &mut out);
    }
    let (msg, _) = wire::decode(standard::INSTALL_MESSAGE).unwrap();
    let Msg::InstallExpr(install) = msg else { panic!("an INSTALL_EXPR") };
    let standard = Arc::new(Program::from_install(&install).unwrap());
    compare(&dp, standard, &mut SplitMix64(7), 2_000, "the standard program", &mut out);
    eprintln!(
        "{programs} random programs and the standard one: {} evaluations, {} reports, {} faults, {} window changes: identical",
        out.evaluations, out.reports, out.faults, out.cwnd_changes
    );
    // Every outcome was exercised, not just the quiet one.
    assert!(programs >= 500, "{programs} valid random programs");
    assert!(out.reports > 1_000 && out.faults > 1_000 && out.cwnd_changes > 500, "too few of some outcome");
    assert!(out.evaluations - out.reports - out.faults > 5_000, "too few quiet evaluations");
}

#[test]
fn programs_beyond_the_interpreters_banks_are_left_to_the_shim() {
    let def = |t: u8, i: u32| InstrRecord { op: Op::Def as u8, res: reg(t, i), left: reg(t, i), right: reg(reg_type::IMMEDIATE, 0) };
    let bind = |res: RegRecord| InstrRecord { op: Op::Bind as u8, res, left: reg(reg_type::IMMEDIATE, 0), right: reg(reg_type::IMMEDIATE, 1) };
    let program = |instructions: Vec<InstrRecord>| {
        let n = instructions.len() as u32;
        let install = InstallExpr {
            sid: 0,
            program_uid: 9,
            expressions: vec![ExprRecord { cond_start: 0, num_cond: n, body_start: 0, num_body: 0 }],
            instructions,
        };
        Program::from_install(&install).unwrap()
    };
    let high_report = program(vec![def(reg_type::VOLATILE_REPORT, 40)]);
    assert_eq!(vm::encode(&high_report), Err(VmUnfit::RegisterBeyondBank { bank: "report", index: 40, max: 32 }));
    let high_control = program(vec![bind(reg(reg_type::NONVOLATILE_CONTROL, 32))]);
    assert_eq!(vm::encode(&high_control), Err(VmUnfit::RegisterBeyondBank { bank: "control", index: 32, max: 32 }));
    let long = program((0..=abi::VM_MAX_INSTRS).map(|_| bind(reg(reg_type::TMP, 0))).collect());
    let max = abi::VM_MAX_INSTRS;
    assert_eq!(vm::encode(&long), Err(VmUnfit::TooMany { what: "instructions", count: max + 1, max }));
    let fits = program((0..max).map(|_| bind(reg(reg_type::TMP, 0))).collect());
    assert!(vm::encode(&fits).is_ok());
}
