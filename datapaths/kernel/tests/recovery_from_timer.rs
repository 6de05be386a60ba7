//! A loss that RACK finds from its reordering timer reaches the agent. RACK marks a segment
//! lost on an ACK only once a later segment's delivery is older than the reordering window;
//! when the ACK that shows the later segment comes sooner, it arms a timer, and the timer
//! marks the loss and enters Recovery (`tcp_rack_reo_timeout`), outside any ACK. The ACKs
//! after it mark nothing new (`rate_sample.losses` is 0 on each), so the fold must count the
//! entry into Recovery as a loss itself, as the kernel's own Cubic reduces on entering it.
//!
//! Here the real agent (Cubic) and shim run a flow whose server sends 2 MB, pauses, then a
//! 28-segment burst whose second-to-last segment the client's namespace drops once, then
//! pauses again: the last segment's SACK arrives alone, the timer marks the loss, and the
//! retransmission's ACK is the only one that follows.
//!
//! Needs root (CI runs as root): it FAILS when not root, on purpose. Processes are stopped by
//! PID, and the namespaces (with their iptables rule) removed by the Env guard.

mod common;

use std::fs;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{AgentAndShim, Env, PORT, SRV_ADDR};

const SHIM: &str = env!("CARGO_BIN_EXE_ccswitch-kernel");
/// The dropped segment carries this; the retransmission, which carries it too, passes.
const MARKER: &str = "CCSWTAILLOSS";

/// A counter of the sender namespace's /proc/net/netstat (`TcpExt` line).
fn tcp_ext(env: &Env, name: &str) -> u64 {
    let text = env.ns(&env.srv_ns, &["cat", "/proc/net/netstat"]);
    let mut lines = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let i = names.split_whitespace().position(|n| n == name).unwrap_or_else(|| panic!("no TcpExt {name}"));
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}

/// 2 MB, 0.3 s of nothing, a 40,000-byte burst with the marker in its 27th of 28 segments,
/// 0.5 s of nothing (the reordering timer's turn), then 100 kB and the end.
const SERVER: &str = r#"
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(1)
c, _ = s.accept()
c.sendall(b"x" * 2000000)
time.sleep(0.3)
burst = bytearray(b"y" * 40000)
burst[37800:37800 + len(sys.argv[3])] = sys.argv[3].encode()
c.sendall(bytes(burst))
time.sleep(0.5)
c.sendall(b"z" * 100000)
c.close()
"#;

const CLIENT: &str = r#"
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
n = 0
while True:
    b = c.recv(1 << 16)
    if not b:
        break
    n += len(b)
print(n)
"#;

#[test]
fn a_loss_the_reordering_timer_finds_reaches_the_agent() {
    assert_eq!(unsafe { libc::geteuid() }, 0, "this test needs root (CI runs as root)");
    let mut env = Env::new();
    let cc = format!("ccsw_r{}", std::process::id() % 1_000_000);
    let AgentAndShim { shim, events, .. } = env.start_agent_and_shim(SHIM, &cc, "cubic", Stdio::null());
    let dev = env.sender_veth();
    // TCP hands the device GSO packets of many segments; a token bucket smaller than two
    // segments splits them, so that the client's rule drops one segment, not a burst. Its
    // queue holds the whole transfer: no other loss.
    env.ns(&env.srv_ns, &["tc", "qdisc", "add", "dev", &dev, "root", "tbf", "rate", "20mbit", "burst", "2900", "latency", "2s"]);
    let port = PORT.to_string();
    env.ns(
        &env.cli_ns,
        &["iptables", "-A", "INPUT", "-p", "tcp", "--sport", &port, "-m", "string", "--string", MARKER, "--algo", "bm",
          "-m", "statistic", "--mode", "nth", "--every", "1000000", "--packet", "0", "-j", "DROP"],
    );
    let server = env.spawn(
        Command::new("ip")
            .args(["netns", "exec", &env.srv_ns, "python3", "-c", SERVER, SRV_ADDR, &port, MARKER])
            .stdout(Stdio::null()),
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while env.ns(&env.srv_ns, &["ss", "-Htln", &format!("sport = :{PORT}")]).trim().is_empty() {
        assert!(Instant::now() < deadline, "the server did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let got = env.dir.join("got");
    let client = env.spawn(
        Command::new("ip")
            .args(["netns", "exec", &env.cli_ns, "python3", "-c", CLIENT, SRV_ADDR, &port])
            .stdout(fs::File::create(&got).unwrap()),
    );
    env.wait_ok(client, Duration::from_secs(30));
    env.wait_ok(server, Duration::from_secs(5));
    assert_eq!(fs::read_to_string(&got).unwrap().trim(), "2140000", "the client got every byte");

    let recoveries = tcp_ext(&env, "TCPSackRecovery");
    let timeouts = tcp_ext(&env, "TCPTimeouts");
    let dropped = env.ns(&env.cli_ns, &["iptables", "-L", "INPUT", "-v", "-x", "-n"]);
    assert_eq!(recoveries, 1, "the one drop made one recovery (iptables:\n{dropped})");
    assert_eq!(timeouts, 0, "the drop was recovered without a retransmission timeout");

    // SIGTERM: the shim stops, having forwarded what the kernel reported.
    env.stop_with_sigterm(shim);
    let reports = common::agent_reports(&events);
    assert!(reports.len() > 10, "the agent ran the flow: {} reports", reports.len());
    let lost: u64 = reports.iter().map(|r| r["lost_packets"].as_u64().unwrap()).sum();
    assert!(lost >= 1, "the recovery the kernel entered reached the agent as a loss ({} reports, none with a loss)", reports.len());
}
