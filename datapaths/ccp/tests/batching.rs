//! A shim's session and the agent's end of a socketpair, with every read and write on the
//! shim's end counted: messages cross in batches, one syscall per batch in each direction,
//! however many flows the batch concerns.

mod common;

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Result;
use ccswitch_ccp::agent_link::{AgentAddr, AgentLink, Counted};
use ccswitch_ccp::session::{AckInput, FlowDesc, Session, SessionDatapath};
use ccswitch_ccp::Primitives;
use ccswitch_protocol::lang::{reg_type, Implicit};
use ccswitch_protocol::wire::{self, ChangeProg, FrameReader, Msg, UpdateField, UpdateFields};

const FLOWS: u32 = 100;
const MSS: u32 = 1448;

/// Reports on every ACK.
const PER_ACK: &str = "(def (Report (volatile acked 0)))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (report))";

#[derive(Default)]
struct Windows(HashMap<u32, u32>);

impl SessionDatapath for Windows {
    fn set_directive(&mut self, sid: u32, cwnd_bytes: u32, _rate: Option<u64>) -> Result<()> {
        self.0.insert(sid, cwnd_bytes);
        Ok(())
    }
    fn clear_directive(&mut self, sid: u32) -> Result<()> {
        self.0.remove(&sid);
        Ok(())
    }
    fn set_valid_until(&mut self, _deadline_ns: u64) -> Result<()> {
        Ok(())
    }
}

/// The agent's end: reads exactly `n` messages.
fn read_msgs(s: &mut UnixStream, frames: &mut FrameReader, n: usize) -> Vec<Msg> {
    let mut got = Vec::new();
    while got.len() < n {
        while let Some(frame) = frames.next_frame().unwrap() {
            got.push(wire::decode(frame).unwrap().0);
        }
        if got.len() < n {
            assert!(frames.read_from(s).unwrap() > 0, "the shim closed the connection");
        }
    }
    assert_eq!(got.len(), n);
    got
}

/// The agent's end: all of `msgs` in one write.
fn write_msgs(s: &mut UnixStream, msgs: impl IntoIterator<Item = Msg>) {
    let mut bytes = Vec::new();
    for m in msgs {
        m.encode_into(&mut bytes).unwrap();
    }
    s.write_all(&bytes).unwrap();
}

#[test]
fn a_hundred_reports_leave_in_one_write_and_their_answers_arrive_in_one_read() {
    let (shim_end, mut agent) = UnixStream::pair().unwrap();
    shim_end.set_nonblocking(true).unwrap();
    agent.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let shim_end = Counted::new(shim_end);
    let (reads, writes) = (shim_end.reads.clone(), shim_end.writes.clone());
    let calls = || (reads.load(Ordering::Relaxed), writes.load(Ordering::Relaxed));
    let mut frames = FrameReader::new();

    let mut dp = Windows::default();
    let mut session = Session::new(AgentAddr::Stream("/nonexistent".into()), Duration::from_secs(5));
    for sid in 1..=FLOWS {
        let addr = |port| format!("10.0.0.1:{port}").parse().unwrap();
        let desc = FlowDesc { sid, src: addr(80), dst: addr(40_000 + sid), mss: MSS, init_cwnd_bytes: 10 * MSS, handshake_rtt_us: 0 };
        session.add_flow(&mut dp, desc);
    }
    // READY and a CREATE per flow: one write.
    session.attach(&mut dp, AgentLink::from_stream(Box::new(shim_end)));
    assert_eq!(calls(), (0, 1));
    let announced = read_msgs(&mut agent, &mut frames, 1 + FLOWS as usize);
    assert!(matches!(announced[0], Msg::Ready(_)));
    assert!(announced[1..].iter().all(|m| matches!(m, Msg::Create(_))));

    // The program and a CHANGE_PROG per flow: one read.
    let (install, scope) = common::compile(PER_ACK);
    let uid = scope.program_uid;
    let change = (1..=FLOWS).map(|sid| Msg::ChangeProg(ChangeProg { sid, program_uid: uid, updates: vec![] }));
    write_msgs(&mut agent, std::iter::once(Msg::InstallExpr(install)).chain(change));
    session.drain_agent(&mut dp);
    assert_eq!(calls(), (1, 1));

    // One ACK per flow, as one ring-buffer drain delivers them: a report each, one write.
    for sid in 1..=FLOWS {
        let prims = Primitives { bytes_acked: u64::from(MSS), packets_acked: 1, now: 1_000, ..Default::default() };
        let input = AckInput { prims, rtt_sample_us: Some(50_000), srtt_us: 0, datapath_cwnd_bytes: None };
        session.on_ack(&mut dp, sid, input);
    }
    assert_eq!(calls(), (1, 1), "reports wait for the flush");
    session.flush(&mut dp);
    assert_eq!(calls(), (1, 2));
    let reports = read_msgs(&mut agent, &mut frames, FLOWS as usize);
    assert!(reports.iter().all(|m| matches!(m, Msg::Measure(r) if r.fields == [u64::from(MSS)])));

    // The agent's hundred answers: one read.
    let cwnd = |sid: u32| 20 * MSS + sid;
    let answers = (1..=FLOWS).map(|sid| {
        let update = UpdateField { reg_type: reg_type::IMPLICIT, reg_index: Implicit::Cwnd as u32, value: u64::from(cwnd(sid)) };
        Msg::UpdateFields(UpdateFields { sid, updates: vec![update] })
    });
    write_msgs(&mut agent, answers);
    session.drain_agent(&mut dp);
    assert_eq!(calls(), (2, 2));
    assert_eq!(dp.0, (1..=FLOWS).map(|sid| (sid, cwnd(sid))).collect());
    assert_eq!(session.totals().reports, u64::from(FLOWS));

    // The agent goes away: the session sees it without any other thread.
    drop(agent);
    session.drain_agent(&mut dp);
    assert!(!session.connected());
    assert!(dp.0.is_empty(), "directives cleared");
}
