//! End-to-end test of the kernel datapath with real TCP transfers between two
//! network namespaces joined by a veth pair (198.18.0.0/15 test addresses).
//!
//! Needs root (CI runs as root): it FAILS when not root, on purpose.
//! Everything it creates (namespaces, processes, congestion-control
//! registrations, the allowed-list entry, temp files) is removed by a Drop
//! guard, also when an assertion panics.
//!
//! Phases (one test, because they share the global
//! net.ipv4.tcp_allowed_congestion_control):
//!  a. in-process datapath, no agent: 20 MB over HTTP completes under the
//!     fallback, SHA-256 intact; CREATE/ACK/CLOSE events seen.
//!  b. examples/fixed_window pins the flow to cwnd = 2 × mss with a pacing
//!     rate: `ss -ti` in the sender namespace shows cwnd:2.
//!  c. the example is killed (SIGKILL) mid-transfer: the flow carries on under
//!     the fallback and completes intact.
//! Timings are printed, never asserted (shared, noisy machines).

use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use ccswitch_kernel::{Event, Fallback, KernelDatapath, LoadOptions};
use sha2::{Digest, Sha256};

const FILE_BYTES: usize = 20 << 20;
const SRV_ADDR: &str = "198.18.0.1";
const CLI_ADDR: &str = "198.18.0.2";
const PORT: u16 = 8080;
const ALLOWED: &str = "/proc/sys/net/ipv4/tcp_allowed_congestion_control";

static SEQ: AtomicU32 = AtomicU32::new(0);

fn run(cmd: &[&str]) -> String {
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

fn run_quiet(cmd: &[&str]) {
    let _ = Command::new(cmd[0])
        .args(&cmd[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn allowed_edit(name: &str, add: bool) {
    let cur = fs::read_to_string(ALLOWED).expect("read allowed list");
    let mut names: Vec<String> = cur
        .split_whitespace()
        .filter(|n| *n != name)
        .map(String::from)
        .collect();
    if add {
        names.push(name.to_string());
    }
    fs::write(ALLOWED, names.join(" ")).expect("write allowed list");
}

/// Owns everything the test creates; Drop removes it all.
struct Env {
    srv_ns: String,
    cli_ns: String,
    dir: PathBuf,
    children: Vec<Child>,
    cc_names: BTreeSet<String>,
}

impl Env {
    fn new() -> Env {
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
            cc_names: BTreeSet::new(),
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

    fn ns(&self, ns: &str, cmd: &[&str]) -> String {
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(cmd);
        run(&full)
    }

    /// Allows `name` globally and makes it the sender namespace's default.
    /// Retries because other tools on the machine may rewrite the global
    /// allowed list concurrently; it only matters until the listener exists.
    fn use_cc(&mut self, name: &str) {
        self.cc_names.insert(name.to_string());
        let setting = format!("net.ipv4.tcp_congestion_control={name}");
        for attempt in 0.. {
            allowed_edit(name, true);
            let st = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.srv_ns,
                    "sysctl",
                    "-q",
                    "-w",
                    &setting,
                ])
                .stderr(Stdio::null())
                .status()
                .expect("sysctl");
            if st.success() {
                return;
            }
            assert!(
                attempt < 20,
                "cannot make {name} the sender namespace's default"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn spawn(&mut self, cmd: &mut Command) -> usize {
        let child = cmd.spawn().expect("spawn");
        self.children.push(child);
        self.children.len() - 1
    }

    fn kill(&mut self, idx: usize) {
        let c = &mut self.children[idx];
        let _ = c.kill(); // SIGKILL to this child's PID only
        let _ = c.wait();
    }

    fn start_server(&mut self) -> usize {
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

    fn curl(&mut self, out: &Path) -> usize {
        let url = format!("http://{SRV_ADDR}:{PORT}/blob");
        self.spawn(
            Command::new("ip")
                .args(["netns", "exec", &self.cli_ns, "curl", "-sS", "--fail", "-o"])
                .arg(out)
                .arg(&url)
                .stdout(Stdio::null()),
        )
    }

    fn wait_ok(&mut self, idx: usize, limit: Duration) {
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

    fn sender_cwnds(&self) -> Vec<u32> {
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
        for n in &self.cc_names {
            if fs::read_to_string(ALLOWED)
                .map(|s| s.split_whitespace().any(|x| x == n))
                .unwrap_or(false)
            {
                allowed_edit(n, false);
            }
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

fn sha256_file(p: &Path) -> [u8; 32] {
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

fn make_blob(dir: &Path) -> [u8; 32] {
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

fn cc_available(name: &str) -> bool {
    fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap()
        .split_whitespace()
        .any(|n| n == name)
}

fn example_binary() -> PathBuf {
    // target/<profile>/deps/<this test> -> target/<profile>/examples/fixed_window
    let exe = std::env::current_exe().unwrap();
    let p = exe
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples")
        .join("fixed_window");
    assert!(
        p.exists(),
        "{} missing: cargo test builds examples; run `cargo build --examples`",
        p.display()
    );
    p
}

#[test]
fn transfers_under_fallback_directive_and_agent_death() {
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root (CI runs as root)"
    );

    let mut env = Env::new();
    let want = make_blob(&env.dir);
    let cc = format!("ccsw_t{}", std::process::id() % 1_000_000);

    // ---- (a) fallback only ------------------------------------------------
    {
        let mut dp = KernelDatapath::load(LoadOptions {
            fallback: Fallback::Reno,
            cc_name: cc.clone(),
        })
        .expect("load datapath");
        assert!(cc_available(&cc));
        env.use_cc(&cc);
        let srv = env.start_server();
        let out = env.dir.join("got-a");
        let t0 = Instant::now();
        let c = env.curl(&out);
        let mut events = Vec::new();
        while env.children[c].try_wait().unwrap().is_none() {
            dp.poll(Duration::from_millis(20), |e| events.push(e))
                .unwrap();
            assert!(
                t0.elapsed() < Duration::from_secs(120),
                "fallback transfer stuck"
            );
        }
        let secs = t0.elapsed().as_secs_f64();
        env.wait_ok(c, Duration::from_secs(1));
        assert_eq!(sha256_file(&out), want, "payload corrupted under fallback");
        env.kill(srv);
        // Closing the server's socket emits CLOSE; give it a moment.
        let t1 = Instant::now();
        while !events.iter().any(|e| matches!(e, Event::Closed { .. }))
            && t1.elapsed() < Duration::from_secs(5)
        {
            dp.poll(Duration::from_millis(50), |e| events.push(e))
                .unwrap();
        }
        let created: Vec<_> = events
            .iter()
            .filter_map(|e| {
                if let Event::Created(f) = e {
                    Some(f.clone())
                } else {
                    None
                }
            })
            .filter(|f| f.src.port() == PORT)
            .collect();
        assert_eq!(created.len(), 1, "one CREATE for the transfer: {created:?}");
        let flow = &created[0];
        assert_eq!(flow.src.ip().to_string(), SRV_ADDR);
        assert_eq!(flow.dst.ip().to_string(), CLI_ADDR);
        assert!(flow.mss > 500 && flow.init_cwnd_bytes >= flow.mss);
        let acks: Vec<_> = events
            .iter()
            .filter_map(|e| if let Event::Ack(a) = e { Some(a) } else { None })
            .filter(|a| a.flow_id == flow.flow_id)
            .collect();
        let acked: u64 = acks.iter().map(|a| a.bytes_acked as u64).sum();
        let stats = dp.stats();
        println!(
            "(a) fallback reno: {:.3} s, {:.0} Mbit/s, {} ACK events, {} bytes acked, max cwnd {} B, stats {:?}",
            secs,
            FILE_BYTES as f64 * 8.0 / secs / 1e6,
            acks.len(),
            acked,
            acks.iter().map(|a| a.snd_cwnd_bytes).max().unwrap_or(0),
            stats
        );
        assert!(!acks.is_empty());
        assert!(
            acks.iter().all(|a| a.fallback),
            "no agent: every ACK must be fallback"
        );
        assert!(acks.iter().any(|a| a.rtt_sample_us.is_some()));
        assert!(acks.iter().any(|a| a.rate_outgoing > 0));
        if stats.ring_drops == 0 {
            // Every delivered byte (plus SYN/FIN accounting) was reported.
            assert!(acked >= FILE_BYTES as u64, "acked {acked} < file size");
        }
        assert!(
            events.contains(&Event::Closed {
                flow_id: flow.flow_id
            }),
            "CLOSE seen"
        );
        assert_eq!(stats.acks_directive, 0);
        assert!(stats.acks_fallback > 0 && stats.flows_created >= 1);
        // Unregister: the sender namespace must stop referencing it first.
        env.ns(
            &env.srv_ns.clone(),
            &["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"],
        );
        drop(dp);
        assert!(!cc_available(&cc), "still registered after drop");
    }

    // ---- (b) fixed 2-packet window from the example, (c) kill it ----------
    {
        let mut child = Command::new(example_binary())
            .args(["--cwnd", "2896", "--pacing", "4000000", "--name", &cc])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn fixed_window");
        let stdout = child.stdout.take().unwrap();
        env.children.push(child);
        let ex = env.children.len() - 1;
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let ready = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("example output");
        assert_eq!(ready, format!("ready {cc}"));
        env.use_cc(&cc);
        let srv = env.start_server();
        let out = env.dir.join("got-b");
        let t0 = Instant::now();
        let c = env.curl(&out);

        // (b) the sender's cwnd is pinned to 2 packets.
        let mut seen_two = 0;
        while seen_two < 5 {
            assert!(
                env.children[c].try_wait().unwrap().is_none(),
                "transfer ended before cwnd:2 was observed"
            );
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "never saw cwnd:2 (saw {:?})",
                env.sender_cwnds()
            );
            if env.sender_cwnds().contains(&2) {
                seen_two += 1;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let got_before_kill = fs::metadata(&out).map(|m| m.len()).unwrap_or(0);
        let t_kill = t0.elapsed().as_secs_f64();
        let lines: Vec<String> = rx.try_iter().collect();
        assert!(
            lines.iter().any(|l| l.starts_with("created flow")),
            "example saw the flow: {lines:?}"
        );

        // (c) the agent dies mid-transfer.
        assert!(
            env.children[c].try_wait().unwrap().is_none(),
            "transfer must still be running"
        );
        env.kill(ex);
        assert!((got_before_kill as usize) < FILE_BYTES);
        env.wait_ok(c, Duration::from_secs(120));
        let secs = t0.elapsed().as_secs_f64();
        assert_eq!(
            sha256_file(&out),
            want,
            "payload corrupted across agent death"
        );
        println!(
            "(b,c) cwnd 2 x mss + 4 MB/s pacing: {} bytes in {:.2} s before kill ({:.1} MB/s); \
             whole transfer {:.2} s after fallback took over",
            got_before_kill,
            t_kill,
            got_before_kill as f64 / t_kill / 1e6,
            secs
        );
        env.kill(srv);
    }

    // Registration gone once nothing references it.
    env.ns(
        &env.srv_ns.clone(),
        &["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"],
    );
    assert!(
        !cc_available(&cc),
        "example's registration must be gone after SIGKILL"
    );
    drop(env);
}
