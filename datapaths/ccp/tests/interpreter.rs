//! Interpreter behaviour on real programs compiled by portus, checked against libccp's
//! semantics (`machine.c`, `ccp.c`).

mod common;

use ccswitch_ccp::program::{ExecError, Program, ProgramError, MAX_PROGRAMS};
use ccswitch_protocol::lang::{reg_type, Implicit, INFINITY, MAX_TMP_REGS, NUM_IMPLICIT_REGS, NUM_PRIMITIVES};
use ccswitch_protocol::wire::{Msg, Ready};
use ccswitch_ccp::{CcpFlow, Primitives, ProgramTable, Step};
use common::{change_prog, compile, cwnd_reg, field, install, rate_reg, reg, update_fields};

const MSS: u32 = 1448;
const INIT_CWND: u32 = 10 * MSS;
const RTT_US: u64 = 10_000;

const RENO_REPORT: &str = "
    (def (Report (volatile acked 0) (volatile loss 0) (volatile rtt 0)))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.loss Ack.lost_pkts_sample)
        (:= Report.rtt Flow.rtt_sample_us)
        (fallthrough))
    (when (> Micros Flow.rtt_sample_us)
        (report)
        (:= Micros 0))";

fn ack(now: u64) -> Primitives {
    Primitives {
        bytes_acked: u64::from(MSS),
        packets_acked: 1,
        rtt_sample_us: RTT_US,
        rate_outgoing: 1_000_000,
        rate_incoming: 900_000,
        bytes_in_flight: u64::from(INIT_CWND),
        packets_in_flight: 10,
        now,
        ..Primitives::default()
    }
}

/// A flow running `src`, switched to it at t = 0.
fn flow_running(src: &str) -> (CcpFlow, ProgramTable, portus::lang::Scope) {
    let mut table = ProgramTable::new();
    let scope = install(&mut table, src);
    let mut flow = CcpFlow::new(1, INIT_CWND, MSS);
    assert_eq!(
        change_prog(&mut flow, &table, &scope, vec![], 0),
        Step::default()
    );
    (flow, table, scope)
}

/// Sends one ACK every millisecond from `from` to `to` (inclusive); returns the reports.
fn ack_every_ms(flow: &mut CcpFlow, from: u64, to: u64) -> Vec<(u64, ccswitch_protocol::wire::Measure)> {
    (from..=to)
        .step_by(1000)
        .filter_map(|t| flow.on_ack(&ack(t), t).report.map(|r| (t, r)))
        .collect()
}

#[test]
fn reno_folds_and_reports_once_per_rtt() {
    let (mut flow, _, scope) = flow_running(RENO_REPORT);
    let reports = ack_every_ms(&mut flow, 1000, 30_000);
    // Micros must exceed the RTT: first report at 11 ms, then Micros restarts.
    let times: Vec<u64> = reports.iter().map(|(t, _)| *t).collect();
    assert_eq!(times, vec![11_000, 22_000]);
    for (_, r) in &reports {
        assert_eq!(r.sid, 1);
        assert_eq!(r.fields.len(), 3);
        assert_eq!(field(&scope, r, "Report.acked"), 11 * u64::from(MSS));
        assert_eq!(field(&scope, r, "Report.rtt"), RTT_US);
        assert_eq!(field(&scope, r, "Report.loss"), 0);
    }
}

#[test]
fn volatile_fields_reset_after_report_nonvolatile_keep() {
    let src = "
        (def (Report (volatile n 0) (total 0)))
        (when true
            (:= Report.n (+ Report.n 1))
            (:= Report.total (+ Report.total 1))
            (fallthrough))
        (when (== Report.n 3) (report))";
    let (mut flow, _, scope) = flow_running(src);
    let reports = ack_every_ms(&mut flow, 1000, 6000);
    assert_eq!(reports.len(), 2);
    assert_eq!(field(&scope, &reports[0].1, "Report.n"), 3);
    assert_eq!(field(&scope, &reports[0].1, "Report.total"), 3);
    assert_eq!(field(&scope, &reports[1].1, "Report.n"), 3);
    assert_eq!(field(&scope, &reports[1].1, "Report.total"), 6);
}

#[test]
fn first_true_expression_stops_without_fallthrough() {
    let src = "
        (def (Report (volatile a 0) (volatile b 0)))
        (when true (:= Report.a (+ Report.a 1)))
        (when true (:= Report.b (+ Report.b 1)) (report))";
    let (mut flow, _, _) = flow_running(src);
    // The second expression never runs, so nothing is ever reported.
    assert!(ack_every_ms(&mut flow, 1000, 5000).is_empty());
}

#[test]
fn program_sets_cwnd_and_rate() {
    let src = "
        (def (Report (volatile acked 0)))
        (when true
            (:= Cwnd (+ Cwnd Ack.bytes_acked))
            (:= Report.acked (+ Report.acked Ack.bytes_acked))
            (fallthrough))
        (when (> Ack.lost_pkts_sample 0)
            (:= Cwnd (/ Cwnd 2))
            (:= Rate (* Flow.rate_incoming 2))
            (report))";
    let (mut flow, _, scope) = flow_running(src);
    let step = flow.on_ack(&ack(1000), 1000);
    assert_eq!(step.cwnd_bytes, Some(INIT_CWND + MSS));
    assert_eq!(step.rate_bytes_per_s, None);
    assert!(step.report.is_none());
    let loss = Primitives {
        lost_pkts_sample: 1,
        ..ack(2000)
    };
    let step = flow.on_ack(&loss, 2000);
    assert_eq!(step.cwnd_bytes, Some((INIT_CWND + 2 * MSS) / 2));
    assert_eq!(step.rate_bytes_per_s, Some(1_800_000));
    assert_eq!(
        field(&scope, step.report.as_ref().unwrap(), "Report.acked"),
        2 * u64::from(MSS)
    );
    assert_eq!(flow.cwnd_bytes(), (INIT_CWND + 2 * MSS) / 2);
    assert_eq!(flow.rate_bytes_per_s(), 1_800_000);
}

#[test]
fn unchanged_cwnd_is_not_reapplied() {
    let src = "(def (Report (volatile x 0))) (when true (:= Cwnd 20000))";
    let (mut flow, _, _) = flow_running(src);
    assert_eq!(flow.on_ack(&ack(1000), 1000).cwnd_bytes, Some(20_000));
    assert_eq!(flow.on_ack(&ack(2000), 2000).cwnd_bytes, None);
}

#[test]
fn update_fields_sets_cwnd_rate_and_control() {
    let src = "
        (def (Report (volatile seen 0)) (target 0))
        (when true (:= Report.seen target) (report))";
    let (mut flow, table, scope) = flow_running(src);
    let step = update_fields(
        &mut flow,
        &table,
        vec![
            (cwnd_reg(), 42_000),
            (rate_reg(), 5_000_000),
            (reg(&scope, "target"), 99),
        ],
    );
    assert_eq!(step.cwnd_bytes, Some(42_000));
    assert_eq!(step.rate_bytes_per_s, Some(5_000_000));
    assert_eq!(flow.cwnd_bytes(), 42_000);
    let step = flow.on_ack(&ack(1000), 1000);
    assert_eq!(
        field(&scope, step.report.as_ref().unwrap(), "Report.seen"),
        99
    );
    // The program reads the updated window in Cwnd and leaves it alone.
    assert_eq!(step.cwnd_bytes, None);
    // The agent's window is a command even when it is the one the datapath has: the datapath
    // may hold no directive yet (a first answer that keeps the initial window).
    let step = update_fields(&mut flow, &table, vec![(cwnd_reg(), 42_000)]);
    assert_eq!(step.cwnd_bytes, Some(42_000));
}

#[test]
fn update_of_forbidden_register_changes_nothing() {
    let (mut flow, table, scope) = flow_running(RENO_REPORT);
    let bad = Msg::UpdateFields(ccswitch_protocol::wire::UpdateFields {
        sid: 1,
        updates: vec![
            ccswitch_protocol::wire::UpdateField {
                reg_type: reg_type::IMPLICIT,
                reg_index: Implicit::Cwnd as u32,
                value: 1,
            },
            ccswitch_protocol::wire::UpdateField {
                reg_type: reg_type::VOLATILE_REPORT,
                reg_index: 0,
                value: 7,
            },
        ],
    });
    assert_eq!(
        flow.handle(&bad, &table, 0),
        Err(ProgramError::BadUpdate {
            reg_type: reg_type::VOLATILE_REPORT,
            index: 0
        })
    );
    assert_eq!(flow.cwnd_bytes(), INIT_CWND);
    assert_eq!(flow.program_uid(), Some(scope.program_uid));
}

#[test]
fn change_prog_switches_atomically_and_resets_state() {
    let counting = "
        (def (Report (volatile n 0)))
        (when true (:= Report.n (+ Report.n 1)) (fallthrough))
        (when (== Report.n 100) (report))";
    let (mut flow, mut table, first) = flow_running(counting);
    let second = install(&mut table, RENO_REPORT);
    ack_every_ms(&mut flow, 1000, 5000);

    let step = change_prog(&mut flow, &table, &second, vec![(cwnd_reg(), 30_000)], 5000);
    assert_eq!(step.cwnd_bytes, Some(30_000));
    assert_eq!(flow.program_uid(), Some(second.program_uid));
    // Micros restarted at the switch (t = 5 ms): the first report is at 16 ms and counts only
    // the ACKs after the switch.
    let reports = ack_every_ms(&mut flow, 6000, 16_000);
    assert_eq!(reports.len(), 1);
    assert_eq!(reports[0].0, 16_000);
    assert_eq!(reports[0].1.program_uid, second.program_uid);
    assert_eq!(
        field(&second, &reports[0].1, "Report.acked"),
        11 * u64::from(MSS)
    );
    assert_eq!(flow.cwnd_bytes(), 30_000);

    // And back: the first program starts from its defaults again.
    change_prog(&mut flow, &table, &first, vec![], 16_000);
    let reports = ack_every_ms(&mut flow, 17_000, 17_000 + 99 * 1000);
    assert_eq!(reports.len(), 1);
    assert_eq!(field(&first, &reports[0].1, "Report.n"), 100);
}

#[test]
fn change_prog_to_unknown_program_is_refused() {
    let (mut flow, table, scope) = flow_running(RENO_REPORT);
    let msg = Msg::ChangeProg(ccswitch_protocol::wire::ChangeProg {
        sid: 1,
        program_uid: 999_999,
        updates: vec![],
    });
    assert_eq!(
        flow.handle(&msg, &table, 0),
        Err(ProgramError::UnknownProgram(999_999))
    );
    assert_eq!(flow.program_uid(), Some(scope.program_uid));
    let ready = Msg::Ready(Ready { id: 1 });
    assert!(matches!(
        flow.handle(&ready, &table, 0),
        Err(ProgramError::NotForFlow(_))
    ));
}

#[test]
fn control_defaults_and_preset_values() {
    // portus's "preset" test: a control variable set by CHANGE_PROG is visible at once.
    let src = "(def (Report (testFoo 0)) (foo 0)) (when true (:= Report.testFoo foo) (report))";
    let mut table = ProgramTable::new();
    let scope = install(&mut table, src);
    let mut flow = CcpFlow::new(2, INIT_CWND, MSS);
    change_prog(&mut flow, &table, &scope, vec![(reg(&scope, "foo"), 52)], 0);
    let step = flow.on_ack(&ack(1000), 1000);
    assert_eq!(
        field(&scope, step.report.as_ref().unwrap(), "Report.testFoo"),
        52
    );
}

#[test]
fn infinity_min_ewma_and_notif() {
    let src = "
        (def (Report (volatile minrtt +infinity) (avg 0) (lossy false)))
        (when true
            (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
            (:= Report.avg (ewma 2 Flow.rate_outgoing))
            (:= Report.lossy (!if Report.lossy (> Ack.lost_pkts_sample 0)))
            (report))";
    let (mut flow, _, scope) = flow_running(src);
    // No RTT sample: libccp reads Flow.rtt_sample_us = 0 as u32::MAX.
    let no_rtt = Primitives {
        rtt_sample_us: 0,
        ..ack(1000)
    };
    let r = flow.on_ack(&no_rtt, 1000).report.unwrap();
    assert_eq!(field(&scope, &r, "Report.minrtt"), INFINITY);
    assert_eq!(
        field(&scope, &r, "Report.avg"),
        1_000_000,
        "ewma without history takes the sample"
    );
    assert_eq!(field(&scope, &r, "Report.lossy"), 0);

    let p = Primitives {
        rate_outgoing: 2_000_000,
        lost_pkts_sample: 2,
        ..ack(2000)
    };
    let r = flow.on_ack(&p, 2000).report.unwrap();
    assert_eq!(field(&scope, &r, "Report.minrtt"), RTT_US);
    assert_eq!(
        field(&scope, &r, "Report.avg"),
        (2 * 1_000_000 + 8 * 2_000_000) / 10
    );
    assert_eq!(field(&scope, &r, "Report.lossy"), 1);

    // lossy is sticky: !if only writes while it is still false.
    let r = flow.on_ack(&ack(3000), 3000).report.unwrap();
    assert_eq!(field(&scope, &r, "Report.lossy"), 1);
}

#[test]
fn division_by_zero_aborts_without_report_or_cwnd() {
    let src = "
        (def (Report (volatile per_pkt 0)))
        (when true
            (:= Cwnd 50000)
            (:= Report.per_pkt (/ Ack.bytes_acked Ack.packets_acked))
            (report))";
    let (mut flow, _, scope) = flow_running(src);
    let zero = Primitives {
        packets_acked: 0,
        ..ack(1000)
    };
    let step = flow.on_ack(&zero, 1000);
    assert!(matches!(step.error, Some(ExecError::DivByZero { .. })));
    assert_eq!((step.report, step.cwnd_bytes), (None, None));
    assert_eq!(flow.cwnd_bytes(), INIT_CWND);
    let step = flow.on_ack(&ack(2000), 2000);
    assert_eq!(step.error, None);
    assert_eq!(step.cwnd_bytes, Some(50_000));
    assert_eq!(
        field(&scope, step.report.as_ref().unwrap(), "Report.per_pkt"),
        u64::from(MSS)
    );
}

#[test]
fn subtraction_underflow_aborts() {
    let src =
        "(def (Report (volatile x 0))) (when true (:= Report.x (- 1 Ack.bytes_acked)) (report))";
    let (mut flow, _, _) = flow_running(src);
    let step = flow.on_ack(&ack(1000), 1000);
    assert!(matches!(step.error, Some(ExecError::SubUnderflow { .. })));
    assert!(step.report.is_none());
}

#[test]
fn tick_fires_time_conditions_without_double_counting() {
    let (mut flow, _, scope) = flow_running(RENO_REPORT);
    assert!(ack_every_ms(&mut flow, 1000, 3000).is_empty());
    // ACKs stop; a timer tick after one RTT still produces the report, with the acked
    // bytes of the three real ACKs only.
    assert!(flow.on_tick(8000).report.is_none());
    let r = flow
        .on_tick(11_000)
        .report
        .expect("tick reports after an RTT");
    assert_eq!(field(&scope, &r, "Report.acked"), 3 * u64::from(MSS));
    assert_eq!(field(&scope, &r, "Report.rtt"), RTT_US);
}

#[test]
fn flow_without_program_does_nothing() {
    let mut flow = CcpFlow::new(1, INIT_CWND, MSS);
    assert_eq!(flow.on_ack(&ack(1000), 1000), Step::default());
    assert_eq!(flow.on_tick(2000), Step::default());
}

#[test]
fn table_is_bounded_replaces_same_uid_and_resets_on_uid_one() {
    let (msg, _) = compile(RENO_REPORT);
    let prog = Program::from_install(&msg).unwrap();
    let mut table = ProgramTable::new();
    for uid in 100..100 + MAX_PROGRAMS as u32 {
        let mut m = msg.clone();
        m.program_uid = uid;
        table.install_msg(&m).unwrap();
    }
    let mut extra = msg.clone();
    extra.program_uid = 5000;
    assert_eq!(
        table.install_msg(&extra),
        Err(ProgramError::ProgramTableFull)
    );
    let mut again = msg.clone();
    again.program_uid = 100;
    assert_eq!(table.install_msg(&again), Ok(100));
    assert_eq!(table.len(), MAX_PROGRAMS);
    let mut fresh = msg;
    fresh.program_uid = 1;
    table.install_msg(&fresh).unwrap();
    assert_eq!(table.len(), 1);
    assert!(table.get(1).is_some() && table.get(100).is_none());
    assert_eq!(prog.num_report_fields(), 3);
}

#[test]
fn validation_rejects_malformed_programs() {
    let (good, _) = compile(RENO_REPORT);
    let last = good.instructions.len() - 1;
    let check = |mutate: &dyn Fn(&mut ccswitch_protocol::wire::InstallExpr),
                 want: &dyn Fn(&ProgramError) -> bool| {
        let mut m = good.clone();
        mutate(&mut m);
        let err = Program::from_install(&m).expect_err("must be rejected");
        assert!(want(&err), "unexpected error {err:?}");
    };
    check(&|m| m.instructions[last].op = 15, &|e| {
        matches!(e, ProgramError::UnknownOp { code: 15, .. })
    });
    check(&|m| m.instructions[last].left.reg_type = 9, &|e| {
        matches!(e, ProgramError::UnknownRegType { reg_type: 9, .. })
    });
    check(
        &|m| {
            m.instructions[last].res = ccswitch_protocol::wire::RegRecord {
                reg_type: reg_type::TMP,
                value: MAX_TMP_REGS as u32,
            }
        },
        &|e| {
            matches!(
                e,
                ProgramError::RegIndexOutOfRange {
                    reg_type: reg_type::TMP,
                    index,
                    ..
                } if *index == MAX_TMP_REGS as u32
            )
        },
    );
    check(
        &|m| {
            m.instructions[last].right = ccswitch_protocol::wire::RegRecord {
                reg_type: reg_type::PRIMITIVE,
                value: NUM_PRIMITIVES as u32,
            }
        },
        &|e| matches!(e, ProgramError::RegIndexOutOfRange { reg_type: reg_type::PRIMITIVE, .. }),
    );
    check(
        &|m| {
            m.instructions[last].left = ccswitch_protocol::wire::RegRecord {
                reg_type: reg_type::IMPLICIT,
                value: NUM_IMPLICIT_REGS as u32,
            }
        },
        &|e| matches!(e, ProgramError::RegIndexOutOfRange { reg_type: reg_type::IMPLICIT, .. }),
    );
    check(
        &|m| {
            m.instructions[last].res = ccswitch_protocol::wire::RegRecord {
                reg_type: reg_type::PRIMITIVE,
                value: 0,
            }
        },
        &|e| matches!(e, ProgramError::ReadOnlyResult { .. }),
    );
    check(
        &|m| {
            m.instructions[last].res = ccswitch_protocol::wire::RegRecord {
                reg_type: reg_type::IMMEDIATE,
                value: 0,
            }
        },
        &|e| matches!(e, ProgramError::ReadOnlyResult { .. }),
    );
    check(&|m| m.expressions[0].num_body = 1000, &|e| {
        matches!(e, ProgramError::ExpressionOutOfRange { .. })
    });
    check(&|m| m.expressions[1].cond_start = u32::MAX, &|e| {
        matches!(e, ProgramError::ExpressionOutOfRange { .. })
    });
    check(&|m| m.instructions[last].op = 2, &|e| {
        matches!(e, ProgramError::BadDef { .. })
    });
    check(&|m| m.instructions[0].right.reg_type = 4, &|e| {
        matches!(e, ProgramError::BadDef { .. })
    });
    check(
        &|m| {
            let i = m.instructions[last];
            m.instructions.resize(257, i);
        },
        &|e| {
            matches!(
                e,
                ProgramError::TooMany {
                    what: "instructions",
                    ..
                }
            )
        },
    );
}
