//! CCP compatibility with code written elsewhere: upstream CCP's published
//! `generic_cong_avoid` crate (0.4.0, on portus 0.7) drives flows on the ccswitch kernel
//! datapath over portus's unix datagram IPC (`ccswitch-kernel --agent-ipc portus-unix`).
//!
//! The crate's `reno` binary is built from the Rust package registry with the lock file its
//! authors published (`cargo install --locked`) into `target/ccp-upstream/` once; later runs
//! reuse it. No network and no cache fail the test (it is never skipped).
//!
//! Needs root (CI runs as root): it FAILS when not root, on purpose. It uses portus's fixed
//! socket `/tmp/ccp/portus` and refuses to run while another live agent holds it.
//! Everything it starts is stopped by PID; namespaces, registrations and files are removed
//! by Drop guards, also when an assertion panics.
//!
//!  a. 20 MB over HTTP between two namespaces under generic-cong-avoid's Reno: intact; Reno
//!     saw the flow (its log) and the shim applied its windows (UPDATE_FIELDS received,
//!     ACKs under directive in the BPF counters); its programs ran in the kernel's
//!     interpreter (ACKs it evaluated, no faults).
//!  b. a rate-limited transfer; Reno is stopped (SIGSTOP) mid-way, so the shim finds it
//!     silent and lets the flow fall back, then killed (SIGKILL), so the shim drops the link:
//!     the flow carries on under the in-kernel algorithm and completes intact.
//! Timings are printed, never asserted.

mod common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{cc_available, make_blob, sha256_file, target_dir, Env, FILE_BYTES, PORT};

const GCA_VERSION: &str = "0.4.0";
/// Where portus 0.7's `start!("unix", ..)` binds the agent (not configurable in portus).
const PORTUS_AGENT_SOCKET: &str = "/tmp/ccp/portus";

/// generic_cong_avoid's `reno`, built from the package registry on first use.
fn generic_cong_avoid_reno() -> PathBuf {
    let root = target_dir()
        .join("ccp-upstream")
        .join(format!("generic_cong_avoid-{GCA_VERSION}"));
    let bin = root.join("bin").join("reno");
    if bin.exists() {
        println!(
            "generic_cong_avoid {GCA_VERSION}: cached at {}",
            bin.display()
        );
        return bin;
    }
    let build_dir = root.join("build");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    println!("generic_cong_avoid {GCA_VERSION}: building from the package registry ...");
    let t0 = Instant::now();
    let out = Command::new(&cargo)
        .args(["install", "--locked", "generic_cong_avoid", "--version"])
        .arg(format!("={GCA_VERSION}"))
        .args(["--features", "bin", "--root"])
        .arg(&root)
        // A separate target directory: the one running this test is locked by cargo.
        .arg("--target-dir")
        .arg(&build_dir)
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?}: {e}"));
    let _ = fs::remove_dir_all(&build_dir);
    if !out.status.success() || !bin.exists() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(40).collect();
        panic!(
            "could not build generic_cong_avoid {GCA_VERSION} from the Rust package registry \
             (is the registry reachable?); `cargo install` exited with {}:\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    println!(
        "generic_cong_avoid {GCA_VERSION}: built in {:.1} s",
        t0.elapsed().as_secs_f64()
    );
    bin
}

/// Removes portus's agent socket file (portus leaves it behind) when the test ends.
struct PortusSocket;

impl PortusSocket {
    fn claim() -> PortusSocket {
        let live = Path::new(PORTUS_AGENT_SOCKET).exists()
            && UnixDatagram::unbound()
                .and_then(|s| s.connect(PORTUS_AGENT_SOCKET))
                .is_ok();
        assert!(
            !live,
            "another portus agent is live at {PORTUS_AGENT_SOCKET}; stop it before this test"
        );
        PortusSocket
    }
}

impl Drop for PortusSocket {
    fn drop(&mut self) {
        let _ = fs::remove_file(PORTUS_AGENT_SOCKET);
    }
}

/// Lines a child writes, collected by a thread.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn collect(from: impl std::io::Read + Send + 'static) -> Lines {
        let lines = Lines::default();
        let sink = lines.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(from).lines().map_while(Result::ok) {
                sink.0.lock().unwrap().push(line);
            }
        });
        lines
    }

    fn snapshot(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    fn count(&self, what: &str) -> usize {
        count(&self.snapshot(), what)
    }

    /// Wait until more than `before` lines contain `what`.
    fn wait_for_more(&self, what: &str, before: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        while self.count(what) <= before {
            assert!(
                Instant::now() < deadline,
                "no new line containing {what:?} within {limit:?}; got:\n{}",
                self.snapshot().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_for(&self, what: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(l) = self.snapshot().into_iter().find(|l| l.contains(what)) {
                return l;
            }
            assert!(
                Instant::now() < deadline,
                "no line containing {what:?} within {limit:?}; got:\n{}",
                self.snapshot().join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Polls Reno's log every 20 ms until `done` holds of its lines; fails with `what` and the
/// lines once `limit` has passed.
fn wait_for_log(p: &Path, limit: Duration, what: &str, done: impl Fn(&[String]) -> bool) {
    let deadline = Instant::now() + limit;
    loop {
        let lines = read_log(p);
        if done(&lines) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {lines:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reno's log without terminal colour codes.
fn read_log(p: &Path) -> Vec<String> {
    let raw = fs::read_to_string(p).unwrap_or_default();
    let mut clean = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI: ESC [ parameters final-byte
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            clean.push(c);
        }
    }
    clean.lines().map(String::from).collect()
}

/// A number in one of the shim's JSON log lines: `"key":123`.
fn json_u64(line: &str, key: &str) -> u64 {
    let pat = format!("\"{key}\":");
    let at = line
        .find(&pat)
        .unwrap_or_else(|| panic!("{key} missing in {line}"))
        + pat.len();
    let digits: String = line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("{key} is not a count in {line}"))
}

fn count(lines: &[String], what: &str) -> usize {
    lines.iter().filter(|l| l.contains(what)).count()
}

#[test]
fn generic_cong_avoid_reno_drives_the_kernel_datapath() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root (CI runs as root)"
    );
    let reno_bin = generic_cong_avoid_reno();

    let mut env = Env::new();
    let _portus = PortusSocket::claim();
    let want = make_blob(&env.dir);
    let tag = std::process::id() % 1_000_000;
    let cc = format!("ccsw_g{tag}");
    let dp_name = format!("ccsw-gca-{tag}");

    // generic-cong-avoid's Reno, as its README runs it (portus "unix" IPC, reports per RTT).
    let reno_log = env.dir.join("reno.log");
    let log = fs::File::create(&reno_log).unwrap();
    let reno = env.spawn(
        Command::new(&reno_bin)
            .env("RUST_LOG", "debug")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null()),
    );

    // The shim, on portus's IPC.
    let mut shim_cmd = Command::new(env!("CARGO_BIN_EXE_ccswitch-kernel"));
    shim_cmd
        .args([
            "--agent-ipc",
            "portus-unix",
            "--portus-name",
            &dp_name,
            "--cc-name",
            &cc,
        ])
        .args([
            "--fallback",
            "reno",
            "--log-format",
            "json",
            "--log-level",
            "info",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let shim = env.spawn(&mut shim_cmd);
    let shim_pid = env.children[shim].id() as i32;
    let shim_log = Lines::collect(env.children[shim].stderr.take().unwrap());
    shim_log.wait_for("congestion control registered", Duration::from_secs(30));
    shim_log.wait_for("connected to the agent", Duration::from_secs(30));
    // Portus logs the READY once it has read it, which may come after the shim's "connected".
    wait_for_log(&reno_log, Duration::from_secs(10), &format!("portus saw our READY from {dp_name}"), |r| {
        r.iter().any(|l| l.contains("found new datapath") && l.contains(&dp_name))
    });
    env.use_cc(&cc);
    let srv = env.start_server();

    // ---- (a) a transfer under generic-cong-avoid's Reno --------------------------------
    let out = env.dir.join("got-a");
    let t0 = Instant::now();
    let c = env.curl(&out);
    env.wait_ok(c, Duration::from_secs(60));
    let secs_a = t0.elapsed().as_secs_f64();
    assert_eq!(
        sha256_file(&out),
        want,
        "payload corrupted under generic-cong-avoid"
    );
    let r = read_log(&reno_log);
    let created_a = count(&r, "creating new flow");
    let reports_a = count(&r, "got ack");
    assert!(
        r.iter()
            .any(|l| l.contains("creating new flow") && l.contains(&format!("src_port={PORT}"))),
        "generic-cong-avoid never created the transfer's flow"
    );
    assert!(
        reports_a >= 10,
        "generic-cong-avoid handled only {reports_a} reports"
    );
    println!(
        "(a) generic-cong-avoid reno: {FILE_BYTES} B in {secs_a:.3} s ({:.0} Mbit/s); \
         reno created {created_a} flow(s), handled {reports_a} reports",
        FILE_BYTES as f64 * 8.0 / secs_a / 1e6
    );

    // ---- (b) Reno stalls, then dies, mid-transfer: the fallback carries the flow -------
    // A small receive buffer keeps ACKs coming at the rate curl reads. With the default one
    // the server fills it in a fraction of a second and then hears only window updates,
    // which reach no congestion control: a program the kernel interprets (as libccp would)
    // then reports nothing, owes the stopped agent nothing, and the shim rightly never
    // finds it silent before the transfer ends.
    env.bound_client_receive_buffer();
    let out = env.dir.join("got-b");
    let t0 = Instant::now();
    let c = env.curl_with(&out, &["--limit-rate", "1M"]);
    wait_for_log(&reno_log, Duration::from_secs(10), "generic-cong-avoid never saw the second flow", |r| {
        count(r, "creating new flow") > created_a
    });
    std::thread::sleep(Duration::from_millis(300));
    let reports_before_stop = count(&read_log(&reno_log), "got ack");
    assert!(
        reports_before_stop > reports_a,
        "reno drove the second flow too"
    );
    // Silent agent: SIGSTOP; the shim lets the deadline lapse once reports go unanswered.
    let silent_before = shim_log.count("agent silent");
    let reno_pid = env.children[reno].id() as i32;
    assert_eq!(unsafe { libc::kill(reno_pid, libc::SIGSTOP) }, 0);
    let t_stop = t0.elapsed().as_secs_f64();
    shim_log.wait_for_more("agent silent", silent_before, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(200));
    let got_before_kill = fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
    assert!(
        env.children[c].try_wait().unwrap().is_none(),
        "transfer must still be running when the agent dies"
    );
    // Dead agent: SIGKILL; the shim's next send fails and it drops the link at once.
    env.kill(reno); // SIGKILL to reno's PID
    let t_kill = t0.elapsed().as_secs_f64();
    shim_log.wait_for("agent lost", Duration::from_secs(10));
    env.wait_ok(c, Duration::from_secs(60));
    let secs_b = t0.elapsed().as_secs_f64();
    assert!((got_before_kill as usize) < FILE_BYTES);
    assert_eq!(
        sha256_file(&out),
        want,
        "payload corrupted across the agent's stall and death"
    );
    println!(
        "(b) rate-limited transfer: reno stopped at {t_stop:.2} s, killed at {t_kill:.2} s \
         ({got_before_kill} B by then); completed under the fallback in {secs_b:.2} s"
    );
    env.kill(srv);

    // ---- the shim's account -------------------------------------------------------------
    // Give the namespace a built-in default so the registration can go, then stop the shim.
    env.ns(
        &env.srv_ns.clone(),
        &["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"],
    );
    assert_eq!(unsafe { libc::kill(shim_pid, libc::SIGTERM) }, 0);
    env.wait_ok(shim, Duration::from_secs(10));
    let totals = shim_log.wait_for("shim totals", Duration::from_secs(5));
    println!("shim: {totals}");
    let (installs, change_progs, updates) = (
        json_u64(&totals, "installs"),
        json_u64(&totals, "change_progs"),
        json_u64(&totals, "update_fields"),
    );
    let (acks_directive, acks_fallback) = (
        json_u64(&totals, "acks_directive"),
        json_u64(&totals, "acks_fallback"),
    );
    assert_eq!(
        json_u64(&totals, "agent_errors"),
        0,
        "every message from portus 0.7 was accepted"
    );
    assert!(
        installs >= 4,
        "generic-cong-avoid installs its 4 programs: {installs}"
    );
    assert!(change_progs >= 2, "one program per flow: {change_progs}");
    assert!(
        updates >= 10,
        "windows from generic-cong-avoid: {updates} UPDATE_FIELDS"
    );
    assert!(
        acks_directive >= 20,
        "ACKs under generic-cong-avoid's window: {acks_directive}"
    );
    // Its programs are not the standard one: the kernel's interpreter ran them.
    assert!(
        json_u64(&totals, "acks_interpreted_in_kernel") >= 20,
        "generic-cong-avoid's programs ran in the kernel: {totals}"
    );
    assert_eq!(json_u64(&totals, "kernel_program_faults"), 0, "{totals}");
    assert!(
        acks_fallback > 0,
        "ACKs after reno's death ran the fallback"
    );
    assert!(
        json_u64(&totals, "acks_fallback_agent_late") > 0,
        "and are counted as past the agent's deadline: {totals}"
    );
    assert!(
        !cc_available(&cc),
        "registration must be gone after the shim exits"
    );
    assert!(
        !Path::new("/tmp/ccp").join(&dp_name).exists(),
        "the shim removes its socket"
    );
    drop(env);
}
