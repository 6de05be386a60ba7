//! The agent as an operator runs it: a real `ccswitch-agent` process with its log redirected
//! to a file, stopped with signals, pointed at by the wrong client. Each test works in a
//! directory of its own under the system's temporary directory and removes it; agents are
//! stopped by their PID.

mod common;

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use ccswitch_protocol::standard::report;
use ccswitch_protocol::wire::{Create, Measure, Msg, MsgType, Ready};
use common::{report_fields, AgentProcess};

const EXIT_TIMEOUT: Duration = Duration::from_secs(10);
const ESC: u8 = 0x1b;

/// An agent with a datapath and a operator socket, its log a file (not a terminal).
fn start_agent(test: &str, extra: &[&str]) -> AgentProcess {
    let dir = common::test_dir(test);
    let operator = dir.join("operator.sock");
    let mut args = vec!["--operator-socket", operator.to_str().unwrap(), "--log-level", "debug"];
    args.extend_from_slice(extra);
    AgentProcess::start_in(dir, &args)
}

impl AgentProcess {
    fn operator_socket(&self) -> PathBuf {
        self.dir.join("operator.sock")
    }

    /// Send `signal` (e.g. "TERM") to the agent's PID and wait for it to exit.
    fn signal_and_wait(&mut self, signal: &str) -> ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-s", signal, &pid]).status().unwrap();
        assert!(sent.success(), "kill -s {signal} {pid} failed");
        self.wait()
    }

    fn wait(&mut self) -> ExitStatus {
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "the agent did not exit; log:\n{}", self.log_text());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn assert_stopped_cleanly(agent: &mut AgentProcess, signal: &str) {
    let status = agent.signal_and_wait(signal);
    assert_eq!(status.code(), Some(0), "SIG{signal}: {status} (signal {:?}); log:\n{}", status.signal(), agent.log_text());
    assert!(!agent.socket.exists(), "SIG{signal} left {}", agent.socket.display());
    assert!(!agent.operator_socket().exists(), "SIG{signal} left {}", agent.operator_socket().display());
    let log = agent.log_text();
    assert!(log.contains(&format!("agent stopping signal=\"SIG{signal}\"")), "{log}");
}

#[test]
fn sigterm_removes_both_sockets_and_exits_zero() {
    let mut agent = start_agent("term", &[]);
    assert!(agent.operator_socket().exists());
    assert_stopped_cleanly(&mut agent, "TERM");
}

#[test]
fn sigint_removes_both_sockets_and_exits_zero_even_with_a_datapath_connected() {
    let mut agent = start_agent("int", &[]);
    let mut dp = agent.connect();
    dp.send(&Msg::Ready(Ready { id: 1 }));
    agent.wait_for_log("datapath connected");
    assert_stopped_cleanly(&mut agent, "INT");
    // The datapath sees the connection end.
    let mut rest = Vec::new();
    dp.s.read_to_end(&mut rest).unwrap();
}

#[test]
fn a_redirected_log_has_no_colour_escape_sequences() {
    let mut agent = start_agent("ansi", &[]);
    // Log lines at several levels: a datapath connects (info), sends a bad message (error).
    let mut dp = agent.connect();
    dp.send(&Msg::Ready(Ready { id: 1 }));
    let mut bad = Msg::Ready(Ready { id: 2 }).encode().unwrap();
    bad[0] = 0x7f; // an unknown message type, framed correctly
    dp.s.write_all(&bad).unwrap();
    agent.wait_for_log("rejected malformed message");
    drop(dp);
    agent.signal_and_wait("TERM");
    let log = agent.log_bytes();
    assert!(log.len() > 200, "too little logged to tell: {}", agent.log_text());
    assert!(!log.contains(&ESC), "escape sequences in a log that is a file:\n{:?}", agent.log_text());
}

#[test]
fn a_policy_agent_logs_the_algorithm_flows_start_on() {
    let mut agent = start_agent("policy", &["--algorithm", "reno", "--policy", "mystique"]);
    let log = agent.log_text();
    let line = log.lines().find(|l| l.contains("agent listening")).unwrap();
    // mystique's initial algorithm is cubic; --algorithm reno is not what flows start on.
    assert!(line.contains("algorithm=cubic") && line.contains("policy=mystique"), "{line}");
    assert!(!line.contains("reno"), "{line}");
    assert_stopped_cleanly(&mut agent, "TERM");
}

#[test]
fn an_agent_without_a_policy_logs_its_algorithm() {
    let mut agent = start_agent("nopolicy", &["--algorithm", "vegas"]);
    let log = agent.log_text();
    let line = log.lines().find(|l| l.contains("agent listening")).unwrap();
    assert!(line.contains("algorithm=vegas") && !line.contains("policy="), "{line}");
    assert_stopped_cleanly(&mut agent, "TERM");
}

/// A Cap'n Proto `Request` with `listFlows` set, as `ccswitch operator list` sends it: a
/// one-segment table, then a root struct of one data word (the union tag, 0) and one pointer.
fn operator_list_flows_request() -> Vec<u8> {
    let mut bytes = Vec::new();
    for word in [0u32, 3, 0, 1 | 1 << 16] {
        bytes.extend_from_slice(&word.to_le_bytes());
    }
    bytes.extend_from_slice(&[0u8; 16]);
    bytes
}

#[test]
fn an_operator_request_on_the_datapath_socket_is_told_which_socket_to_use() {
    let mut agent = start_agent("wrong-socket", &[]);
    let mut client = UnixStream::connect(&agent.socket).unwrap();
    client.set_read_timeout(Some(common::ANSWER_TIMEOUT)).unwrap();
    client.write_all(&operator_list_flows_request()).unwrap();
    let mut answer = Vec::new();
    client.read_to_end(&mut answer).unwrap();
    // A framed Cap'n Proto message (one segment, whose size matches) carrying the hint.
    assert!(answer.len() > 8, "{answer:?}");
    assert_eq!(u32::from_le_bytes(answer[..4].try_into().unwrap()), 0, "one segment");
    let words = u32::from_le_bytes(answer[4..8].try_into().unwrap()) as usize;
    assert_eq!(answer.len(), 8 + 8 * words, "a whole message, then the end of the stream");
    let text = String::from_utf8_lossy(&answer);
    assert!(text.contains("datapath socket (--socket)"), "{text}");
    assert!(text.contains("use the path given to --operator-socket"), "{text}");

    // Real datapaths are still served.
    let mut dp = agent.connect();
    dp.send(&Msg::Ready(Ready { id: 1 }));
    assert_eq!(dp.recv().msg_type(), MsgType::InstallExpr);
    assert_stopped_cleanly(&mut agent, "TERM");
}

#[test]
fn an_agent_that_cannot_start_leaves_no_operator_socket() {
    let dir = common::test_dir("nostart");
    let (socket, operator) = (dir.join("not-a-socket"), dir.join("operator.sock"));
    std::fs::write(&socket, b"a regular file").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ccswitch-agent"))
        .args(["--socket", socket.to_str().unwrap(), "--operator-socket", operator.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let operator_left = operator.exists();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("exists and is not a socket"), "{stderr}");
    assert!(!operator_left, "the operator socket was left behind");
}

#[test]
fn sigterm_writes_out_the_buffered_events_of_open_flows() {
    let dir = common::test_dir("events");
    let (events, operator) = (dir.join("events.jsonl"), dir.join("operator.sock"));
    let args = ["--operator-socket", operator.to_str().unwrap(), "--log-level", "debug", "--events", events.to_str().unwrap()];
    let mut agent = AgentProcess::start_in(dir, &args);
    let mut dp = agent.connect();
    dp.send(&Msg::Ready(Ready { id: 1 }));
    let Msg::InstallExpr(install) = dp.recv() else { panic!("no program installed") };
    let create = Create { sid: 1, init_cwnd: 14_480, mss: 1448, src_ip: 1, src_port: 80, dst_ip: 2, dst_port: 40_000, cong_alg: String::new() };
    dp.send(&Msg::Create(create));
    assert_eq!(dp.recv().msg_type(), MsgType::ChangeProg);
    for _ in 0..3 {
        let fields = report_fields(&[
            (report::ACKED, 14_480),
            (report::RTT, 50_000),
            (report::MINRTT, 50_000),
            (report::INFLIGHT, 14_480),
            (report::RATE, 2_000_000),
            (report::NOW, 1_000_000),
        ]);
        dp.send(&Msg::Measure(Measure { sid: 1, program_uid: install.program_uid, fields }));
        assert_eq!(dp.recv().msg_type(), MsgType::UpdateFields);
    }
    // The flow stays open: its reports are still buffered unless a flush interval passed.
    assert_stopped_cleanly(&mut agent, "TERM");
    let text = std::fs::read_to_string(&events).unwrap();
    let kinds: Vec<String> = text
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["event"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["flow", "report", "report", "report"], "{text}");
}
