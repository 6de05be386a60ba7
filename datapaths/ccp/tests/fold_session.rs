//! A session over a datapath that folds the standard program: the fold starts when a flow
//! changes to that program, follows its reporting mode, restarts with it, stops for any other
//! program and with the agent; folded flows are left out of the timer, and their reports reach
//! the agent as the program's MEASUREs unless they belong to an earlier fold.

mod common;

use std::os::unix::net::UnixStream;
use std::time::Duration;

use ccswitch_ccp::agent_link::{AgentAddr, AgentLink};
use ccswitch_ccp::program::fold::{FoldGrowth, FoldMode, FoldReporting};
use ccswitch_ccp::session::{monotonic_now_ns, FlowDesc, Session};
use ccswitch_protocol::lang::reg_type;
use ccswitch_protocol::standard::{self, control, report};
use ccswitch_protocol::wire::{self, ChangeProg, Msg, UpdateField, UpdateFields};

const MSS: u32 = 1448;
const OTHER: &str = "(def (Report (volatile acked 0)))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (report))";

fn standard_install() -> wire::InstallExpr {
    match wire::decode(standard::INSTALL_MESSAGE).unwrap().0 {
        Msg::InstallExpr(i) => i,
        _ => panic!("an INSTALL_EXPR"),
    }
}

fn control_update(index: usize, value: u64) -> UpdateField {
    UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: index as u32, value }
}

fn change(sid: u32, program_uid: u32, updates: Vec<UpdateField>) -> Msg {
    Msg::ChangeProg(ChangeProg { sid, program_uid, updates })
}

/// A session with flow 1, announced to an agent at the other end of a socket pair.
fn session_with_one_flow() -> (Session, common::AgentEnd, common::Folding) {
    let (shim_end, agent_end) = UnixStream::pair().unwrap();
    shim_end.set_nonblocking(true).unwrap();
    let mut agent = common::AgentEnd::new(agent_end);
    let mut dp = common::Folding::default();
    let mut session = Session::new(AgentAddr::Stream("/nonexistent".into()), Duration::from_secs(5));
    let addr = |port| format!("10.0.0.1:{port}").parse().unwrap();
    session.add_flow(&mut dp, FlowDesc { sid: 1, src: addr(80), dst: addr(40_001), mss: MSS, init_cwnd_bytes: 10 * MSS, handshake_rtt_us: 52_400 });
    session.attach(&mut dp, AgentLink::from_stream(Box::new(shim_end)));
    assert_eq!(agent.received().len(), 2, "READY and CREATE");
    (session, agent, dp)
}

#[test]
fn the_session_folds_the_standard_program_and_forwards_its_reports() {
    let (mut session, mut agent, mut dp) = session_with_one_flow();

    // The standard program under the uid the agent chose, and another one.
    let mut std_install = standard_install();
    std_install.program_uid = 7;
    let (mut other, _) = common::compile(OTHER);
    other.program_uid = 8;
    let before = monotonic_now_ns() / 1000;
    agent.send([Msg::InstallExpr(std_install), Msg::InstallExpr(other), change(1, 7, vec![])]);
    session.drain_agent(&mut dp);
    let (mode, start) = dp.folds[&1];
    assert_eq!(mode, FoldMode::PER_RTT);
    assert!(start >= before && start <= monotonic_now_ns() / 1000);

    // Folded flows are not evaluated by the timer: nothing is reported, however late.
    session.tick(&mut dp, start + 10_000_000);
    session.flush(&mut dp);
    assert!(agent.received().is_empty(), "a folded flow's registers are in the datapath");

    // A report of this fold reaches the agent as the program's MEASURE.
    let mut fields = vec![0u64; report::COUNT];
    fields[report::ACKED] = 14_480;
    fields[report::RTT] = 50_000;
    fields[report::LOST] = 1;
    fields[report::NOW] = monotonic_now_ns() / 1000;
    session.on_folded_report(&mut dp, 1, start, &fields, 20 * MSS, None);
    session.flush(&mut dp);
    match agent.received().as_slice() {
        [Msg::Measure(m)] => assert_eq!((m.sid, m.program_uid, &m.fields), (1, 7, &fields)),
        other => panic!("expected one MEASURE, got {other:?}"),
    }
    assert_eq!(session.cwnd_bytes(1), Some(20 * MSS), "the window the kernel reported");
    // One of an earlier fold is dropped.
    session.on_folded_report(&mut dp, 1, start - 1, &fields, 20 * MSS, None);
    session.flush(&mut dp);
    assert!(agent.received().is_empty());

    // Reporting per ACK: the same fold, in another mode.
    agent.send([Msg::UpdateFields(UpdateFields { sid: 1, updates: vec![control_update(control::PER_ACK, 1)] })]);
    session.drain_agent(&mut dp);
    assert_eq!(dp.folds[&1], (FoldMode { reporting: FoldReporting::PerAck, loss_cwnd_bytes: 0, growth: FoldGrowth::default(), agg_rate: 0 }, start));
    // That answer timed the report: from its ACK to the answer, and it was urgent (a loss).
    let lat = session.answer_latency();
    assert_eq!((lat.all.count(), lat.urgent.count()), (1, 1));
    assert!(lat.all.quantile(1.0).unwrap() < 1_000_000);

    // Back per RTT, with the agent's own window share and idle interval: the same fold.
    agent.send([Msg::UpdateFields(UpdateFields {
        sid: 1,
        updates: vec![
            control_update(control::PER_ACK, 0),
            control_update(control::WINDOW_USE_PCT, 80),
            control_update(control::IDLE_REPORT_US, 5_000_000),
        ],
    })]);
    session.drain_agent(&mut dp);
    assert_eq!(dp.folds[&1], (FoldMode { reporting: FoldReporting::PerRtt { window_use_pct: 80, idle_report_us: 5_000_000 }, loss_cwnd_bytes: 0, growth: FoldGrowth::default(), agg_rate: 0 }, start));

    // Periodic reports stay in user space, where the timer drives them.
    agent.send([Msg::UpdateFields(UpdateFields { sid: 1, updates: vec![control_update(control::PERIOD_US, 20_000)] })]);
    session.drain_agent(&mut dp);
    assert!(!dp.folds.contains_key(&1));
    session.tick(&mut dp, monotonic_now_ns() / 1000 + 1_000_000);
    session.flush(&mut dp);
    assert_eq!(agent.received().len(), 1, "the interpreter reports on the timer again");

    // Back to the standard program: a restart, hence a new start.
    std::thread::sleep(Duration::from_millis(2));
    agent.send([change(1, 7, vec![])]);
    session.drain_agent(&mut dp);
    let (mode, restart) = dp.folds[&1];
    assert_eq!(mode, FoldMode::PER_RTT);
    assert!(restart > start);
    // A kernel datapath's report carries its sender's window reductions after the registers,
    // and the flow's handshake RTT.
    session.on_folded_report(&mut dp, 1, restart, &fields, 20 * MSS, Some((3, true)));
    session.flush(&mut dp);
    match agent.received().as_slice() {
        [Msg::Measure(m)] => {
            assert_eq!(&m.fields[..report::COUNT], &fields[..]);
            assert_eq!(&m.fields[report::SENDER_REDUCTIONS..], &[3, 1, 52_400]);
            assert_eq!(report::SENDER_IN_REDUCTION, report::SENDER_REDUCTIONS + 1);
            assert_eq!(report::SENDER_HANDSHAKE_RTT, report::SENDER_REDUCTIONS + 2);
        }
        other => panic!("expected one MEASURE, got {other:?}"),
    }

    // Another program: no fold, and reports of the old fold are dropped.
    agent.send([change(1, 8, vec![])]);
    session.drain_agent(&mut dp);
    assert!(!dp.folds.contains_key(&1));
    session.on_folded_report(&mut dp, 1, restart, &fields, 20 * MSS, None);
    session.flush(&mut dp);
    assert!(agent.received().is_empty());

    // The agent goes away: no fold survives it, and a new agent starts from scratch.
    agent.send([change(1, 7, vec![])]);
    session.drain_agent(&mut dp);
    assert!(dp.folds.contains_key(&1));
    drop(agent);
    session.drain_agent(&mut dp);
    assert!(!session.connected());
    assert!(dp.folds.is_empty());
    let calls = dp.fold_calls;
    let (shim_end, _agent_end) = UnixStream::pair().unwrap();
    shim_end.set_nonblocking(true).unwrap();
    session.attach(&mut dp, AgentLink::from_stream(Box::new(shim_end)));
    assert!(dp.folds.is_empty() && dp.fold_calls == calls);
}

/// The datapath tells a restart by its start time alone, so restarts the session handles
/// in the same µs (one batch of agent messages) still get two starts, the second later.
#[test]
fn restarts_within_one_microsecond_each_restart_the_fold() {
    let (mut session, mut agent, mut dp) = session_with_one_flow();
    let mut std_install = standard_install();
    std_install.program_uid = 7;
    agent.send([Msg::InstallExpr(std_install), change(1, 7, vec![])]);
    session.drain_agent(&mut dp);
    let first = dp.folds[&1].1;
    // Many restarts in one batch: a session handles several within one µs.
    agent.send((0..500).map(|_| change(1, 7, vec![])));
    session.drain_agent(&mut dp);
    let starts = &dp.fold_starts;
    assert_eq!(starts.len(), 501, "every restart reached the datapath");
    assert!(starts.windows(2).all(|w| w[1] > w[0]), "each start later than the last: {starts:?}");
    assert_eq!(starts[0], first);
    assert_eq!(dp.folds[&1].1, starts[500]);
}

#[test]
fn every_report_is_timed_when_several_await_an_answer_and_a_window_restarts_the_count() {
    let (mut session, mut agent, mut dp) = session_with_one_flow();
    let mut std_install = standard_install();
    std_install.program_uid = 7;
    // The answer to CREATE is not a report's: nothing is timed.
    agent.send([Msg::InstallExpr(std_install), change(1, 7, vec![])]);
    session.drain_agent(&mut dp);
    assert_eq!(session.answer_latency().all.count(), 0);
    let (_, start) = dp.folds[&1];
    agent.received();

    // Three reports before any answer, the second urgent (a loss), sent 300 ms ago and later.
    let now = monotonic_now_ns() / 1000;
    for (i, lost) in [0u64, 1, 0].into_iter().enumerate() {
        let mut fields = vec![0u64; report::COUNT];
        fields[report::LOST] = lost;
        fields[report::NOW] = now - 300_000 + i as u64 * 100_000;
        session.on_folded_report(&mut dp, 1, start, &fields, 20 * MSS, None);
    }
    session.flush(&mut dp);
    assert_eq!(agent.received().len(), 3);
    assert_eq!(session.reports_awaiting_answer(), 3);

    // Answered in order: each answer times the oldest report still waiting.
    let answer = || Msg::UpdateFields(UpdateFields { sid: 1, updates: vec![control_update(control::PER_ACK, 0)] });
    agent.send([answer()]);
    session.drain_agent(&mut dp);
    let lat = session.answer_latency();
    assert_eq!((lat.all.count(), lat.urgent.count()), (1, 0));
    assert!(lat.all.quantile(1.0).unwrap() >= 300_000, "the oldest report, not the newest");

    // A window begun now forgets what was timed before it, but not what still waits.
    session.start_measurement_window();
    assert_eq!(session.answer_latency().all.count(), 0);
    agent.send([answer(), answer()]);
    session.drain_agent(&mut dp);
    let lat = session.answer_latency();
    assert_eq!((lat.all.count(), lat.urgent.count()), (2, 1));
    assert!(lat.urgent.quantile(1.0).unwrap() >= 200_000);
    assert_eq!(session.reports_awaiting_answer(), 0);

    // A report still unanswered when its flow closes is counted as untimed.
    let mut fields = vec![0u64; report::COUNT];
    fields[report::NOW] = monotonic_now_ns() / 1000;
    session.on_folded_report(&mut dp, 1, start, &fields, 20 * MSS, None);
    session.remove_flow(&mut dp, 1);
    assert_eq!(session.answer_latency().untimed, 1);
}
