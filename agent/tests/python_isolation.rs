//! A Python algorithm stuck in a loop does not stall the agent: a real `ccswitch-agent` serves
//! one datapath (a fake one, over the real socket and session code) with two flows, one on a
//! Python algorithm whose `on_report` never returns and one on Reno. The Reno flow's report →
//! answer latency is measured without and with the stuck flow's reports arriving, and
//! printed (phases alternated, twice each); what is asserted is that every report of both flows is answered, the stuck
//! flow's window stays where it was, and the events file counts its timeouts.

mod common;

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ccswitch_protocol::lang::{reg_type, Implicit};
use ccswitch_protocol::standard::report;
use ccswitch_protocol::wire::{Create, Measure, Msg, Ready};
use common::{report_fields, AgentProcess, Datapath};
use serde_json::Value;

const MSS: u32 = 1448;
const INIT_CWND: u32 = 10 * MSS;
const STUCK: u32 = 1;
const RENO: u32 = 2;
/// How long each phase sends the Reno flow's reports, one at a time.
const PHASE: Duration = Duration::from_millis(1500);
/// The stuck flow reports this often during the second phase.
const STUCK_REPORT_EVERY: Duration = Duration::from_millis(5);
/// Far above anything the agent should take; only proves it was never stalled.
const SANITY_BOUND: Duration = Duration::from_secs(1);

fn fields(now_us: u64) -> Vec<u64> {
    report_fields(&[
        (report::ACKED, u64::from(2 * MSS)),
        (report::RTT, 20_000),
        (report::MINRTT, 20_000),
        (report::INFLIGHT, u64::from(INIT_CWND)),
        (report::RATE, 1_000_000),
        (report::NOW, now_us),
    ])
}

fn window_of(m: &Msg) -> Option<u64> {
    let updates = match m {
        Msg::UpdateFields(u) => &u.updates,
        Msg::ChangeProg(c) => &c.updates,
        _ => return None,
    };
    updates.iter().find(|u| u.reg_type == reg_type::IMPLICIT && u.reg_index == Implicit::Cwnd as u32).map(|u| u.value)
}

fn sid_of(m: &Msg) -> Option<u32> {
    match m {
        Msg::UpdateFields(u) => Some(u.sid),
        Msg::ChangeProg(c) => Some(c.sid),
        _ => None,
    }
}

/// What the stuck flow got back.
#[derive(Default)]
struct StuckAnswers {
    count: u64,
    windows_other_than_initial: u64,
}

/// Send the Reno flow's reports one at a time for `PHASE` and return each one's latency,
/// counting the stuck flow's answers that arrive meanwhile.
fn reno_latencies(dp: &mut Datapath, out: &Mutex<UnixStream>, uid: u32, now_us: &mut u64, stuck: &mut StuckAnswers) -> Vec<Duration> {
    let mut latencies = Vec::new();
    let end = Instant::now() + PHASE;
    while Instant::now() < end {
        *now_us += 1000;
        let msg = Msg::Measure(Measure { sid: RENO, program_uid: uid, fields: fields(*now_us) }).encode().unwrap();
        let sent = Instant::now();
        out.lock().unwrap().write_all(&msg).unwrap();
        loop {
            let answer = dp.recv();
            match sid_of(&answer) {
                Some(RENO) => break,
                Some(STUCK) => {
                    stuck.count += 1;
                    stuck.windows_other_than_initial += u64::from(window_of(&answer) != Some(u64::from(INIT_CWND)));
                }
                _ => panic!("unexpected answer {answer:?}"),
            }
        }
        latencies.push(sent.elapsed());
    }
    latencies
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn summary(mut l: Vec<Duration>) -> (Duration, Duration, Duration, usize) {
    l.sort();
    (percentile(&l, 0.5), percentile(&l, 0.99), *l.last().unwrap(), l.len())
}

#[test]
fn a_python_flow_stuck_in_a_loop_leaves_a_reno_flow_on_the_same_agent_answered() {
    let dir = common::test_dir("python-isolation");
    std::fs::write(
        dir.join("stuck_alg.py"),
        "class Stuck:\n    def on_report(self, flow):\n        flow.cwnd = 4 * flow.mss\n        while True:\n            pass\n",
    )
    .unwrap();
    let events = dir.join("events.jsonl");
    let args = ["--log-level", "info", "--algorithm", "reno", "--events", events.to_str().unwrap()];
    let pythonpath = dir.to_str().unwrap().to_string();
    let mut agent = AgentProcess::start_in_with_env(dir.clone(), &args, &[("PYTHONPATH", &pythonpath)]);

    let mut dp = agent.connect();
    let out = Arc::new(Mutex::new(dp.s.try_clone().unwrap()));
    dp.send(&Msg::Ready(Ready { id: 1 }));
    let Msg::InstallExpr(install) = dp.recv() else { panic!("no program installed") };
    let uid = install.program_uid;
    for (sid, alg) in [(STUCK, "py:stuck_alg:Stuck"), (RENO, "")] {
        let create = Create { sid, init_cwnd: INIT_CWND, mss: MSS, src_ip: 1, src_port: 80, dst_ip: 2, dst_port: 40_000 + sid, cong_alg: alg.into() };
        dp.send(&Msg::Create(create));
        let answer = dp.recv();
        assert_eq!(sid_of(&answer), Some(sid), "{answer:?}\n{}", agent.log_text());
    }
    let log = agent.log_text();
    assert!(log.contains("algorithm=Stuck") && log.contains("algorithm=reno"), "{log}");

    // The stuck flow reports from a thread of its own, every few ms, while `reporting` is set;
    // Reno's reports go on throughout.
    let (stop, reporting) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let stuck_sent = Arc::new(AtomicU64::new(0));
    let sender = {
        let (out, stop, reporting, stuck_sent) = (Arc::clone(&out), Arc::clone(&stop), Arc::clone(&reporting), Arc::clone(&stuck_sent));
        std::thread::spawn(move || {
            let mut t = 0;
            while !stop.load(Ordering::Relaxed) {
                if reporting.load(Ordering::Relaxed) {
                    t += 5000;
                    let msg = Msg::Measure(Measure { sid: STUCK, program_uid: uid, fields: fields(t) }).encode().unwrap();
                    out.lock().unwrap().write_all(&msg).unwrap();
                    stuck_sent.fetch_add(1, Ordering::Relaxed);
                }
                std::thread::sleep(STUCK_REPORT_EVERY);
            }
        })
    };
    let mut now_us = 0;
    let mut stuck = StuckAnswers::default();
    let (mut without, mut with) = (Vec::new(), Vec::new());
    for _ in 0..2 {
        reporting.store(false, Ordering::Relaxed);
        without.extend(reno_latencies(&mut dp, &out, uid, &mut now_us, &mut stuck));
        reporting.store(true, Ordering::Relaxed);
        with.extend(reno_latencies(&mut dp, &out, uid, &mut now_us, &mut stuck));
    }
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    let sent = stuck_sent.load(Ordering::Relaxed);
    // Every report of the stuck flow is answered too: read the answers still on their way.
    while stuck.count < sent {
        let answer = dp.recv();
        assert_eq!(sid_of(&answer), Some(STUCK), "{answer:?}");
        stuck.count += 1;
        stuck.windows_other_than_initial += u64::from(window_of(&answer) != Some(u64::from(INIT_CWND)));
    }

    for sid in [STUCK, RENO] {
        dp.send(&Msg::Measure(Measure { sid, program_uid: 0, fields: vec![] }));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let closes = loop {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        if lines.iter().filter(|e| e["event"] == "close").count() == 2 {
            break lines;
        }
        assert!(Instant::now() < deadline, "no close events; log:\n{}", agent.log_text());
        std::thread::sleep(Duration::from_millis(20));
    };
    let close = |sid: u32| closes.iter().find(|e| e["event"] == "close" && e["sid"] == sid).unwrap().clone();
    let reports_of = |sid: u32| closes.iter().filter(|e| e["event"] == "report" && e["sid"] == sid).collect::<Vec<_>>();

    let (w50, w99, wmax, wn) = summary(without.clone());
    let (s50, s99, smax, sn) = summary(with.clone());
    let (stuck_close, reno_close) = (close(STUCK), close(RENO));
    println!(
        "reno report -> answer latency without the stuck flow: p50 {w50:?} p99 {w99:?} max {wmax:?} ({wn} reports); \
         with it: p50 {s50:?} p99 {s99:?} max {smax:?} ({sn} reports); stuck flow: {sent} reports, \
         python_timeouts {}, python_skipped {}",
        stuck_close["python_timeouts"], stuck_close["python_skipped"]
    );
    // The Reno flow was answered throughout, never stalled.
    assert!(wn > 100 && sn > 100, "too few reports answered: {wn}, {sn}");
    assert!(smax < SANITY_BOUND, "a Reno report waited {smax:?}");
    assert_eq!(reno_close["reports"].as_u64(), Some((wn + sn) as u64));
    assert_eq!(reports_of(RENO).len(), wn + sn);
    assert_eq!(reno_close["python_timeouts"].as_u64(), Some(0));
    // The stuck flow: every report answered with the window it started with, its overruns
    // counted, the rest skipped.
    assert!(sent > 100, "the stuck flow sent {sent} reports");
    assert_eq!(stuck.windows_other_than_initial, 0, "the stuck flow's window moved");
    let timeouts = stuck_close["python_timeouts"].as_u64().unwrap();
    let skipped = stuck_close["python_skipped"].as_u64().unwrap();
    assert!(timeouts >= 2, "{stuck_close}");
    assert_eq!(timeouts + skipped, sent, "every report of the stuck flow timed out or was skipped: {stuck_close}");
    assert_eq!(stuck_close["reports"].as_u64(), Some(sent));
    assert!(reports_of(STUCK).iter().all(|e| e["cwnd_bytes"].as_u64() == Some(u64::from(INIT_CWND))));
    assert!(agent.log_text().contains("ran past its 20 ms budget"), "{}", agent.log_text());
    assert!(agent.alive());
}
