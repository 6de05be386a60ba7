//! End-to-end test of the kernel datapath with real TCP transfers between two
//! network namespaces joined by a veth pair (198.18.0.0/15 test addresses).
//!
//! Needs root (CI runs as root): it FAILS when not root, on purpose.
//! Everything it creates (namespaces, processes, congestion-control
//! registrations, temp files) is removed by a Drop guard, also when an
//! assertion panics.
//!
//! Phases (one test, sharing one pair of namespaces):
//!  a. in-process datapath, no agent: 20 MB over HTTP completes under the
//!     fallback, SHA-256 intact; CREATE/ACK/CLOSE events seen.
//!  b. examples/fixed_window pins the flow to cwnd = 2 × mss with a pacing
//!     rate: `ss -ti` in the sender namespace shows cwnd:2.
//!  c. the example is killed (SIGKILL) mid-transfer: the flow carries on under
//!     the fallback and completes intact.
//! Timings are printed, never asserted (shared, noisy machines).

mod common;

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ccswitch_kernel::{Fallback, KernelDatapath, KernelEvent, LoadOptions};
use common::{cc_available, make_blob, sha256_file, Env, CLI_ADDR, FILE_BYTES, PORT, SRV_ADDR};

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
            ..Default::default()
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
        while !events.iter().any(|e| matches!(e, KernelEvent::Closed { .. }))
            && t1.elapsed() < Duration::from_secs(5)
        {
            dp.poll(Duration::from_millis(50), |e| events.push(e))
                .unwrap();
        }
        let created: Vec<_> = events
            .iter()
            .filter_map(|e| {
                if let KernelEvent::Created(f) = e {
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
            .filter_map(|e| if let KernelEvent::Ack(a) = e { Some(a) } else { None })
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
            events.iter().any(|e| matches!(e, KernelEvent::Closed { flow_id, .. } if *flow_id == flow.flow_id)),
            "CLOSE seen"
        );
        assert_eq!(stats.acks_directive, 0);
        assert!(stats.acks_fallback > 0 && stats.flows_created >= 1);
        assert_eq!(
            (stats.acks_fallback_agent_late, stats.acks_fallback_awaiting),
            (stats.acks_fallback, 0),
            "no agent: every fallback ACK is past the agent's (never set) deadline"
        );
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
