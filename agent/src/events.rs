//! `--events FILE`: what happened to every flow, one JSON object per line, for experiments
//! and plots. Lines are buffered in memory (one write per report would be one syscall per
//! report, in the thread that answers the datapath) and written whole: when a flow starts and
//! when it closes (so a reader waiting for a flow's `close` finds all of it), every
//! [`FLUSH_INTERVAL`] by a thread of their own (which takes the buffer and writes it without
//! holding it, so reports go on meanwhile), past [`BUFFER_LIMIT`] bytes, and when the agent
//! stops, on SIGTERM/SIGINT too ([`flush_all`]); only SIGKILL loses the last interval. Times
//! are the agent's wall clock, µs since the Unix epoch; rates in bit/s.
//!
//! - `flow`: a flow was created (src/sport are the sender's side, dst/dport the receiver's; `mss` its maximum segment size in bytes, which datasets need for the loss rate);
//!   `start` says where its algorithm came from (`pinned`, `datapath`, `memory`, `initial` or
//!   `algorithm`), `start_reason` why, and `memory` what the destination memory held when it
//!   was consulted (`prefix`, `algorithm` or null, `score`), else null;
//! - `report`: one report and the window/rate answered to it. A full-API flow's report (its
//!   own program's) shows what its program's source says its fields measure
//!   ([`crate::program::ReportMeaning`]; 0 for what it does not report) and, as its window,
//!   what the algorithm set, else the datapath's `Cwnd` if the program reports it. A Python
//!   algorithm's troubles are counted per flow so far (see [`crate::python_guard`]), each field
//!   present once its count is above 0 (the report was answered with the window kept):
//!   `on_report_errors` (its `on_report` raised), `python_bad_values` (it set a window or rate
//!   that was refused), `python_timeouts` (it ran past its time budget and was abandoned),
//!   `python_skipped` (reports answered without calling it: suspended after a timeout, or the
//!   interpreter still busy with an abandoned call). From a datapath in the sender's kernel
//!   it also carries `sender_reductions` and `sender_in_reduction` (the window reductions its
//!   TCP entered, whether it is in one) and `handshake_rtt_us` (its handshake's RTT sample).
//!   `min_rtt_us` is the report's smallest RTT sample and `extra_acked_bytes` its ACK
//!   aggregation (the most an ACK epoch acknowledged beyond the rate the algorithm gave), each
//!   present when the report has one;
//! - `handover`: the flow changed algorithm, why, and the features that decided it;
//! - `close`: the flow ended; `on_report_errors`, `python_bad_values`, `python_timeouts` and
//!   `python_skipped` are the flow's totals (0 when none).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use ccswitch_algorithms::Measurement;
use serde::Serialize;
use serde_json::{json, Value};
use tracing::warn;

use crate::flow::Handover;
use crate::memory::Start;
use crate::python_guard::PythonCounts;
use crate::registry::{Endpoints, FlowId};

/// Buffered lines reach the file at least this often.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(500);
/// Buffered lines are written at once past this many bytes (10k flows' reports fill about
/// 300 KiB per FLUSH_INTERVAL).
pub const BUFFER_LIMIT: usize = 4 << 20;

/// The lines not yet written, and the file. Lines are appended whole, and a flush takes all
/// of them, so the file only ever receives whole lines, in order (the output's lock is taken
/// before the buffer is let go).
struct Sink {
    lines: Mutex<Vec<u8>>,
    output: Mutex<Output>,
}

/// The file, and the buffer the last flush wrote from, emptied: the next flush swaps it in
/// for the lines it takes. A fresh buffer of the same capacity each time was half a
/// megabyte of new pages to fault in every flush, at 10k flows' reports.
struct Output {
    file: File,
    spare: Vec<u8>,
}

/// Every open events file, for [`flush_all`].
static OPEN: Mutex<Vec<Weak<Sink>>> = Mutex::new(Vec::new());

/// Write out every events file's buffered lines: for exits that run no destructors
/// (`std::process::exit` on SIGTERM).
pub fn flush_all() {
    let open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
    for sink in open.iter().filter_map(Weak::upgrade) {
        flush(&sink);
    }
}

fn flush(sink: &Sink) {
    let mut lines = sink.lines.lock().unwrap_or_else(|e| e.into_inner());
    if lines.is_empty() {
        return;
    }
    let mut out = sink.output.lock().unwrap_or_else(|e| e.into_inner());
    let out = &mut *out;
    std::mem::swap(&mut *lines, &mut out.spare);
    drop(lines);
    if let Err(e) = out.file.write_all(&out.spare) {
        warn!(error = %e, "cannot write to the events file");
    }
    out.spare.clear();
}

/// A `report` line: written straight from this struct, fields in this order.
#[cfg_attr(test, derive(Serialize))]
struct ReportLine<'a> {
    event: &'static str,
    algorithm: &'a str,
    cwnd_bytes: Option<u64>,
    pacing_rate_bps: Option<u64>,
    rtt_us: u64,
    acked_bytes: u64,
    lost_packets: u64,
    bytes_in_flight: u64,
    delivery_rate_bps: u64,
    timeout: bool,
    dp_us: u64,
    /// The window reductions the sender's kernel entered, and whether it was in one (from a
    /// datapath that knows).
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    sender_reductions: Option<u64>,
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    sender_in_reduction: Option<bool>,
    /// The sender's handshake RTT, µs (from a datapath that knows).
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    handshake_rtt_us: Option<u64>,
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    min_rtt_us: Option<u64>,
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    extra_acked_bytes: Option<u64>,
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    on_report_errors: Option<u64>,
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    python_bad_values: Option<u64>,
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    python_timeouts: Option<u64>,
    #[cfg_attr(test, serde(skip_serializing_if = "Option::is_none"))]
    python_skipped: Option<u64>,
    t_us: u64,
    datapath: u64,
    sid: u32,
}

impl ReportLine<'_> {
    /// The line as serde_json writes the struct (a test holds them equal), the keys written
    /// as they are and the numbers by itoa. There is one line per report, and serde_json's
    /// serialisation of it took 10% of the kernel shim with its agent at 7.6k reports/s, a
    /// fifth of that escaping the keys character by character.
    fn write_json(&self, out: &mut Vec<u8>) {
        let mut n = itoa::Buffer::new();
        let mut num = |out: &mut Vec<u8>, key: &[u8], v: u64| {
            out.extend_from_slice(key);
            out.extend_from_slice(n.format(v).as_bytes());
        };
        out.extend_from_slice(b"{\"event\":");
        write_json_str(out, self.event);
        out.extend_from_slice(b",\"algorithm\":");
        write_json_str(out, self.algorithm);
        for (key, v) in [(&b",\"cwnd_bytes\":"[..], self.cwnd_bytes), (b",\"pacing_rate_bps\":", self.pacing_rate_bps)] {
            match v {
                Some(v) => num(out, key, v),
                None => {
                    out.extend_from_slice(key);
                    out.extend_from_slice(b"null");
                }
            }
        }
        num(out, b",\"rtt_us\":", self.rtt_us);
        num(out, b",\"acked_bytes\":", self.acked_bytes);
        num(out, b",\"lost_packets\":", self.lost_packets);
        num(out, b",\"bytes_in_flight\":", self.bytes_in_flight);
        num(out, b",\"delivery_rate_bps\":", self.delivery_rate_bps);
        out.extend_from_slice(if self.timeout { b",\"timeout\":true" } else { b",\"timeout\":false" });
        num(out, b",\"dp_us\":", self.dp_us);
        if let Some(v) = self.sender_reductions {
            num(out, b",\"sender_reductions\":", v);
        }
        if let Some(v) = self.sender_in_reduction {
            out.extend_from_slice(if v { b",\"sender_in_reduction\":true" } else { b",\"sender_in_reduction\":false" });
        }
        for (key, v) in [
            (&b",\"handshake_rtt_us\":"[..], self.handshake_rtt_us),
            (b",\"min_rtt_us\":", self.min_rtt_us),
            (b",\"extra_acked_bytes\":", self.extra_acked_bytes),
            (b",\"on_report_errors\":", self.on_report_errors),
            (b",\"python_bad_values\":", self.python_bad_values),
            (b",\"python_timeouts\":", self.python_timeouts),
            (b",\"python_skipped\":", self.python_skipped),
        ] {
            if let Some(v) = v {
                num(out, key, v);
            }
        }
        num(out, b",\"t_us\":", self.t_us);
        num(out, b",\"datapath\":", self.datapath);
        num(out, b",\"sid\":", u64::from(self.sid));
        out.push(b'}');
    }
}

/// A JSON string: as it is if nothing in it needs escaping (algorithm names), else by serde_json.
fn write_json_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\' && b < 0x7f) {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        serde_json::to_writer(out, s).expect("a string serialises");
    }
}

pub struct EventLog {
    out: Arc<Sink>,
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_micros() as u64).unwrap_or(0)
}

fn bits(bytes_per_s: Option<u64>) -> Value {
    bytes_per_s.map_or(Value::Null, |r| json!(r.saturating_mul(8)))
}

impl EventLog {
    pub fn create(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .with_context(|| format!("opening the events file {}", path.display()))?;
        let out = Arc::new(Sink { lines: Mutex::new(Vec::new()), output: Mutex::new(Output { file, spare: Vec::new() }) });
        let mut open = OPEN.lock().unwrap_or_else(|e| e.into_inner());
        open.retain(|w| w.strong_count() > 0);
        open.push(Arc::downgrade(&out));
        drop(open);
        let weak = Arc::downgrade(&out);
        std::thread::Builder::new().name("events-flush".into()).spawn(move || loop {
            std::thread::sleep(FLUSH_INTERVAL);
            match weak.upgrade() {
                Some(sink) => flush(&sink),
                None => return,
            }
        })?;
        Ok(Self { out })
    }

    fn write(&self, mut event: Value, key: FlowId) {
        event["t_us"] = json!(now_us());
        event["datapath"] = json!(key.datapath);
        event["sid"] = json!(key.sid);
        self.append(&event);
    }

    /// One line of `event`, appended whole.
    fn append<T: Serialize>(&self, event: &T) {
        self.append_with(|lines| serde_json::to_writer(lines, event).map_err(|e| warn!(error = %e, "cannot format an event")));
    }

    /// One line, as `write` appends it to the buffer (whole, or nothing if it fails).
    fn append_with(&self, write: impl FnOnce(&mut Vec<u8>) -> Result<(), ()>) {
        let mut lines = self.out.lines.lock().unwrap_or_else(|e| e.into_inner());
        let before = lines.len();
        if write(&mut lines).is_err() {
            lines.truncate(before);
            return;
        }
        lines.push(b'\n');
        let full = lines.len() > BUFFER_LIMIT;
        drop(lines);
        if full {
            flush(&self.out);
        }
    }

    pub fn flow(&self, key: FlowId, ends: &Endpoints, algorithm: &str, mss_bytes: u32, start: &Start) {
        let mut event = json!({"event": "flow", "src": ends.src.to_string(), "sport": ends.sport,
                   "dst": ends.dst.to_string(), "dport": ends.dport, "algorithm": algorithm, "mss": mss_bytes});
        if let (Value::Object(e), Value::Object(s)) = (&mut event, start.to_json()) {
            e.extend(s);
        }
        self.write(event, key);
        flush(&self.out);
    }

    pub fn report(
        &self,
        key: FlowId,
        algorithm: &str,
        m: &Measurement,
        cwnd_bytes: Option<u64>,
        pacing_rate_bytes_per_s: Option<u64>,
        python: PythonCounts,
    ) {
        let present = |n: u64| (n > 0).then_some(n);
        let line = ReportLine {
            event: "report",
            algorithm,
            cwnd_bytes,
            pacing_rate_bps: pacing_rate_bytes_per_s.map(|r| r.saturating_mul(8)),
            rtt_us: m.rtt_us,
            acked_bytes: m.acked_bytes,
            lost_packets: m.lost_packets,
            bytes_in_flight: m.bytes_in_flight,
            delivery_rate_bps: m.delivery_rate_bytes_per_s.saturating_mul(8),
            timeout: m.timeout,
            dp_us: m.now_us,
            sender_reductions: m.sender_reductions.map(|r| r.entered),
            sender_in_reduction: m.sender_reductions.map(|r| r.in_reduction),
            handshake_rtt_us: present(m.handshake_rtt_us),
            min_rtt_us: present(m.min_rtt_us),
            extra_acked_bytes: present(m.extra_acked_bytes),
            on_report_errors: present(python.errors),
            python_bad_values: present(python.bad_values),
            python_timeouts: present(python.timeouts),
            python_skipped: present(python.skipped),
            t_us: now_us(),
            datapath: key.datapath,
            sid: key.sid,
        };
        self.append_with(|lines| {
            line.write_json(lines);
            Ok(())
        });
    }

    pub fn handover(&self, key: FlowId, s: &Handover) {
        self.write(
            json!({"event": "handover", "from": s.from, "to": s.to, "kind": s.kind.as_str(),
                   "reason": s.reason, "features": s.features, "cwnd_bytes": s.cwnd_bytes,
                   "pacing_rate_bps": bits(s.pacing_rate_bytes_per_s)}),
            key,
        );
    }

    pub fn close(&self, key: FlowId, algorithm: &str, reports: u64, handovers: u32, python: PythonCounts) {
        self.write(
            json!({"event": "close", "algorithm": algorithm, "reports": reports, "handovers": handovers,
                   "on_report_errors": python.errors, "python_bad_values": python.bad_values,
                   "python_timeouts": python.timeouts, "python_skipped": python.skipped}),
            key,
        );
        flush(&self.out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_line_is_what_serde_json_writes_of_it() {
        let base = ReportLine {
            event: "report",
            algorithm: "cubic",
            cwnd_bytes: Some(14_480),
            pacing_rate_bps: None,
            rtt_us: 50_123,
            acked_bytes: 0,
            lost_packets: 3,
            bytes_in_flight: u64::MAX,
            delivery_rate_bps: 12_000_000,
            timeout: false,
            dp_us: 1_700_000_000_123_456,
            sender_reductions: None,
            sender_in_reduction: None,
            handshake_rtt_us: None,
            min_rtt_us: None,
            extra_acked_bytes: None,
            on_report_errors: None,
            python_bad_values: None,
            python_timeouts: None,
            python_skipped: None,
            t_us: 42,
            datapath: 7,
            sid: u32::MAX,
        };
        let lines = [
            ReportLine { ..base },
            ReportLine { cwnd_bytes: None, pacing_rate_bps: Some(0), timeout: true, ..base },
            ReportLine { sender_reductions: Some(12), sender_in_reduction: Some(true), ..base },
            ReportLine { sender_reductions: Some(0), sender_in_reduction: Some(false), handshake_rtt_us: Some(52_400), ..base },
            ReportLine { min_rtt_us: Some(48_000), extra_acked_bytes: Some(28_960), ..base },
            ReportLine { algorithm: "py:my \"algo\"\\\n", on_report_errors: Some(1), python_skipped: Some(9), ..base },
            ReportLine { algorithm: "é-ü", python_bad_values: Some(2), python_timeouts: Some(0), ..base },
        ];
        for line in &lines {
            let mut ours = Vec::new();
            line.write_json(&mut ours);
            assert_eq!(String::from_utf8(ours).unwrap(), serde_json::to_string(line).unwrap());
        }
    }
    fn events(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// A report line shows each Python count of its flow once it is above 0; the close line
    /// shows all four.
    #[test]
    fn reports_and_close_carry_the_flows_python_counts() {
        let dir = std::env::temp_dir().join(format!("ccswitch-events-test-{}", std::process::id()));
        let path = dir.join("events.jsonl");
        let _ = std::fs::remove_file(&path);
        let log = EventLog::create(&path).unwrap();
        let (a, b) = (FlowId { datapath: 1, sid: 1 }, FlowId { datapath: 2, sid: 7 });
        let m = Measurement::default();
        let none = PythonCounts::default();
        let raised = PythonCounts { errors: 3, ..none };
        log.report(a, "Raises", &m, Some(14480), None, none);
        log.report(a, "Raises", &m, Some(14480), None, raised);
        log.close(a, "Raises", 2, 0, raised);
        // A report line: the window and rate answered (rate in bit/s), who and when.
        log.report(b, "reno", &Measurement { rtt_us: 40_000, ..Default::default() }, Some(28960), Some(1_000), none);
        let stuck = PythonCounts { bad_values: 2, timeouts: 1, skipped: 4, ..none };
        log.report(b, "Stuck", &m, Some(14480), None, stuck);
        log.close(b, "Stuck", 2, 0, stuck);
        let ev = events(&path);
        let fields = |e: &Value| {
            ["on_report_errors", "python_bad_values", "python_timeouts", "python_skipped"].map(|k| e.get(k).and_then(Value::as_u64))
        };
        assert_eq!(fields(&ev[0]), [None; 4]);
        assert_eq!(fields(&ev[1]), [Some(3), None, None, None]);
        assert_eq!(fields(&ev[2]), [Some(3), Some(0), Some(0), Some(0)]);
        assert_eq!((ev[2]["event"].as_str(), ev[2]["sid"].as_u64(), ev[2]["reports"].as_u64()), (Some("close"), Some(1), Some(2)));
        let r = &ev[3];
        assert_eq!((r["event"].as_str(), r["algorithm"].as_str(), r["cwnd_bytes"].as_u64()), (Some("report"), Some("reno"), Some(28960)));
        assert_eq!((r["pacing_rate_bps"].as_u64(), r["rtt_us"].as_u64(), r["timeout"].as_bool()), (Some(8_000), Some(40_000), Some(false)));
        assert_eq!((r["datapath"].as_u64(), r["sid"].as_u64()), (Some(2), Some(7)));
        assert!(r["t_us"].as_u64().unwrap() > 1_700_000_000_000_000);
        assert_eq!(fields(&ev[4]), [None, Some(2), Some(1), Some(4)]);
        assert_eq!(fields(&ev[5]), [Some(0), Some(2), Some(1), Some(4)]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
