//! `--events FILE`: what happened to every flow, one JSON object per line, for experiments
//! and plots. Lines are buffered (one write per report would be one syscall per report) and
//! written whole: when a flow starts and when it closes (so a reader waiting for a flow's
//! `close` finds all of it), every [`FLUSH_INTERVAL`], and when the agent stops, on
//! SIGTERM/SIGINT too ([`flush_all`]); only SIGKILL loses the last interval. Times are the
//! agent's wall clock, µs since the Unix epoch; rates in bit/s.
//!
//! - `flow`: a flow was created (src/sport are the sender's side, dst/dport the receiver's; `mss` its maximum segment size in bytes, which datasets need for the loss rate);
//!   `start` says where its algorithm came from (`pinned`, `datapath`, `memory`, `initial` or
//!   `algorithm`), `start_reason` why, and `memory` what the destination memory held when it
//!   was consulted (`prefix`, `algorithm` or null, `score`), else null;
//! - `report`: one report of the standard program and the window/rate answered to it;
//!   `on_report_errors`, present once a Python algorithm's `on_report` raised, counts the
//!   flow's exceptions so far (the report was answered with the window kept);
//! - `handover`: the flow changed algorithm, why, and the features that decided it;
//! - `close`: the flow ended; `on_report_errors` is the flow's total (0 when none).

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use ccswitch_algorithms::Measurement;
use serde_json::{json, Value};
use tracing::warn;

use crate::flow::Handover;
use crate::memory::Start;
use crate::registry::{Endpoints, FlowId};

/// Buffered lines reach the file at least this often.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(500);

type Sink = Mutex<BufWriter<File>>;

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
    if let Err(e) = sink.lock().unwrap_or_else(|e| e.into_inner()).flush() {
        warn!(error = %e, "cannot write to the events file");
    }
}

pub struct EventLog {
    out: Arc<Sink>,
    /// `on_report` exceptions of each open flow that raised at least once.
    errors: Mutex<HashMap<FlowId, u64>>,
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
        let out = Arc::new(Mutex::new(BufWriter::new(file)));
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
        Ok(Self { out, errors: Mutex::new(HashMap::new()) })
    }

    fn write(&self, mut event: Value, key: FlowId) {
        event["t_us"] = json!(now_us());
        event["datapath"] = json!(key.datapath);
        event["sid"] = json!(key.sid);
        // One write_all per line: the buffer then only ever holds, and writes, whole lines.
        let line = format!("{event}\n");
        let mut out = self.out.lock().expect("events file poisoned");
        if let Err(e) = out.write_all(line.as_bytes()) {
            warn!(error = %e, "cannot write to the events file");
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
    ) {
        let mut event = json!({"event": "report", "algorithm": algorithm, "cwnd_bytes": cwnd_bytes,
               "pacing_rate_bps": bits(pacing_rate_bytes_per_s), "rtt_us": m.rtt_us,
               "acked_bytes": m.acked_bytes, "lost_packets": m.lost_packets,
               "bytes_in_flight": m.bytes_in_flight,
               "delivery_rate_bps": m.delivery_rate_bytes_per_s.saturating_mul(8),
               "timeout": m.timeout, "dp_us": m.now_us});
        // The exceptions raised while this report was handled (same thread, just before).
        let raised = crate::python::take_errors();
        let mut errors = self.errors.lock().expect("error counts poisoned");
        let total = match errors.get_mut(&key) {
            Some(n) => {
                *n += raised;
                *n
            }
            None if raised > 0 => *errors.entry(key).or_insert(raised),
            None => 0,
        };
        drop(errors);
        if total > 0 {
            event["on_report_errors"] = json!(total);
        }
        self.write(event, key);
    }

    pub fn handover(&self, key: FlowId, s: &Handover) {
        self.write(
            json!({"event": "handover", "from": s.from, "to": s.to, "kind": s.kind.as_str(),
                   "reason": s.reason, "features": s.features, "cwnd_bytes": s.cwnd_bytes,
                   "pacing_rate_bps": bits(s.pacing_rate_bytes_per_s)}),
            key,
        );
    }

    pub fn close(&self, key: FlowId, algorithm: &str, reports: u64, handovers: u32) {
        let errors = self.errors.lock().expect("error counts poisoned").remove(&key).unwrap_or(0);
        self.write(
            json!({"event": "close", "algorithm": algorithm, "reports": reports, "handovers": handovers,
                   "on_report_errors": errors}),
            key,
        );
        flush(&self.out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python::{count_error, take_errors};

    fn events(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn reports_and_close_carry_each_flows_count_of_on_report_errors() {
        let dir = std::env::temp_dir().join(format!("ccswitch-events-test-{}", std::process::id()));
        let path = dir.join("events.jsonl");
        let _ = std::fs::remove_file(&path);
        let log = EventLog::create(&path).unwrap();
        let (a, b) = (FlowId { datapath: 1, sid: 1 }, FlowId { datapath: 1, sid: 2 });
        let m = Measurement::default();
        take_errors();
        log.report(a, "Raises", &m, Some(14480), None); // no error yet
        count_error();
        log.report(a, "Raises", &m, Some(14480), None);
        log.report(b, "reno", &m, Some(14480), None); // flow b's reports raise nothing
        count_error();
        count_error();
        log.report(a, "Raises", &m, Some(14480), None);
        log.close(b, "reno", 1, 0);
        log.close(a, "Raises", 3, 0);
        let ev = events(&path);
        let errors: Vec<Option<u64>> = ev.iter().map(|e| e.get("on_report_errors").and_then(Value::as_u64)).collect();
        assert_eq!(errors, [None, Some(1), None, Some(3), Some(0), Some(3)], "{ev:?}");
        assert_eq!((ev[5]["event"].as_str(), ev[5]["sid"].as_u64()), (Some("close"), Some(1)));
        // A closed flow's count is gone: a new flow with the same key starts from zero.
        log.report(a, "Raises", &m, Some(14480), None);
        log.close(a, "Raises", 1, 0);
        let ev = events(&path);
        assert_eq!(ev[7]["on_report_errors"].as_u64(), Some(0));
        assert!(ev[6].get("on_report_errors").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
