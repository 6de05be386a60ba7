//! Shared set-up of the kernel datapath's netns tests: two network namespaces joined by a
//! veth pair (198.18.0.0/15 test addresses), a python HTTP server in the sender namespace,
//! curl in the other, SHA-256 checks, and a Drop guard that removes everything it created
//! (namespaces, processes by PID, temp files), also on panic.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

pub const FILE_BYTES: usize = 20 << 20;
pub const SRV_ADDR: &str = "198.18.0.1";
pub const CLI_ADDR: &str = "198.18.0.2";
pub const PORT: u16 = 8080;

static SEQ: AtomicU32 = AtomicU32::new(0);

pub fn run(cmd: &[&str]) -> String {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn run_quiet(cmd: &[&str]) {
    let _ = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Owns everything the test creates; Drop removes it all.
pub struct Env {
    pub srv_ns: String,
    pub cli_ns: String,
    pub dir: PathBuf,
    pub children: Vec<Child>,
}

impl Env {
    pub fn new() -> Env {
        let tag = format!(
            "{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::SeqCst)
        );
        let env = Env {
            srv_ns: format!("ccsw-s-{tag}"),
            cli_ns: format!("ccsw-c-{tag}"),
            dir: std::env::temp_dir().join(format!("ccsw-kernel-test-{tag}")),
            children: Vec::new(),
        };
        fs::create_dir_all(&env.dir).unwrap();
        run(&["ip", "netns", "add", &env.srv_ns]);
        run(&["ip", "netns", "add", &env.cli_ns]);
        let (vs, vc) = (
            format!("vs{}", std::process::id() % 100000),
            format!("vc{}", std::process::id() % 100000),
        );
        run(&[
            "ip",
            "link",
            "add",
            &vs,
            "netns",
            &env.srv_ns,
            "type",
            "veth",
            "peer",
            "name",
            &vc,
            "netns",
            &env.cli_ns,
        ]);
        env.ns(
            &env.srv_ns,
            &["ip", "addr", "add", &format!("{SRV_ADDR}/30"), "dev", &vs],
        );
        env.ns(
            &env.cli_ns,
            &["ip", "addr", "add", &format!("{CLI_ADDR}/30"), "dev", &vc],
        );
        for (ns, dev) in [(&env.srv_ns, &vs), (&env.cli_ns, &vc)] {
            env.ns(ns, &["ip", "link", "set", dev, "up"]);
            env.ns(ns, &["ip", "link", "set", "lo", "up"]);
        }
        env
    }

    pub fn ns(&self, ns: &str, cmd: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(cmd);
        run(&full)
    }

    /// Makes `name` the sender namespace's default. The datapath registers non-restricted,
    /// so no edit of the global allowed list is needed (see tests/teardown.rs).
    pub fn use_cc(&mut self, name: &str) {
        let setting = format!("net.ipv4.tcp_congestion_control={name}");
        self.ns(&self.srv_ns.clone(), &["sysctl", "-q", "-w", &setting]);
    }

    /// Caps the client's receive buffer at 256 KiB, so that a client reading slowly (curl's
    /// `--limit-rate`) holds the sender back for the whole transfer. With the default, which
    /// autotunes to megabytes, the server can put all 20 MiB into it within 70 ms and close,
    /// while curl reads on for seconds.
    pub fn bound_client_receive_buffer(&self) {
        self.ns(&self.cli_ns, &["sysctl", "-qw", "net.ipv4.tcp_rmem=4096 131072 262144"]);
    }

    pub fn spawn(&mut self, cmd: &mut Command) -> usize {
        let child = cmd.spawn().expect("spawn");
        self.children.push(child);
        self.children.len() - 1
    }

    pub fn kill(&mut self, idx: usize) {
        let c = &mut self.children[idx];
        let _ = c.kill(); // SIGKILL to this child's PID only
        let _ = c.wait();
    }

    pub fn start_server(&mut self) -> usize {
        let idx = self.spawn(
            Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.srv_ns,
                    "python3",
                    "-m",
                    "http.server",
                    &PORT.to_string(),
                ])
                .args(["--bind", SRV_ADDR, "--directory"])
                .arg(&self.dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        // Wait until it listens.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let ss = self.ns(
                &self.srv_ns.clone(),
                &["ss", "-Htln", &format!("sport = :{PORT}")],
            );
            if !ss.trim().is_empty() {
                return idx;
            }
            assert!(Instant::now() < deadline, "http server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn curl(&mut self, out: &Path) -> usize {
        self.curl_with(out, &[])
    }

    /// curl with extra options (e.g. `--limit-rate`).
    pub fn curl_with(&mut self, out: &Path, extra: &[&str]) -> usize {
        let url = format!("http://{SRV_ADDR}:{PORT}/blob");
        self.spawn(
            Command::new("ip")
                .args(["netns", "exec", &self.cli_ns, "curl", "-sS", "--fail"])
                .args(extra)
                .arg("-o")
                .arg(out)
                .arg(&url)
                .stdout(Stdio::null()),
        )
    }

    pub fn wait_ok(&mut self, idx: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.children[idx].try_wait().unwrap() {
                assert!(st.success(), "child exited with {st}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "child did not finish within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn sender_cwnds(&self) -> Vec<u32> {
        let ss = self.ns(
            &self.srv_ns,
            &[
                "ss",
                "-Htin",
                "state",
                "established",
                &format!("sport = :{PORT}"),
            ],
        );
        ss.split_whitespace()
            .filter_map(|w| w.strip_prefix("cwnd:"))
            .filter_map(|v| v.parse().ok())
            .collect()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        // Give the sender namespace back a built-in default before
        // deleting it (drops its reference on our congestion control).
        run_quiet(&[
            "ip",
            "netns",
            "exec",
            &self.srv_ns,
            "sysctl",
            "-q",
            "-w",
            "net.ipv4.tcp_congestion_control=reno",
        ]);
        run_quiet(&["ip", "netns", "del", &self.srv_ns]);
        run_quiet(&["ip", "netns", "del", &self.cli_ns]);
        let _ = fs::remove_dir_all(&self.dir);
    }
}

pub fn sha256_file(p: &Path) -> [u8; 32] {
    let mut f = fs::File::open(p).unwrap();
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = f.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    h.finalize().into()
}

pub fn make_blob(dir: &Path) -> [u8; 32] {
    // Deterministic pseudo-random content (xorshift), not compressible.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut data = vec![0u8; FILE_BYTES];
    for chunk in data.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
    let p = dir.join("blob");
    fs::File::create(&p).unwrap().write_all(&data).unwrap();
    Sha256::digest(&data).into()
}

/// The agent binary built beside this test (target/<profile>/).
pub fn agent_bin() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.ancestors().nth(2).expect("target/<profile>/deps/<test>").join("ccswitch-agent");
    assert!(bin.exists(), "{} missing: build the workspace first (cargo build --workspace)", bin.display());
    bin
}

/// What [`Env::start_agent_and_shim`] started: indexes for [`Env::kill`] and the
/// agent's events file.
pub struct AgentAndShim {
    pub agent: usize,
    pub shim: usize,
    pub events: PathBuf,
}

impl Env {
    /// An agent running `algorithm` (its events in the work directory) on its own socket,
    /// and the shim `shim_bin` registered as congestion control `cc` (Reno its fallback) and
    /// made the sender namespace's default; the shim's stderr to `shim_stderr`.
    pub fn start_agent_and_shim(&mut self, shim_bin: &str, cc: &str, algorithm: &str, shim_stderr: Stdio) -> AgentAndShim {
        let (sock, events) = (self.dir.join("agent.sock"), self.dir.join("events.jsonl"));
        let agent = self.spawn(
            Command::new(agent_bin())
                .arg("--socket")
                .arg(&sock)
                .args(["--algorithm", algorithm, "--events"])
                .arg(&events)
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sock.exists() {
            assert!(Instant::now() < deadline, "the agent did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        let shim = self.spawn(
            Command::new(shim_bin)
                .args(["--cc-name", cc, "--fallback", "reno", "--agent-socket"])
                .arg(&sock)
                .stdout(Stdio::null())
                .stderr(shim_stderr),
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cc_available(cc) {
            assert!(Instant::now() < deadline, "the congestion control did not register");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.use_cc(cc);
        AgentAndShim { agent, shim, events }
    }

    /// SIGTERM to child `idx` (a shim: it logs its totals, forwards what it holds and
    /// unregisters), then waits for it to exit.
    pub fn stop_with_sigterm(&mut self, idx: usize) {
        unsafe { libc::kill(self.children[idx].id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.children[idx].try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "child {idx} did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The sender namespace's end of the veth pair.
    pub fn sender_veth(&self) -> String {
        let dev = self.ns(&self.srv_ns, &["ip", "-o", "link", "show", "type", "veth"]);
        dev.split(':').nth(1).unwrap().trim().split('@').next().unwrap().to_string()
    }
}

/// The report lines of an agent's events file (`--events`), parsed.
pub fn agent_reports(events: &Path) -> Vec<serde_json::Value> {
    fs::read_to_string(events)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &serde_json::Value| e["event"] == "report")
        .collect()
}

pub fn cc_available(name: &str) -> bool {
    fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap()
        .split_whitespace()
        .any(|n| n == name)
}

/// The workspace's target directory: target/<profile>/deps/<this test> -> target.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.ancestors()
        .nth(3)
        .expect("test binary under target/<profile>/deps")
        .to_path_buf()
}

/// The `key=value` fields of the shim's last log line carrying `message`.
pub fn shim_log_fields(log: &str, message: &str) -> HashMap<String, f64> {
    let line = log.lines().rev().find(|l| l.contains(message)).unwrap_or_else(|| panic!("no {message:?} in:\n{log}"));
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}
