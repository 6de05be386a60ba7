//! A flow's state lives in its slot's entry of the BPF program's state array, or in socket
//! storage when another live flow holds that entry. With one slot, a first (rate-limited)
//! transfer holds the entry and a second one, concurrent, keeps its state in socket storage:
//! the second is directed and folded all the same (it holds the directive slot), both
//! transfers complete intact, and once both closed the freed entry serves a third, directed
//! flow. Needs root (CI runs as root); `Env` removes namespaces and processes on drop.

mod common;

use std::time::{Duration, Instant};

use ccswitch_kernel::{Fallback, FoldMode, KernelDatapath, KernelEvent, LoadOptions};
use common::{cc_available, make_blob, sha256_file, Env, PORT};

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Polls until a new flow of the server port is created; returns its id.
fn next_flow(dp: &mut KernelDatapath, events: &mut Vec<KernelEvent>) -> u32 {
    let seen = events.len();
    let t0 = Instant::now();
    loop {
        dp.poll(Duration::from_millis(20), |e| events.push(e)).unwrap();
        if let Some(id) = events[seen..].iter().find_map(|e| match e {
            KernelEvent::Created(f) if f.src.port() == PORT => Some(f.flow_id),
            _ => None,
        }) {
            return id;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "no CREATE for the transfer");
    }
}

fn direct(dp: &KernelDatapath, flow_id: u32) {
    dp.set_agent_valid_until(monotonic_ns() + 120_000_000_000).unwrap();
    dp.set_directive(flow_id, Some(40 * 1448), None).unwrap();
    dp.set_fold(flow_id, Some((FoldMode::PER_RTT, monotonic_ns() / 1000))).unwrap();
}

#[test]
fn a_flow_whose_state_entry_is_taken_keeps_its_state_in_socket_storage_and_is_directed() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    let mut env = Env::new();
    let want = make_blob(&env.dir);
    let cc = format!("ccsw_s{}", std::process::id() % 1_000_000);
    let mut dp = KernelDatapath::load(LoadOptions { fallback: Fallback::Reno, cc_name: cc.clone(), max_flows: 1, ..Default::default() })
        .expect("load datapath");
    assert!(cc_available(&cc));
    env.use_cc(&cc);
    let srv = env.start_server();
    let mut events = Vec::new();

    // A holds the one entry (on the fallback); B, concurrent, spills to socket storage.
    let (out_a, out_b) = (env.dir.join("got-a"), env.dir.join("got-b"));
    // A reads slowly through a small buffer, so that it still holds the entry when B starts.
    env.bound_client_receive_buffer();
    let a = env.curl_with(&out_a, &["--limit-rate", "4M"]);
    let flow_a = next_flow(&mut dp, &mut events);
    let b = env.curl(&out_b);
    let flow_b = next_flow(&mut dp, &mut events);
    assert_ne!(flow_a, flow_b);
    direct(&dp, flow_b);
    let t0 = Instant::now();
    while env.children[a].try_wait().unwrap().is_none() || env.children[b].try_wait().unwrap().is_none() {
        dp.poll(Duration::from_millis(20), |e| events.push(e)).unwrap();
        assert!(t0.elapsed() < Duration::from_secs(120), "transfers stuck");
    }
    env.wait_ok(a, Duration::from_secs(1));
    env.wait_ok(b, Duration::from_secs(1));
    assert_eq!(sha256_file(&out_a), want, "the flow holding the entry: payload corrupted");
    assert_eq!(sha256_file(&out_b), want, "the flow in socket storage: payload corrupted");
    let stats = dp.stats();
    let reports_b = events.iter().filter(|e| matches!(e, KernelEvent::Report(r) if r.flow_id == flow_b)).count();
    println!("A {flow_a}, B {flow_b}: B's reports {reports_b}, stats {stats:?}");
    assert!(stats.acks_directive > 0 && stats.acks_folded > 0, "B was directed and folded: {stats:?}");
    assert!(reports_b > 0, "B's fold reported");
    assert!(stats.acks_fallback > 0, "A stayed on the fallback: {stats:?}");

    // Both close (release gives the entry back and deletes B's storage).
    let t1 = Instant::now();
    let closed = |events: &[KernelEvent], id: u32| events.iter().any(|e| matches!(e, KernelEvent::Closed { flow_id, .. } if *flow_id == id));
    while !(closed(&events, flow_a) && closed(&events, flow_b)) {
        assert!(t1.elapsed() < Duration::from_secs(10), "no CLOSE for A and B");
        dp.poll(Duration::from_millis(50), |e| events.push(e)).unwrap();
    }

    // C takes the freed entry and is directed from it.
    dp.clear_directive(flow_b).unwrap();
    let before = dp.stats();
    let out_c = env.dir.join("got-c");
    let c = env.curl(&out_c);
    let flow_c = next_flow(&mut dp, &mut events);
    direct(&dp, flow_c);
    let t2 = Instant::now();
    while env.children[c].try_wait().unwrap().is_none() {
        dp.poll(Duration::from_millis(20), |e| events.push(e)).unwrap();
        assert!(t2.elapsed() < Duration::from_secs(120), "C stuck");
    }
    env.wait_ok(c, Duration::from_secs(1));
    assert_eq!(sha256_file(&out_c), want, "C: payload corrupted");
    let after = dp.stats();
    assert!(after.acks_directive > before.acks_directive && after.acks_folded > before.acks_folded, "C was directed and folded: {after:?}");
    assert!(events.iter().any(|e| matches!(e, KernelEvent::Report(r) if r.flow_id == flow_c)), "C's fold reported");
    env.kill(srv);
    env.ns(&env.srv_ns.clone(), &["sysctl", "-q", "-w", "net.ipv4.tcp_congestion_control=reno"]);
    drop(dp);
}
