//! A Python algorithm stuck in a loop does not stall the agent: a real `ccswitch-agent` serves
//! one datapath (a fake one, over the real socket and session code) with two flows, one on a
//! Python algorithm whose `on_report` never returns and one on Reno. The Reno flow's report →
//! answer latency is measured without and with the stuck flow's reports arriving, and
//! printed (phases alternated, twice each); what is asserted is that every report of both
//! flows is answered, the stuck flow's window stays where it was, and the events file counts
//! its timeouts. Twice: with the stuck algorithm written against the simple API, and as a
//! pyportus file (its own datapath program), beside which a third flow, pyportus too, sets a
//! NaN or negative window on every other report: refused and counted, the window kept, and
//! its reports written to the events file with the window it has.

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
/// The pyportus flow that sets a NaN or negative window on every other report.
const BAD: u32 = 3;
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

/// What the Python flows got back.
#[derive(Default)]
struct StuckAnswers {
    count: u64,
    /// Answers of the stuck flow that set a window other than the initial one.
    windows_other_than_initial: u64,
    /// Answers of the flow setting bad values.
    bad_count: u64,
    /// Windows the agent sent the flow setting bad values.
    bad_windows: Vec<u64>,
}

impl StuckAnswers {
    /// Note an answer to a Python flow; false if it is for another flow.
    fn note(&mut self, answer: &Msg) -> bool {
        match sid_of(answer) {
            Some(STUCK) => {
                self.count += 1;
                self.windows_other_than_initial += u64::from(window_of(answer).is_some_and(|w| w != u64::from(INIT_CWND)));
            }
            Some(BAD) => {
                self.bad_count += 1;
                self.bad_windows.extend(window_of(answer));
            }
            _ => return false,
        }
        true
    }
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
            if sid_of(&answer) == Some(RENO) {
                break;
            }
            assert!(stuck.note(&answer), "unexpected answer {answer:?}");
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

/// Two pyportus algorithms over one program: `Stuck` loops in `on_report`; `Bad` sets a NaN
/// or negative window on odd reports and grows its window by what was acknowledged on even
/// ones.
const PYPORTUS_ALGORITHMS: &str = r#"
import math
import portus

PROGRAM = """
(def (Report (volatile acked 0) (volatile rtt 0) (volatile inflight 0)))
(when true
    (:= Report.acked (+ Report.acked Ack.bytes_acked))
    (:= Report.rtt Flow.rtt_sample_us)
    (:= Report.inflight Flow.bytes_in_flight)
    (fallthrough))
(when (> Micros Flow.rtt_sample_us)
    (report)
    (:= Micros 0))
"""

class StuckFlow:
    def __init__(self, datapath, datapath_info):
        self.dp = datapath
        datapath.set_program("loop", [("Cwnd", datapath_info.init_cwnd)])
    def on_report(self, r):
        self.dp.update_field("Cwnd", 4 * 1448)
        while True:
            pass

class BadFlow:
    def __init__(self, datapath, datapath_info):
        self.dp = datapath
        self.reports = 0
        self.cwnd = datapath_info.init_cwnd
        datapath.set_program("loop", [("Cwnd", self.cwnd)])
    def on_report(self, r):
        self.reports += 1
        if self.reports % 2:
            self.dp.update_field("Cwnd", (math.nan, -1448)[self.reports // 2 % 2])
        else:
            self.cwnd += r.acked
            self.dp.update_field("Cwnd", self.cwnd)

class Stuck(portus.AlgBase):
    def datapath_programs(self):
        return {"loop": PROGRAM}
    def new_flow(self, datapath, datapath_info):
        return StuckFlow(datapath, datapath_info)

class Bad(Stuck):
    def new_flow(self, datapath, datapath_info):
        return BadFlow(datapath, datapath_info)
"#;

/// How the stuck algorithm is written.
#[derive(Clone, Copy, PartialEq)]
enum StuckApi {
    Simple,
    Pyportus,
}

#[test]
fn a_python_flow_stuck_in_a_loop_leaves_a_reno_flow_on_the_same_agent_answered() {
    stuck_beside_reno(StuckApi::Simple);
}

#[test]
fn a_pyportus_flow_stuck_in_a_loop_leaves_a_reno_flow_answered_and_one_setting_bad_windows_keeps_its_window() {
    stuck_beside_reno(StuckApi::Pyportus);
}

fn stuck_beside_reno(api: StuckApi) {
    let dir = common::test_dir(if api == StuckApi::Simple { "python-isolation" } else { "pyportus-isolation" });
    std::fs::write(
        dir.join("stuck_alg.py"),
        "class Stuck:\n    def on_report(self, flow):\n        flow.cwnd = 4 * flow.mss\n        while True:\n            pass\n",
    )
    .unwrap();
    std::fs::write(dir.join("isolation_pyportus.py"), PYPORTUS_ALGORITHMS).unwrap();
    let events = dir.join("events.jsonl");
    let args = ["--log-level", "info", "--algorithm", "reno", "--events", events.to_str().unwrap()];
    let pythonpath = dir.to_str().unwrap().to_string();
    let mut agent = AgentProcess::start_in_with_env(dir.clone(), &args, &[("PYTHONPATH", &pythonpath)]);

    let mut dp = agent.connect();
    let out = Arc::new(Mutex::new(dp.s.try_clone().unwrap()));
    dp.send(&Msg::Ready(Ready { id: 1 }));
    let Msg::InstallExpr(install) = dp.recv() else { panic!("no program installed") };
    let uid = install.program_uid;
    let flows: &[(u32, &str)] = match api {
        StuckApi::Simple => &[(STUCK, "py:stuck_alg:Stuck"), (RENO, "")],
        StuckApi::Pyportus => {
            &[(STUCK, "pyportus:isolation_pyportus.py:Stuck"), (RENO, ""), (BAD, "pyportus:isolation_pyportus.py:Bad")]
        }
    };
    // The program each flow reports from.
    let mut uids = std::collections::HashMap::new();
    for &(sid, alg) in flows {
        let create = Create { sid, init_cwnd: INIT_CWND, mss: MSS, src_ip: 1, src_port: 80, dst_ip: 2, dst_port: 40_000 + sid, cong_alg: alg.into() };
        dp.send(&Msg::Create(create));
        let answer = loop {
            match dp.recv() {
                Msg::InstallExpr(_) => continue, // a pyportus flow's program, installed first
                answer => break answer,
            }
        };
        assert_eq!(sid_of(&answer), Some(sid), "{answer:?}\n{}", agent.log_text());
        assert_eq!(window_of(&answer), Some(u64::from(INIT_CWND)), "{answer:?}");
        uids.insert(sid, if let Msg::ChangeProg(c) = &answer { c.program_uid } else { uid });
    }
    let log = agent.log_text();
    assert!(log.contains("algorithm=Stuck") && log.contains("algorithm=reno"), "{log}");
    let (stuck_uid, bad_uid) = (uids[&STUCK], uids.get(&BAD).copied());
    let python_fields = move |t: u64| match api {
        StuckApi::Simple => fields(t),
        // The program's Report: acked, rtt, inflight.
        StuckApi::Pyportus => vec![u64::from(2 * MSS), 20_000, u64::from(INIT_CWND)],
    };

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
                    let mut msg = Msg::Measure(Measure { sid: STUCK, program_uid: stuck_uid, fields: python_fields(t) }).encode().unwrap();
                    if let Some(bad_uid) = bad_uid {
                        msg.extend(Msg::Measure(Measure { sid: BAD, program_uid: bad_uid, fields: python_fields(t) }).encode().unwrap());
                    }
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
    // Every report of the Python flows is answered too: read the answers still on their way.
    let bad_sent = if bad_uid.is_some() { sent } else { 0 };
    while stuck.count < sent || stuck.bad_count < bad_sent {
        let answer = dp.recv();
        assert!(stuck.note(&answer), "{answer:?}");
    }

    for &(sid, _) in flows {
        dp.send(&Msg::Measure(Measure { sid, program_uid: 0, fields: vec![] }));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let closes = loop {
        let text = std::fs::read_to_string(&events).unwrap_or_default();
        let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        if lines.iter().filter(|e| e["event"] == "close").count() == flows.len() {
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
    assert_eq!(reports_of(STUCK).len() as u64, sent, "a line per report of the stuck flow");
    assert!(reports_of(STUCK).iter().all(|e| e["cwnd_bytes"].as_u64() == Some(u64::from(INIT_CWND))));
    assert!(agent.log_text().contains("on_report ran past its 20 ms budget"), "{}", agent.log_text());
    if bad_uid.is_some() {
        // The flow setting bad values: refused and counted, never sent, its window kept; its
        // good reports grew the window, and every report has its line, with the window.
        let bad_close = close(BAD);
        let bad_values = bad_close["python_bad_values"].as_u64().unwrap();
        let served = sent - bad_close["python_skipped"].as_u64().unwrap() - bad_close["python_timeouts"].as_u64().unwrap();
        println!("flow setting bad values: {sent} reports, {served} served, python_bad_values {bad_values}: {bad_close}");
        assert!(bad_values >= 10 && bad_values.abs_diff(served / 2) <= 1, "{bad_close}");
        assert_eq!(bad_close["on_report_errors"].as_u64(), Some(0), "{bad_close}");
        assert!(stuck.bad_windows.windows(2).all(|w| w[0] < w[1]), "only grown windows were sent: {:?}", stuck.bad_windows);
        assert!(stuck.bad_windows.len() as u64 >= bad_values - 1, "{:?}", stuck.bad_windows);
        let lines = reports_of(BAD);
        assert_eq!(lines.len() as u64, sent, "a line per report");
        let windows: Vec<u64> = lines.iter().map(|e| e["cwnd_bytes"].as_u64().unwrap()).collect();
        assert_eq!(windows.last(), stuck.bad_windows.last(), "the lines carry the window sent");
        assert!(windows.windows(2).all(|w| w[0] <= w[1]) && windows[0] >= u64::from(INIT_CWND), "{windows:?}");
        assert!(lines.iter().all(|e| e["acked_bytes"] == 2 * MSS && e["rtt_us"] == 20_000 && e["bytes_in_flight"] == INIT_CWND));
        assert!(agent.log_text().contains("cwnd = NaN: a window is a number of bytes from 1 segment"), "{}", agent.log_text());
    }
    assert!(agent.alive());
}
