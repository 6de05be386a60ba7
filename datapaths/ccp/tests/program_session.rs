//! A session over a datapath that runs programs other than the standard one itself (the
//! kernel's interpreter): the run starts from the session's registers when a flow changes to
//! such a program, takes the agent's control updates, restarts with the program, stops for
//! the standard program (which is folded instead) and with the agent; its reports reach the
//! agent unless they belong to an earlier run; a datapath that declines leaves the flow to
//! the session's interpreter and its timer.

mod common;

use std::collections::HashMap;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::Result;
use ccswitch_ccp::agent_link::{AgentAddr, AgentLink};
use ccswitch_ccp::program::fold::FoldMode;
use ccswitch_ccp::program::RegisterSnapshot;
use ccswitch_ccp::session::{monotonic_now_ns, FlowDesc, ProgramRun, Session, SessionDatapath};
use ccswitch_protocol::lang::{reg_type, Implicit};
use ccswitch_protocol::standard;
use ccswitch_protocol::wire::{self, ChangeProg, Msg, UpdateField, UpdateFields};

const MSS: u32 = 1448;
/// A program with a control register (`gain`, control 0) and a report every ACK.
const SCALED: &str = "(def (Report (volatile acked 0)) (gain 1))
    (when true
        (:= Report.acked (+ Report.acked (* Ack.bytes_acked gain)))
        (report))";

#[derive(Default)]
struct Interpreting {
    /// Flows the datapath runs: program uid, the registers it started from, start.
    runs: HashMap<u32, (u32, RegisterSnapshot, u64)>,
    run_calls: usize,
    controls: Vec<(u32, Vec<(usize, u64)>)>,
    /// Windows and rates set for running programs, with whether the run had started then.
    windows: Vec<(u32, Option<u32>, Option<u64>, bool)>,
    folds: HashMap<u32, (FoldMode, u64)>,
    /// Declines every program, as a datapath whose interpreter it does not fit.
    decline: bool,
}

impl SessionDatapath for Interpreting {
    fn set_directive(&mut self, _sid: u32, _cwnd: u32, _rate: Option<u64>) -> Result<()> {
        Ok(())
    }
    fn clear_directive(&mut self, sid: u32) -> Result<()> {
        self.runs.remove(&sid);
        self.folds.remove(&sid);
        Ok(())
    }
    fn set_valid_until(&mut self, _deadline_ns: u64) -> Result<()> {
        Ok(())
    }
    fn set_fold(&mut self, sid: u32, fold: Option<(FoldMode, u64)>) -> Result<bool> {
        match fold {
            Some(f) => self.folds.insert(sid, f),
            None => self.folds.remove(&sid),
        };
        Ok(true)
    }
    fn run_program(&mut self, sid: u32, run: Option<ProgramRun<'_>>) -> Result<bool> {
        self.run_calls += 1;
        match run {
            Some(r) if !self.decline => {
                self.runs.insert(sid, (r.program.uid(), r.registers, r.start_us));
                Ok(true)
            }
            _ => {
                self.runs.remove(&sid);
                Ok(false)
            }
        }
    }
    fn set_program_controls(&mut self, sid: u32, updates: &[(usize, u64)]) -> Result<()> {
        self.controls.push((sid, updates.to_vec()));
        Ok(())
    }
    fn set_program_window(&mut self, sid: u32, cwnd: Option<u32>, rate: Option<u64>) -> Result<()> {
        let running = self.runs.contains_key(&sid);
        self.windows.push((sid, cwnd, rate, running));
        Ok(())
    }
}

fn gain(value: u64) -> UpdateField {
    UpdateField { reg_type: reg_type::NONVOLATILE_CONTROL, reg_index: 0, value }
}

/// The implicit Cwnd or Rate.
fn implicit(reg: Implicit, value: u64) -> UpdateField {
    UpdateField { reg_type: reg_type::IMPLICIT, reg_index: reg as u32, value }
}

fn change(sid: u32, program_uid: u32, updates: Vec<UpdateField>) -> Msg {
    Msg::ChangeProg(ChangeProg { sid, program_uid, updates })
}

fn connected(dp: &mut Interpreting) -> (Session, common::AgentEnd) {
    let (shim_end, agent_end) = UnixStream::pair().unwrap();
    shim_end.set_nonblocking(true).unwrap();
    let mut agent = common::AgentEnd::new(agent_end);
    let mut session = Session::new(AgentAddr::Stream("/nonexistent".into()), Duration::from_secs(5));
    let addr = |port| format!("10.0.0.1:{port}").parse().unwrap();
    session.add_flow(dp, FlowDesc { sid: 1, src: addr(80), dst: addr(40_001), mss: MSS, init_cwnd_bytes: 10 * MSS, handshake_rtt_us: 0 });
    session.attach(dp, AgentLink::from_stream(Box::new(shim_end)));
    assert_eq!(agent.received().len(), 2, "READY and CREATE");
    let mut std_install = match wire::decode(standard::INSTALL_MESSAGE).unwrap().0 {
        Msg::InstallExpr(i) => i,
        _ => panic!("an INSTALL_EXPR"),
    };
    std_install.program_uid = 7;
    let (mut scaled, _) = common::compile(SCALED);
    scaled.program_uid = 8;
    agent.send([Msg::InstallExpr(std_install), Msg::InstallExpr(scaled)]);
    session.drain_agent(dp);
    (session, agent)
}

#[test]
fn the_datapath_runs_the_program_from_the_sessions_registers_and_its_reports_reach_the_agent() {
    let mut dp = Interpreting::default();
    let (mut session, mut agent) = connected(&mut dp);
    let before = monotonic_now_ns() / 1000;
    agent.send([change(1, 8, vec![gain(3), implicit(Implicit::Cwnd, 40 * u64::from(MSS))])]);
    session.drain_agent(&mut dp);
    let (uid, regs, start) = dp.runs[&1].clone();
    // The window the change set reaches the program the datapath runs, once started.
    assert_eq!(dp.windows, vec![(1, Some(40 * MSS), None, true)]);
    assert_eq!(uid, 8);
    assert!(start >= before && start <= monotonic_now_ns() / 1000);
    // The registers the change left: the report default, the agent's gain, Micros from now.
    assert_eq!((regs.report.first().copied(), regs.control.first().copied()), (Some(0), Some(3)));
    assert_eq!(regs.micros_zero_us, start);

    // The datapath evaluates it: the timer does not.
    session.tick(&mut dp, start + 10_000_000);
    session.flush(&mut dp);
    assert!(agent.received().is_empty(), "the flow's registers are in the datapath");

    // Its reports reach the agent as the program's MEASUREs, with the window after them.
    session.on_program_report(&mut dp, 1, start, 8, vec![43_440], start + 5_000, 30 * MSS);
    session.flush(&mut dp);
    match agent.received().as_slice() {
        [Msg::Measure(m)] => assert_eq!((m.sid, m.program_uid, m.fields.as_slice()), (1, 8, &[43_440][..])),
        other => panic!("expected one MEASURE, got {other:?}"),
    }
    assert_eq!(session.cwnd_bytes(1), Some(30 * MSS));
    // Of an earlier run or another program: dropped.
    session.on_program_report(&mut dp, 1, start - 1, 8, vec![1], start + 6_000, 30 * MSS);
    session.on_program_report(&mut dp, 1, start, 7, vec![1], start + 6_000, 30 * MSS);
    session.flush(&mut dp);
    assert!(agent.received().is_empty());

    // Control updates go to the running program; no restart.
    let calls = dp.run_calls;
    agent.send([Msg::UpdateFields(UpdateFields { sid: 1, updates: vec![gain(5)] })]);
    session.drain_agent(&mut dp);
    assert_eq!(dp.controls, vec![(1, vec![(0, 5)])]);
    assert_eq!(dp.run_calls, calls);
    // A rate alone: only the rate, and no directive of the window the session last heard of.
    agent.send([Msg::UpdateFields(UpdateFields { sid: 1, updates: vec![implicit(Implicit::Rate, 2_000_000)] })]);
    session.drain_agent(&mut dp);
    assert_eq!(dp.windows.last(), Some(&(1, None, Some(2_000_000), true)));

    // The standard program is folded instead, which ends the run.
    agent.send([change(1, 7, vec![])]);
    session.drain_agent(&mut dp);
    assert!(!dp.runs.contains_key(&1) && dp.folds.contains_key(&1));

    // Back to the program: a new run, from a new start.
    std::thread::sleep(Duration::from_millis(2));
    agent.send([change(1, 8, vec![])]);
    session.drain_agent(&mut dp);
    let (_, regs, restart) = dp.runs[&1].clone();
    assert!(restart > start && !dp.folds.contains_key(&1));
    assert_eq!(regs.control.first().copied(), Some(1), "the program's default gain, not the old update");

    // The agent goes away: no run survives it.
    drop(agent);
    session.drain_agent(&mut dp);
    assert!(!session.connected() && dp.runs.is_empty());
}

#[test]
fn a_program_the_datapath_declines_stays_with_the_sessions_interpreter() {
    let mut dp = Interpreting { decline: true, ..Interpreting::default() };
    let (mut session, mut agent) = connected(&mut dp);
    agent.send([change(1, 8, vec![gain(2)])]);
    session.drain_agent(&mut dp);
    assert!(dp.runs.is_empty() && dp.run_calls >= 1);
    // Control updates stay in the session's registers (nothing to send to the datapath).
    agent.send([Msg::UpdateFields(UpdateFields { sid: 1, updates: vec![gain(4)] })]);
    session.drain_agent(&mut dp);
    assert!(dp.controls.is_empty());
    // The session evaluates it: an ACK reports through the interpreter.
    let prims = ccswitch_ccp::Primitives { bytes_acked: 1448, now: monotonic_now_ns() / 1000, ..Default::default() };
    session.on_ack(&mut dp, 1, ccswitch_ccp::session::AckInput { prims, ..Default::default() });
    session.flush(&mut dp);
    match agent.received().as_slice() {
        [Msg::Measure(m)] => assert_eq!((m.program_uid, m.fields.as_slice()), (8, &[4 * 1448][..])),
        other => panic!("expected one MEASURE, got {other:?}"),
    }
}
