//! The per-destination memory as a datapath sees it: a real `ccswitch-agent` under a policy,
//! driven by a fake CCP datapath over its socket. Flows to one /24 that the policy decided
//! for end on its choice; the next flow there starts on that choice, while a flow to another
//! prefix, and flows after others that ended before any decision, start on `initial`. With
//! `--no-destination-memory` nothing is remembered. Where each flow started is read from the
//! `flow` events of `--events`, written before the agent answers the CREATE.

mod common;

use std::net::Ipv4Addr;

use ccswitch_protocol::standard::report;
use ccswitch_protocol::wire::{Create, Measure, Msg, Ready};
use common::{report_fields, AgentProcess, Datapath};
use serde_json::Value;

const MSS: u32 = 1448;
const SERVER: Ipv4Addr = Ipv4Addr::new(192, 168, 7, 2);
const RTT_US: u64 = 50_000;

/// Decides at the second RTT sample: an RTT above a second would mean vegas, anything else is
/// bbr (the default); flows start on cubic.
const POLICY: &str = r#"
name = "memory-test"
initial = "cubic"
default = "bbr"
[window]
kind = "first"
samples = 2
[[rule]]
when = "min_rtt_ms > 1000"
use = "vegas"
"#;

/// An agent running the policy `policy` (TOML text), with `extra` arguments and `--events`.
fn start_agent(test: &str, policy: &str, extra: &[&str]) -> AgentProcess {
    let dir = common::test_dir(test);
    let (events, policy_file) = (dir.join("events.jsonl"), dir.join("policy.toml"));
    std::fs::write(&policy_file, policy).unwrap();
    let mut args = vec!["--policy", policy_file.to_str().unwrap(), "--events", events.to_str().unwrap()];
    args.extend(["--log-level", "info"]);
    args.extend_from_slice(extra);
    AgentProcess::start_in(dir, &args)
}

impl AgentProcess {
    /// A datapath that said READY and was installed the standard program.
    fn connect_ready(&self) -> ReadyDatapath {
        let mut dp = self.connect();
        dp.send(&Msg::Ready(Ready { id: 1 }));
        let Msg::InstallExpr(install) = dp.recv() else { panic!("no program installed") };
        ReadyDatapath { dp, uid: install.program_uid, now_us: 1_000_000 }
    }

    /// The `flow` event of the flow with socket id `sid` (the latest, if several).
    fn flow_event(&self, sid: u32) -> Value {
        let text = std::fs::read_to_string(self.dir.join("events.jsonl")).unwrap();
        text.lines()
            .rev()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["event"] == "flow" && e["sid"] == sid)
            .unwrap_or_else(|| panic!("no flow event for sid {sid} in:\n{text}"))
    }
}

/// A datapath with the standard program's uid, sending whole flows to the agent.
struct ReadyDatapath {
    dp: Datapath,
    uid: u32,
    now_us: u64,
}

impl ReadyDatapath {
    /// A flow from the server to `client`; waits for the agent's CHANGE_PROG.
    fn create(&mut self, sid: u32, client: Ipv4Addr) {
        self.dp.send(&Msg::Create(Create {
            sid,
            init_cwnd: 10 * MSS,
            mss: MSS,
            src_ip: SERVER.into(),
            src_port: 8080,
            dst_ip: client.into(),
            dst_port: 40_000 + sid,
            cong_alg: String::new(),
        }));
        loop {
            match self.dp.recv() {
                Msg::ChangeProg(c) if c.sid == sid => return,
                Msg::InstallExpr(_) => continue,
                other => panic!("expected CHANGE_PROG for {sid}, got {other:?}"),
            }
        }
    }

    /// One report of the standard program; waits for the answer.
    fn report(&mut self, sid: u32) {
        self.now_us += RTT_US;
        let acked = 10 * u64::from(MSS);
        let fields = report_fields(&[
            (report::ACKED, acked),
            (report::RTT, RTT_US),
            (report::MINRTT, RTT_US),
            (report::INFLIGHT, acked),
            (report::RATE, 2_000_000),
            (report::NOW, self.now_us),
        ]);
        self.dp.send(&Msg::Measure(Measure { sid, program_uid: self.uid, fields }));
        match self.dp.recv() {
            Msg::UpdateFields(u) if u.sid == sid => {}
            other => panic!("expected UPDATE_FIELDS for {sid}, got {other:?}"),
        }
    }

    /// Close the flow (a report without fields; the agent does not answer).
    fn close(&mut self, sid: u32) {
        self.dp.send(&Msg::Measure(Measure { sid, program_uid: 0, fields: Vec::new() }));
    }

    /// A whole flow to `client`: `reports` reports, then its close.
    fn flow(&mut self, sid: u32, client: Ipv4Addr, reports: usize) {
        self.create(sid, client);
        for _ in 0..reports {
            self.report(sid);
        }
        self.close(sid);
    }
}

/// The `flow` event of a flow to 10.1.2.0/24 after two that the policy decided for.
fn flow_after_two_decided_flows_to_its_prefix(agent: &AgentProcess) -> Value {
    let mut dp = agent.connect_ready();
    dp.flow(1, Ipv4Addr::new(10, 1, 2, 3), 3);
    dp.flow(2, Ipv4Addr::new(10, 1, 2, 4), 3);
    dp.create(3, Ipv4Addr::new(10, 1, 2, 200));
    agent.flow_event(3)
}

fn start_of(event: &Value) -> (&str, &str) {
    (event["start"].as_str().unwrap(), event["algorithm"].as_str().unwrap())
}

#[test]
fn the_next_flow_to_a_destination_starts_on_what_the_last_ones_ended_on() {
    let agent = start_agent("remembers", POLICY, &[]);
    let mut dp = agent.connect_ready();
    // Two flows to 10.1.2.0/24 that the policy decided for: cubic, then bbr.
    dp.flow(1, Ipv4Addr::new(10, 1, 2, 3), 3);
    assert_eq!(start_of(&agent.flow_event(1)), ("initial", "cubic"));
    assert_eq!(agent.flow_event(1)["start_reason"], "nothing remembered for 10.1.2.0/24");
    dp.flow(2, Ipv4Addr::new(10, 1, 2, 4), 3);
    // Two more to 10.5.5.0/24 that end before any decision: no votes.
    dp.flow(3, Ipv4Addr::new(10, 5, 5, 1), 1);
    dp.flow(4, Ipv4Addr::new(10, 5, 5, 2), 0);

    // The next flow to 10.1.2.0/24 starts on bbr, from the memory.
    dp.create(5, Ipv4Addr::new(10, 1, 2, 200));
    let e = agent.flow_event(5);
    assert_eq!(start_of(&e), ("memory", "bbr"), "{e}");
    assert_eq!(e["memory"]["prefix"], "10.1.2.0/24");
    assert_eq!(e["memory"]["algorithm"], "bbr");
    let score = e["memory"]["score"].as_f64().unwrap();
    assert!(score > 1.99 && score <= 2.0, "two votes, barely decayed: {score}");
    assert!(e["start_reason"].as_str().unwrap().starts_with("10.1.2.0/24 remembers bbr with score"), "{e}");
    // The selector still decides for it; being on bbr already, it stays there and votes again.
    dp.report(5);
    dp.report(5);
    dp.close(5);

    // Another prefix, and the one whose flows never reached a decision, start on initial.
    dp.create(6, Ipv4Addr::new(10, 1, 3, 1));
    assert_eq!(start_of(&agent.flow_event(6)), ("initial", "cubic"));
    assert_eq!(agent.flow_event(6)["start_reason"], "nothing remembered for 10.1.3.0/24");
    dp.create(7, Ipv4Addr::new(10, 5, 5, 3));
    assert_eq!(start_of(&agent.flow_event(7)), ("initial", "cubic"));
    assert_eq!(agent.flow_event(7)["memory"]["algorithm"], Value::Null);
    // Flow 5 voted too: three votes now.
    dp.create(8, Ipv4Addr::new(10, 1, 2, 9));
    let e = agent.flow_event(8);
    assert_eq!(start_of(&e), ("memory", "bbr"));
    assert!(e["memory"]["score"].as_f64().unwrap() > 2.99, "{e}");

    let log = agent.log_text();
    assert!(log.contains("remembered=\"10.1.2.0/24 bbr\""), "the close says what it taught:\n{log}");
    assert!(log.contains("start=\"memory\" start_reason=10.1.2.0/24 remembers bbr with score"), "{log}");
    assert!(log.contains("start=\"initial\" start_reason=nothing remembered for 10.1.3.0/24"), "{log}");
}

#[test]
fn with_no_destination_memory_every_policy_flow_starts_on_initial() {
    let agent = start_agent("off", POLICY, &["--no-destination-memory"]);
    let e = flow_after_two_decided_flows_to_its_prefix(&agent);
    assert_eq!(start_of(&e), ("initial", "cubic"), "{e}");
    assert_eq!(e["start_reason"], "destination memory switched off by the agent's --no-destination-memory");
    assert_eq!(e["memory"], Value::Null);
    let log = agent.log_text();
    assert!(!log.contains("remembered="), "{log}");
    assert!(log.contains("memory=off: switched off by the agent's --no-destination-memory"), "{log}");
}

#[test]
fn a_policy_with_memory_disabled_remembers_nothing() {
    let agent = start_agent("disabled", &format!("{POLICY}\n[memory]\nenabled = false\n"), &[]);
    let e = flow_after_two_decided_flows_to_its_prefix(&agent);
    assert_eq!(start_of(&e), ("initial", "cubic"), "{e}");
    assert_eq!(e["start_reason"], "destination memory switched off by the policy ([memory] enabled = false)");
}

#[test]
fn a_threshold_of_one_half_trusts_a_single_flow_and_prefix_lengths_are_the_policys() {
    let policy = format!("{POLICY}\n[memory]\nmin_score = 0.5\nprefix_v4 = 16\n");
    let agent = start_agent("one-vote", &policy, &[]);
    let mut dp = agent.connect_ready();
    dp.flow(1, Ipv4Addr::new(10, 1, 2, 3), 3);
    dp.create(2, Ipv4Addr::new(10, 1, 99, 1));
    let e = agent.flow_event(2);
    assert_eq!(start_of(&e), ("memory", "bbr"), "{e}");
    assert_eq!(e["memory"]["prefix"], "10.1.0.0/16");
    dp.create(3, Ipv4Addr::new(10, 2, 0, 1));
    assert_eq!(start_of(&agent.flow_event(3)), ("initial", "cubic"));
}
