//! `--events FILE`: what happened to every flow, one JSON object per line, for experiments
//! and plots. Lines are written whole as they happen (a killed agent loses nothing already
//! reported). Times are the agent's wall clock, µs since the Unix epoch; rates in bit/s.
//!
//! - `flow`: a flow was created (src/sport are the sender's side, dst/dport the receiver's);
//! - `report`: one report of the standard program and the window/rate answered to it;
//! - `switch`: the flow changed algorithm, why, and the features that decided it;
//! - `close`: the flow ended.

use std::fs::{File, OpenOptions};
use std::io::{LineWriter, Write};
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use ccswitch_algorithms::Measurement;
use serde_json::{json, Value};
use tracing::warn;

use crate::flow::Switch;
use crate::registry::{Endpoints, FlowKey};

pub struct EventLog {
    out: Mutex<LineWriter<File>>,
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
        Ok(Self { out: Mutex::new(LineWriter::new(file)) })
    }

    fn write(&self, mut event: Value, key: FlowKey) {
        event["t_us"] = json!(now_us());
        event["datapath"] = json!(key.datapath);
        event["sid"] = json!(key.sid);
        let mut out = self.out.lock().expect("events file poisoned");
        if let Err(e) = writeln!(out, "{event}") {
            warn!(error = %e, "cannot write to the events file");
        }
    }

    pub fn flow(&self, key: FlowKey, ends: &Endpoints, algorithm: &str) {
        self.write(
            json!({"event": "flow", "src": ends.src.to_string(), "sport": ends.sport,
                   "dst": ends.dst.to_string(), "dport": ends.dport, "algorithm": algorithm}),
            key,
        );
    }

    pub fn report(
        &self,
        key: FlowKey,
        algorithm: &str,
        m: &Measurement,
        cwnd_bytes: Option<u64>,
        pacing_rate_bytes_per_s: Option<u64>,
    ) {
        self.write(
            json!({"event": "report", "algorithm": algorithm, "cwnd_bytes": cwnd_bytes,
                   "pacing_rate_bps": bits(pacing_rate_bytes_per_s), "rtt_us": m.rtt_us,
                   "acked_bytes": m.acked_bytes, "lost_packets": m.lost_packets,
                   "bytes_in_flight": m.bytes_in_flight,
                   "delivery_rate_bps": m.delivery_rate_bytes_per_s.saturating_mul(8),
                   "timeout": m.timeout, "dp_us": m.now_us}),
            key,
        );
    }

    pub fn switch(&self, key: FlowKey, s: &Switch) {
        self.write(
            json!({"event": "switch", "from": s.from, "to": s.to, "kind": s.kind.as_str(),
                   "reason": s.reason, "features": s.features, "cwnd_bytes": s.cwnd_bytes,
                   "pacing_rate_bps": bits(s.pacing_rate_bytes_per_s)}),
            key,
        );
    }

    pub fn close(&self, key: FlowKey, algorithm: &str, reports: u64, switches: u32) {
        self.write(
            json!({"event": "close", "algorithm": algorithm, "reports": reports, "switches": switches}),
            key,
        );
    }
}
