//! `ccswitch-agent --algorithm SPEC --bench-reports N`: the cost of one report to a simple-API
//! algorithm through the agent's own code path, [`FlowController::on_report`] (decode the
//! report's fields, update the shared state, run the algorithm, build the datapath's update),
//! without the socket. Used by `ccswitch bench authoring` to compare a Python algorithm with
//! the same algorithm in Rust.
//!
//! With `--policy`, the flow also carries the policy's selector (features updated and rules
//! evaluated on every report), which measures the selector's cost; its handovers happen as they
//! would in the agent. A policy that names a model (with `decide.temporal = true`, so that the
//! model is evaluated on every report) measures the model's cost in the agent.
//!
//! With a gap (`--bench-report-gap-us`), the agent sleeps that long between reports and only
//! the reports are timed, one by one: the cost of a report that finds the threads it hands
//! work to asleep (a Python algorithm's worker, see crate::python_guard).
//!
//! The reports are synthetic and the same for every algorithm (a fixed seed): one RTT of ACKs
//! each (10–60 segments, RTT 40–60 ms), about one in 100 with a loss of 1–3 packets and one
//! in 5000 with a timeout.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use ccswitch_protocol::standard::report;

use crate::flow::{self, FlowController, ProgramCache};
use crate::program::SimpleProgram;
use crate::selector::policy::Policy;
use crate::selector::Selector;

const MSS_BYTES: u64 = 1448;
const INIT_CWND_BYTES: u64 = 10 * MSS_BYTES;
/// Reports run before timing starts (interpreter and caches warm).
const WARMUP_REPORTS: usize = 2000;

pub fn run(spec: &str, reports: usize, policy: Option<Arc<Policy>>, gap: Duration) -> Result<()> {
    let simple = SimpleProgram::compile()?;
    let cache = ProgramCache::default();
    let instance = flow::instantiate(spec)?;
    let name = instance.name().to_string();
    let (mut flow, _) =
        FlowController::new(instance, MSS_BYTES as u32, INIT_CWND_BYTES as u32, &simple, &cache)?;
    if flow.program_uid(&simple) != simple.program.uid {
        bail!("--bench-reports measures simple-API algorithms; {spec} brings its own program");
    }
    let policy_name = policy.as_ref().map(|p| p.name().to_string());
    let model_name = policy.as_ref().and_then(|p| p.model()).map(|m| m.name().to_string());
    if let Some(p) = policy {
        let mut selector = Selector::new(p);
        selector.note_handover(spec, 0);
        flow.set_selector(selector);
    }
    let inputs = synthetic_reports(WARMUP_REPORTS + reports);
    let (warmup, timed) = inputs.split_at(WARMUP_REPORTS);
    for fields in warmup {
        std::hint::black_box(flow.on_report(fields, &simple)?.answer);
    }
    let elapsed = if gap.is_zero() {
        let start = Instant::now();
        for fields in timed {
            std::hint::black_box(flow.on_report(fields, &simple)?.answer);
        }
        start.elapsed()
    } else {
        let mut elapsed = Duration::ZERO;
        for fields in timed {
            std::thread::sleep(gap);
            let start = Instant::now();
            std::hint::black_box(flow.on_report(fields, &simple)?.answer);
            elapsed += start.elapsed();
        }
        elapsed
    };
    let out = serde_json::json!({
        "algorithm": spec, "name": name, "policy": policy_name, "model": model_name, "reports": reports,
        "gap_us": gap.as_micros() as u64,
        "us_per_report": elapsed.as_secs_f64() * 1e6 / reports.max(1) as f64,
        "final_algorithm": flow.name(), "handovers": flow.handovers,
        "final_cwnd_bytes": flow.cwnd_bytes().unwrap_or(0),
    });
    println!("{out}");
    Ok(())
}

/// Report field vectors of the standard program.
fn synthetic_reports(n: usize) -> Vec<Vec<u64>> {
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |bound: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % bound
    };
    let mut now_us = 0;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut f = vec![0u64; report::COUNT];
        let segments = 10 + next(51);
        let rtt_us = 40_000 + next(20_001);
        now_us += rtt_us;
        f[report::ACKED] = segments * MSS_BYTES;
        f[report::RTT] = rtt_us;
        f[report::MINRTT] = rtt_us - next(1000);
        f[report::INFLIGHT] = (segments + next(20)) * MSS_BYTES;
        f[report::RATE] = segments * MSS_BYTES * 1_000_000 / rtt_us;
        f[report::NOW] = now_us;
        match next(5000) {
            0 => f[report::TIMEOUT] = 1,
            1..=50 => f[report::LOST] = 1 + next(3),
            _ => {}
        }
        out.push(f);
    }
    out
}
