//! A session whose agent runs in the same process (`AgentAddr::InProcess`): the agent's
//! answers are applied within the flush that sent the messages, with no fd to wait on; every
//! report is timed, urgent ones by hop; an agent that fails ends the link, and the session
//! connects afresh as it would to a restarted agent.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ccswitch_ccp::agent_link::{AgentAddr, InProcessAddr, InProcessAgent, InProcessConnection};
use ccswitch_ccp::program::fold::FoldMode;
use ccswitch_ccp::session::{monotonic_now_ns, FlowDesc, Session};
use ccswitch_protocol::standard::{self, report};
use ccswitch_protocol::wire::{self, ChangeProg, Msg, UpdateFields};

const MSS: u32 = 1448;
const STANDARD_UID: u32 = 7;

/// An agent that puts every flow on the standard program and answers each report with an
/// empty UPDATE_FIELDS; it fails an exchange once `fail` is set.
#[derive(Default)]
struct TestAgent {
    connections: AtomicUsize,
    fail: Arc<AtomicBool>,
}

struct TestConnection {
    installed: bool,
    fail: Arc<AtomicBool>,
}

impl InProcessAgent for TestAgent {
    fn connect(&self) -> Box<dyn InProcessConnection> {
        self.connections.fetch_add(1, Ordering::SeqCst);
        Box::new(TestConnection { installed: false, fail: Arc::clone(&self.fail) })
    }
}

impl InProcessConnection for TestConnection {
    fn exchange(&mut self, mut sent: &[u8], answers: &mut Vec<u8>) -> Result<(), String> {
        if self.fail.load(Ordering::SeqCst) {
            return Err("the agent failed".into());
        }
        while !sent.is_empty() {
            let (msg, used) = wire::decode(sent).map_err(|e| e.to_string())?;
            sent = &sent[used..];
            let answer = match msg {
                Msg::Create(c) => {
                    if !self.installed {
                        let mut install = standard_install();
                        install.program_uid = STANDARD_UID;
                        Msg::InstallExpr(install).encode_into(answers).unwrap();
                        self.installed = true;
                    }
                    Msg::ChangeProg(ChangeProg { sid: c.sid, program_uid: STANDARD_UID, updates: vec![] })
                }
                Msg::Measure(m) if !m.fields.is_empty() => Msg::UpdateFields(UpdateFields { sid: m.sid, updates: vec![] }),
                _ => continue,
            };
            answer.encode_into(answers).unwrap();
        }
        Ok(())
    }
}

fn standard_install() -> wire::InstallExpr {
    match wire::decode(standard::INSTALL_MESSAGE).unwrap().0 {
        Msg::InstallExpr(i) => i,
        _ => panic!("an INSTALL_EXPR"),
    }
}

fn report_fields(lost: u64) -> Vec<u64> {
    let mut fields = vec![0u64; report::COUNT];
    fields[report::ACKED] = 14_480;
    fields[report::RTT] = 20_000;
    fields[report::LOST] = lost;
    fields[report::NOW] = monotonic_now_ns() / 1000;
    fields
}

#[test]
fn an_agent_in_this_process_answers_within_the_flush_and_every_report_is_timed() {
    let agent = Arc::new(TestAgent::default());
    let mut session = Session::new(AgentAddr::InProcess(InProcessAddr(agent.clone())), Duration::from_secs(5));
    let mut dp = common::Folding::default();
    let addr = |port| format!("10.0.0.1:{port}").parse().unwrap();
    session.maybe_connect(&mut dp);
    assert!(session.connected());
    assert_eq!(session.agent_fd(), None, "nothing to wait on: the agent answers within the call");

    // The CREATE is answered as it is sent: the flow is folded before any drain.
    session.add_flow(&mut dp, FlowDesc { sid: 1, src: addr(80), dst: addr(40_001), mss: MSS, init_cwnd_bytes: 10 * MSS, handshake_rtt_us: 0 });
    session.flush(&mut dp);
    let (mode, start) = dp.folds[&1];
    assert_eq!(mode, FoldMode::PER_RTT);

    // An urgent report (a loss) and a routine one, in one flush: both answered at once.
    session.on_folded_report(&mut dp, 1, start, &report_fields(1), 20 * MSS, None);
    session.on_folded_report(&mut dp, 1, start, &report_fields(0), 20 * MSS, None);
    assert_eq!(session.urgent_unanswered(), 1, "queued, not yet sent");
    session.flush(&mut dp);
    assert_eq!((session.urgent_unanswered(), session.reports_awaiting_answer()), (0, 0));
    let lat = session.answer_latency();
    assert_eq!((lat.all.count(), lat.urgent.count(), lat.untimed), (2, 1, 0));
    // The urgent one by hop, sent → answered included: it was stamped before the exchange.
    assert_eq!((lat.urgent_read.count(), lat.urgent_queued.count(), lat.urgent_agent.count()), (1, 1, 1));

    // The deadline moves while the agent answers.
    session.refresh_deadline(&mut dp);
    assert!(session.agent_healthy() && dp.valid_until_ns > monotonic_now_ns());

    // The agent fails: the link ends, directives are revoked, and a new connection follows.
    agent.fail.store(true, Ordering::SeqCst);
    session.on_folded_report(&mut dp, 1, start, &report_fields(1), 20 * MSS, None);
    session.flush(&mut dp);
    assert!(!session.connected());
    assert_eq!(dp.valid_until_ns, 0);
    assert!(dp.folds.is_empty());
    agent.fail.store(false, Ordering::SeqCst);
    std::thread::sleep(Duration::from_millis(250));
    session.maybe_connect(&mut dp);
    assert!(session.connected());
    assert_eq!(agent.connections.load(Ordering::SeqCst), 2);
    // The flow was announced again on the new connection and folded from its answer.
    assert!(dp.folds.contains_key(&1));
}
