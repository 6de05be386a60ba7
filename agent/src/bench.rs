//! `ccswitch-agent --algorithm SPEC --bench-reports N`: the cost of one report to an algorithm
//! through the agent's own code path, [`FlowController::on_report`] (for a simple-API
//! algorithm: decode the report's fields, update the shared state, run the algorithm, build
//! the datapath's update; for a full-API one, with its own program: hand it the report's
//! fields, run it, build the update from what it set), without the socket. Used by `ccswitch
//! bench authoring` to compare Python algorithms with the same algorithms in Rust.
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
use ccswitch_algorithms::DatapathInfo;
use ccswitch_protocol::lang::{reg_type, Implicit};
use ccswitch_protocol::standard::report;

use crate::flow::{self, Answer, FlowController, ProgramCache};
use crate::program::SimpleProgram;
use crate::selector::policy::Policy;
use crate::selector::Selector;

const MSS_BYTES: u64 = 1448;
const INIT_CWND_BYTES: u64 = 10 * MSS_BYTES;
/// Reports run before timing starts (interpreter and caches warm).
const WARMUP_REPORTS: usize = 2000;

fn bench_flow_info() -> DatapathInfo {
    DatapathInfo { sid: 1, mss_bytes: MSS_BYTES as u32, init_cwnd_bytes: INIT_CWND_BYTES as u32, ..DatapathInfo::default() }
}

pub fn run(spec: &str, reports: usize, policy: Option<Arc<Policy>>, gap: Duration) -> Result<()> {
    let simple = SimpleProgram::compile()?;
    let cache = ProgramCache::default();
    let instance = flow::instantiate(spec)?;
    let name = instance.name().to_string();
    let (mut flow, created) = FlowController::new(instance, bench_flow_info(), &simple, &cache)?;
    if flow.program_uid(&simple) != simple.program.uid {
        if policy.is_some() {
            bail!("--policy: {spec} brings its own program, which no selector reads");
        }
        return run_full(spec, &name, flow, created, reports, &simple);
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
        "final_cwnd_bytes": flow.cwnd_bytes().unwrap_or(0), "api": "simple",
    });
    println!("{out}");
    Ok(())
}

/// A full-API algorithm: the same synthetic path, reported by the algorithm's own program
/// (its fields found by name: `acked`, `lost`/`loss`, `timeout`, `rtt`, `inflight`, `now`,
/// `cwnd`; any other field reads 0). The datapath is modelled as far as the reports need:
/// the window the agent last set, grown per report as the program's congestion avoidance
/// would, is what `cwnd` reports; it is also the final window printed.
fn run_full(
    spec: &str,
    name: &str,
    mut flow: FlowController,
    created: Answer,
    reports: usize,
    simple: &SimpleProgram,
) -> Result<()> {
    let Answer::ChangeProgram { program, .. } = &created else { bail!("{spec}: a new flow gets no program") };
    let names = program.report_names.clone();
    let index = |wanted: &[&str]| names.iter().position(|n| wanted.contains(&n.as_str()));
    let at = [
        (index(&["acked"]), report::ACKED),
        (index(&["lost", "loss"]), report::LOST),
        (index(&["timeout"]), report::TIMEOUT),
        (index(&["rtt"]), report::RTT),
        (index(&["inflight"]), report::INFLIGHT),
        (index(&["now"]), report::NOW),
    ];
    let cwnd_at = index(&["cwnd"]);
    let mut cwnd = INIT_CWND_BYTES;
    let set_cwnd = |answer: &Answer, cwnd: &mut u64| {
        let (Answer::Update(updates) | Answer::ChangeProgram { updates, .. }) = answer;
        for u in updates {
            if u.reg_type == reg_type::IMPLICIT && u.reg_index == Implicit::Cwnd as u32 {
                *cwnd = u.value;
            }
        }
    };
    set_cwnd(&created, &mut cwnd);
    let standard = synthetic_reports(WARMUP_REPORTS + reports);
    let mut fields = vec![0u64; names.len()];
    let mut step = |f: &[u64], cwnd: &mut u64| -> Result<Answer> {
        for (to, from) in at {
            if let Some(to) = to {
                fields[to] = f[from];
            }
        }
        *cwnd = (*cwnd + f[report::ACKED] * MSS_BYTES / (*cwnd).max(1)).min(u64::from(u32::MAX));
        if let Some(i) = cwnd_at {
            fields[i] = *cwnd;
        }
        Ok(flow.on_report(&fields, simple)?.answer)
    };
    let (warmup, timed) = standard.split_at(WARMUP_REPORTS);
    for f in warmup {
        let answer = step(f, &mut cwnd)?;
        set_cwnd(&answer, &mut cwnd);
    }
    let start = Instant::now();
    for f in timed {
        let answer = std::hint::black_box(step(f, &mut cwnd)?);
        set_cwnd(&answer, &mut cwnd);
    }
    let elapsed = start.elapsed();
    let out = serde_json::json!({
        "algorithm": spec, "name": name, "policy": null, "model": null, "reports": reports,
        "us_per_report": elapsed.as_secs_f64() * 1e6 / reports.max(1) as f64,
        "final_algorithm": name, "handovers": 0, "final_cwnd_bytes": cwnd, "api": "full",
    });
    println!("{out}");
    Ok(())
}

/// Report field vectors of the standard program.
fn synthetic_reports(n: usize) -> Vec<Vec<u64>> {
    let mut rng = ccswitch_algorithms::xorshift::XorShift64::new(0x9e37_79b9_7f4a_7c15);
    let mut next = |bound: u64| rng.below(bound);
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
