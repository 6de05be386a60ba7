//! The agent as a datapath sees it: a real `ccswitch-agent` process on a temporary socket,
//! driven with CCP messages, including malformed ones.

mod common;

use std::io::{Read, Write};
use std::time::Duration;

use ccswitch_ccp::{CcpFlow, Primitives, ProgramTable};
use ccswitch_protocol::standard::report;
use ccswitch_protocol::wire::{Create, Measure, Msg, Ready};
use common::{report_fields, AgentProcess, Datapath};

fn start_agent(test: &str, algorithm: &str) -> AgentProcess {
    AgentProcess::start(test, &["--algorithm", algorithm, "--log-level", "debug"])
}

impl Datapath {
    fn create(&mut self, sid: u32, alg: &str) -> u32 {
        self.send(&Msg::Create(Create {
            sid,
            init_cwnd: 10 * 1448,
            mss: 1448,
            src_ip: 0xc612_0002,
            src_port: 8080,
            dst_ip: 0x6440_0001,
            dst_port: 40000,
            cong_alg: alg.into(),
        }));
        match self.recv() {
            Msg::ChangeProg(c) => {
                assert_eq!(c.sid, sid);
                assert_eq!(c.updates[0].value, 10 * 1448, "initial window is the datapath's");
                c.program_uid
            }
            other => panic!("expected CHANGE_PROG, got {other:?}"),
        }
    }

    /// Bytes as they are, whether the agent still reads them or not.
    fn send_raw(&mut self, bytes: &[u8]) {
        let _ = self.s.write_all(bytes);
    }
}

/// A report of the standard program: `acked` bytes, `lost` packets, a 50 ms RTT.
fn report(sid: u32, uid: u32, acked: u64, lost: u64) -> Msg {
    let fields =
        report_fields(&[(report::ACKED, acked), (report::LOST, lost), (report::RTT, 50_000), (report::MINRTT, 50_000)]);
    Msg::Measure(Measure { sid, program_uid: uid, fields })
}

fn cwnd_of(m: Msg) -> u64 {
    match m {
        Msg::UpdateFields(u) => u.updates[0].value,
        other => panic!("expected UPDATE_FIELDS, got {other:?}"),
    }
}

#[test]
fn installs_programs_then_drives_each_flow_with_its_own_algorithm() {
    let agent = start_agent("drives", "reno");
    let mut dp = agent.connect();
    dp.send(&Msg::Ready(Ready { id: 7 }));
    let uid = match dp.recv() {
        Msg::InstallExpr(i) => {
            assert_eq!(i.sid, 0, "programs are installed datapath-wide");
            assert!(!i.instructions.is_empty());
            i.program_uid
        }
        other => panic!("expected INSTALL_EXPR, got {other:?}"),
    };
    assert_eq!(dp.create(1, "reno"), uid);
    assert_eq!(dp.create(2, "cubic"), uid);

    // Slow start: the window grows by what was acknowledged.
    dp.send(&report(1, uid, 10 * 1448, 0));
    assert_eq!(cwnd_of(dp.recv()), 20 * 1448);
    // A loss halves Reno ...
    dp.send(&report(1, uid, 0, 1));
    assert_eq!(cwnd_of(dp.recv()), 10 * 1448);
    // ... and takes Cubic to 0.7 of its window.
    dp.send(&report(2, uid, 10 * 1448, 0));
    assert_eq!(cwnd_of(dp.recv()), 20 * 1448);
    dp.send(&report(2, uid, 0, 1));
    assert_eq!(cwnd_of(dp.recv()), 14 * 1448, "whole segments, as Linux: ⌊20 · 717/1024⌋");
}

/// A full-API algorithm: its own program, run here by the datapath-side interpreter, grows
/// the window per ACK; the agent only steps in on loss (halve, then hold growth in recovery).
#[test]
fn full_api_program_grows_the_window_in_the_datapath_and_the_agent_answers_loss() {
    let agent = start_agent("full-api", "reno");
    let mut dp = agent.connect();
    dp.send(&Msg::Ready(Ready { id: 9 }));
    let mut table = ProgramTable::new();
    let Msg::InstallExpr(simple) = dp.recv() else { panic!("no install") };
    table.install_msg(&simple).unwrap();

    let mss = 1448u32;
    dp.send(&Msg::Create(Create {
        sid: 5, init_cwnd: 10 * mss, mss, src_ip: 1, src_port: 2, dst_ip: 3, dst_port: 4,
        cong_alg: "reno-datapath".into(),
    }));
    // Its own program is installed on demand, then the flow is handed over to it.
    let Msg::InstallExpr(own) = dp.recv() else { panic!("the algorithm's program is installed first") };
    assert_ne!(own.program_uid, simple.program_uid);
    table.install_msg(&own).unwrap();
    let change = dp.recv();
    let Msg::ChangeProg(c) = &change else { panic!("expected CHANGE_PROG, got {change:?}") };
    assert_eq!(c.program_uid, own.program_uid);
    let mut flow = CcpFlow::new(5, 10 * mss, mss);
    flow.handle(&change, &table, 0).unwrap();
    assert_eq!(flow.cwnd_bytes(), 10 * mss);

    let ack = |lost: u64| Primitives {
        bytes_acked: if lost > 0 { 0 } else { u64::from(mss) },
        packets_acked: u64::from(lost == 0),
        lost_pkts_sample: lost,
        rtt_sample_us: 50_000,
        bytes_in_flight: 20 * u64::from(mss),
        ..Primitives::default()
    };
    // Slow start in the datapath: ten ACKs within the first RTT, no report, window doubled.
    for t in 1..=10u64 {
        let step = flow.on_ack(&ack(0), t * 1000);
        assert!(step.report.is_none(), "no report before an RTT has passed");
    }
    assert_eq!(flow.cwnd_bytes(), 20 * mss);

    // A loss is reported at once; the agent halves the window and holds growth.
    let report = flow.on_ack(&ack(1), 11_000).report.expect("loss reported at once");
    dp.send(&Msg::Measure(report));
    let answer = dp.recv();
    assert!(matches!(answer, Msg::UpdateFields(_)), "got {answer:?}");
    flow.handle(&answer, &table, 11_000).unwrap();
    assert_eq!(flow.cwnd_bytes(), 10 * mss, "halved by the agent");
    for t in 12..=20u64 {
        flow.on_ack(&ack(0), t * 1000);
    }
    assert_eq!(flow.cwnd_bytes(), 10 * mss, "no growth while recovering");

    // Once the data in flight at the loss is acknowledged, the agent lifts the hold and the
    // datapath grows again, now in congestion avoidance: one MSS per window acknowledged. ACKs
    // now come every 5 ms, ten per 50 ms RTT, as a window of ten segments would bring them.
    let mut t = 20_000u64;
    let mut answered = 0;
    while answered < 3 {
        t += 5000;
        if let Some(report) = flow.on_ack(&ack(0), t).report {
            dp.send(&Msg::Measure(report));
            let answer = dp.recv();
            flow.handle(&answer, &table, t).unwrap();
            answered += 1;
        }
    }
    let grown = flow.cwnd_bytes() - 10 * mss;
    assert!(
        (mss..3 * mss).contains(&grown),
        "about one MSS per RTT after recovery, grew {grown} bytes"
    );
}

#[test]
fn malformed_messages_are_rejected_and_other_flows_keep_being_served() {
    let mut agent = start_agent("malformed", "reno");
    let mut good = agent.connect();
    good.send(&Msg::Ready(Ready { id: 1 }));
    let Msg::InstallExpr(install) = good.recv() else { panic!("no install") };
    let uid = install.program_uid;
    good.create(1, "");

    // A second datapath sends garbage of every kind.
    let mut bad = agent.connect();
    let valid = report(1, uid, 1448, 0).encode().unwrap();
    let mut unknown_type = valid.clone();
    unknown_type[0] = 99;
    let mut short_len = valid.clone();
    short_len[2..4].copy_from_slice(&12u16.to_le_bytes()); // length field shorter than the body
    bad.send_raw(&unknown_type);
    bad.send_raw(&short_len[..12]);
    bad.send_raw(&report(77, uid, 1448, 0).encode().unwrap()); // unknown flow
    bad.send_raw(&[0x01, 0x00, 0x02, 0x00, 0, 0, 0, 0]); // a length shorter than the header
    let mut buf = [0u8; 16];
    assert!(
        matches!(bad.s.read(&mut buf), Ok(0) | Err(_)),
        "a stream whose framing is lost is closed"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(agent.alive(), "the agent survives malformed input");

    good.send(&report(1, uid, 10 * 1448, 0));
    assert_eq!(cwnd_of(good.recv()), 20 * 1448, "the well-behaved datapath is still served");

    // And a new datapath can still connect.
    let mut third = agent.connect();
    third.send(&Msg::Ready(Ready { id: 3 }));
    assert!(matches!(third.recv(), Msg::InstallExpr(_)));
}
