//! The kernel shim with the agent in its own process (`ccswitch-kernel --agent-in-process --
//! AGENT OPTIONS`), end to end: a real 20 MB transfer between two network namespaces under a
//! Python algorithm (the agent's embedded interpreter, in the shim's process), its SHA-256
//! intact, the flow driven by the agent's directives, its events written, the operator
//! interface served; on SIGTERM the shim exits 0, unregisters the congestion control and
//! removes the agent's sockets.
//!
//! Needs root (CI runs as root): it FAILS when not root, on purpose. Everything it creates
//! (namespaces, processes by PID, files) is removed by the `Env` guard, also on panic.
//! Timings are printed, never asserted.

mod common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{cc_available, make_blob, sha256_file, Env, PORT};

const SHIM: &str = env!("CARGO_BIN_EXE_ccswitch-kernel");
/// The Python package (the authoring examples), from this crate.
const PYTHON_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../python");
const ALGORITHM: &str = "py:ccswitch.authoring.examples.reno:Reno";

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `key=value` of the last log line holding `message`, as a number.
fn events(path: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("an events line is JSON"))
        .collect()
}

#[test]
fn a_transfer_runs_under_a_python_algorithm_in_the_shims_process_and_sigterm_cleans_up() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    let mut env = Env::new();
    let want = make_blob(&env.dir);
    let cc = format!("ccsw_i{}", std::process::id() % 1_000_000);
    let (events_path, operator, log_path) =
        (env.dir.join("events.jsonl"), env.dir.join("operator.sock"), env.dir.join("shim.log"));

    let mut cmd = Command::new(SHIM);
    cmd.args(["--agent-in-process", "--cc-name", &cc, "--fallback", "reno", "--log-level", "info", "--"])
        .args(["--algorithm", ALGORITHM, "--events"])
        .arg(&events_path)
        .arg("--operator-socket")
        .arg(&operator)
        .env("PYTHONPATH", PYTHON_DIR)
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(fs::File::create(&log_path).unwrap());
    let shim = env.spawn(&mut cmd);
    let shim_pid = env.children[shim].id();
    let log = || fs::read_to_string(&log_path).unwrap_or_default();
    wait_until("the congestion control registered", Duration::from_secs(30), || {
        assert!(env_alive(&mut env, shim), "the shim exited: {}", log());
        cc_available(&cc)
    });
    assert!(operator.exists(), "the operator interface is served: {}", log());
    // The shim connects to its agent once the congestion control is registered: soon after,
    // not necessarily by the time it shows.
    wait_until("the shim connected to its agent", Duration::from_secs(10), || {
        assert!(env_alive(&mut env, shim), "the shim exited: {}", log());
        log().contains("datapath connected")
    });

    env.use_cc(&cc);
    let server = env.start_server();
    let out = env.dir.join("got");
    let t0 = Instant::now();
    // Rate-limited, with a receive buffer too small to take the whole file at once, so that
    // the flow lives long enough to be driven by reports: held back by its receiver, it
    // reports every second (the standard program's idle interval).
    env.bound_client_receive_buffer();
    let client = env.curl_with(&out, &["--limit-rate", "8M"]);
    env.wait_ok(client, Duration::from_secs(120));
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(sha256_file(&out), want, "payload corrupted");
    env.kill(server);

    // The agent saw the flow through, under the Python algorithm.
    wait_until("the flow's close in the events file", Duration::from_secs(10), || {
        events(&events_path).iter().any(|e| e["event"] == "close")
    });
    let ev = events(&events_path);
    let flow = ev
        .iter()
        .find(|e| e["event"] == "flow" && e["sport"] == u64::from(PORT))
        .unwrap_or_else(|| panic!("the transfer's flow in the events: {ev:?}"));
    assert!(flow["algorithm"].as_str().is_some_and(|a| a.contains("Reno")), "{flow}");
    let sid = &flow["sid"];
    let reports = ev.iter().filter(|e| e["event"] == "report" && &e["sid"] == sid).count();
    assert!(reports > 0, "the flow's reports reached the Python algorithm: {ev:?}\nshim log:\n{}", log());

    // SIGTERM: the shim logs its totals, unregisters the congestion control (once the
    // namespace no longer uses it) and removes the agent's operator socket; exit status 0.
    env.ns(&env.srv_ns.clone(), &["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"]);
    // SAFETY: a signal to the PID of our own child, still unreaped.
    assert_eq!(unsafe { libc::kill(shim_pid as libc::pid_t, libc::SIGTERM) }, 0);
    let status = {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(st) = env.children[shim].try_wait().unwrap() {
                break st;
            }
            assert!(Instant::now() < deadline, "the shim did not stop on SIGTERM: {}", log());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let log = log();
    assert!(status.success(), "exit status {status}: {log}");
    assert!(!cc_available(&cc), "the congestion control is unregistered");
    assert!(!operator.exists(), "the operator socket is removed");
    let totals = common::shim_log_fields(&log, "shim totals");
    let directed = totals["acks_directive"];
    assert!(directed > 0.0, "ACKs under the agent's directives: {log}");
    assert_eq!(totals["agent_errors"], 0.0, "{log}");
    println!("{}", log.lines().filter(|l| l.contains("shim totals") || l.contains("report to directive")).collect::<Vec<_>>().join("\n"));
    println!(
        "in-process agent, {ALGORITHM}: 20 MB in {secs:.2} s ({:.0} Mbit/s), {reports} reports, {directed} ACKs directed",
        common::FILE_BYTES as f64 * 8.0 / secs / 1e6
    );
}

fn env_alive(env: &mut Env, idx: usize) -> bool {
    env.children[idx].try_wait().unwrap().is_none()
}
