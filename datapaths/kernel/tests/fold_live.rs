//! The fold end to end: the real agent (Cubic, a simple-API algorithm on the standard
//! program) and the real shim drive a 20 MB transfer between two namespaces over a 50 Mbit/s
//! link whose 20 ms token-bucket queue sets the RTT (this kernel has no netem). The kernel folds the flow's ACKs and only reports cross to user space: the shim
//! interprets almost no ACK, the reports are a small fraction of the ACKs, the agent's reports
//! account for the bytes the flow delivered, its windows were applied, and its slow start's
//! reports woke the shim without waiting for the next record. A Reno flow's slow start that
//! overflows the queue loses many segments in one window reduction: only the first of its
//! loss reports wakes the shim through the urgent lane, and the agent cuts once for it.
//!
//! Needs root (CI runs as root): it FAILS when not root, on purpose. Processes are stopped by
//! PID and the namespaces removed by the Env guard, also when an assertion panics.

mod common;

use std::fs;
use std::process::Stdio;
use std::time::Duration;

use common::{make_blob, sha256_file, AgentAndShim, Env, FILE_BYTES};

const SHIM: &str = env!("CARGO_BIN_EXE_ccswitch-kernel");

/// A 20 MB transfer from the sender namespace's server over a 50 Mbit/s link whose 20 ms
/// token-bucket queue sets the RTT, under an agent running `algorithm` and the shim; the shim
/// stopped by SIGTERM after it (it logs its totals). The environment (which holds the agent's
/// events) and the shim's log.
fn transfer_under(algorithm: &str) -> (Env, String, std::path::PathBuf) {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    let mut env = Env::new();
    let want = make_blob(&env.dir);
    let cc = format!("ccsw_{}{}", &algorithm[..1], std::process::id() % 1_000_000);
    let shim_log = env.dir.join("shim.log");
    let AgentAndShim { agent, shim, events } =
        env.start_agent_and_shim(SHIM, &cc, algorithm, Stdio::from(fs::File::create(&shim_log).unwrap()));
    let dev = env.sender_veth();
    env.ns(&env.srv_ns, &["tc", "qdisc", "add", "dev", &dev, "root", "tbf", "rate", "50mbit", "burst", "16kb", "latency", "20ms"]);
    env.start_server();

    let out = env.dir.join("got");
    let curl = env.curl(&out);
    env.wait_ok(curl, Duration::from_secs(60));
    assert_eq!(sha256_file(&out), want, "the transfer is intact");
    env.stop_with_sigterm(shim);
    env.kill(agent);
    let log = fs::read_to_string(&shim_log).unwrap();
    (env, log, events)
}

#[test]
fn a_folded_flow_sends_reports_not_acks() {
    let (_env, log, events) = transfer_under("cubic");
    let t = common::shim_log_fields(&log, "shim totals");
    let (folded, interpreted, reports) = (t["acks_folded"], t["acks_interpreted"], t["folded_reports"]);
    println!("ACKs folded {folded}, interpreted {interpreted}; reports {reports}; under directive {}", t["acks_directive"]);
    assert!(folded > 1_000.0, "the kernel folded the flow's ACKs: {t:?}");
    // Only the ACKs before the agent's program arrived reach the shim.
    assert!(interpreted < 50.0, "the shim interpreted few ACKs: {t:?}");
    assert!(reports > 50.0 && reports < folded / 5.0, "a report per RTT, not per ACK: {t:?}");
    assert!(t["acks_directive"] > folded / 2.0, "the agent's windows were applied: {t:?}");
    assert_eq!(t["ring_drops"], 0.0);
    // In slow start the flow reports per ACK, and a lone flow's report may be the last record
    // for a round trip: the routine lane's timer, not the next record, wakes the shim for it.
    let latency = common::shim_log_fields(&log, "report to directive latency");
    println!("report -> directive p50 {} us, p99 {} us; routine timer wake-ups {}", latency["p50_us"], latency["p99_us"], t["routine_timer_wakeups"]);
    assert!(t["routine_timer_wakeups"] > 0.0, "the routine lane's timer woke the shim in slow start: {t:?}");

    // The agent's reports account for what the flow delivered (all but the first ACKs'),
    // in the fields the agent reads.
    let reports = common::agent_reports(&events);
    // Every folded report reached the agent (the last few may cross the shim's stop).
    assert!(reports.len() as f64 + 5.0 >= t["folded_reports"], "{} agent reports", reports.len());
    let acked: u64 = reports.iter().map(|r| r["acked_bytes"].as_u64().unwrap()).sum();
    let file = FILE_BYTES as f64;
    assert!((0.9 * file..1.02 * file).contains(&(acked as f64)), "acked {acked} of {FILE_BYTES} bytes");
    let rtts: Vec<u64> = reports.iter().map(|r| r["rtt_us"].as_u64().unwrap()).collect();
    assert!(rtts.iter().all(|&r| (1..1_000_000).contains(&r)), "real RTT samples: {rtts:?}");
}

/// Reno has no HyStart: its slow start doubles the window into the link's queue and loses a
/// burst of segments in one window reduction. The agent pre-sets Reno's cut, which the ACK
/// that reveals the first loss applies, so the reduction's later loss reports cannot change a
/// decision: they go in the routine lane, and the urgent lane (a wake-up each, a trapped
/// self-IPI on these VMs) carries only the reduction's first. Each report tells the agent of
/// the kernel's window reductions, and the agent cuts once per reduction the kernel entered,
/// as the kernel's own Reno cuts, however long a retransmission lost again keeps one running.
#[test]
fn reno_cuts_once_per_kernel_reduction_and_only_its_first_loss_is_urgent() {
    let (_env, log, events) = transfer_under("reno");
    let urgent = common::shim_log_fields(&log, "shim totals")["urgent_lane_reports"];
    let reports = common::agent_reports(&events);
    let of_loss: Vec<_> = reports.iter().filter(|r| r["lost_packets"].as_u64().unwrap() > 0).collect();
    println!("reports of a loss {}, of which through the urgent lane {urgent}", of_loss.len());
    assert!(urgent >= 1.0, "the reduction's first loss was urgent");
    assert!(urgent < of_loss.len() as f64, "the reduction's later losses went routine: {urgent} urgent of {}", of_loss.len());

    // Folded reports carry the kernel's reductions (those the shim interpreted before the
    // agent's program arrived do not).
    let entered: Vec<u64> = reports.iter().filter_map(|r| r["sender_reductions"].as_u64()).collect();
    assert!(entered.len() + 50 > reports.len(), "{} of {} reports carry the kernel's reductions", entered.len(), reports.len());
    assert!(entered.windows(2).all(|w| w[0] <= w[1]), "a count: {entered:?}");
    // And the handshake's RTT the kernel measured before the flow's congestion control began
    // (tcp_min_rtt): one value per flow, an RTT of this path (µs, where the flow's samples
    // are tens of µs to the 20 ms queue), not a clock reading.
    let handshake: Vec<u64> = reports.iter().filter_map(|r| r["handshake_rtt_us"].as_u64()).collect();
    let least_rtt = reports.iter().filter_map(|r| r["rtt_us"].as_u64()).filter(|&v| v > 0).min().unwrap();
    println!("handshake RTT {:?} µs, least RTT sample {least_rtt} µs", handshake.first());
    assert_eq!(handshake.len(), entered.len(), "every report with the reductions carries it");
    assert!(handshake.windows(2).all(|w| w[0] == w[1]), "one value per flow: {handshake:?}");
    assert!(handshake[0] > 0 && handshake[0] < 100_000, "{} µs, least sample {least_rtt} µs", handshake[0]);
    // One CI run had a loss report outside a reduction (not seen again in 10 local runs): an
    // ACK that ends a reduction as it marks a loss, or a loss marked after a timeout (the Loss
    // state is no reduction), would report so. One is allowed; a fold that misreads the state
    // would put many there.
    let outside: Vec<_> = of_loss.iter().filter(|r| r["sender_in_reduction"] != true).collect();
    assert!(outside.len() <= 1, "a loss puts the kernel in Recovery: {outside:?}");
    let windows: Vec<u64> = reports.iter().filter_map(|r| r["cwnd_bytes"].as_u64()).collect();
    let cuts = windows.windows(2).filter(|w| w[1] < w[0]).count() as u64;
    let timeouts = reports.iter().filter(|r| r["timeout"] == true).count() as u64;
    let reductions = *entered.last().unwrap();
    println!("kernel reductions {reductions}, agent's cuts {cuts}, timeouts {timeouts}");
    assert!(reductions >= 1 && cuts >= 1, "the queue overflowed");
    assert!(cuts <= reductions + timeouts, "the agent cut {cuts} times in {reductions} kernel reductions");
}
