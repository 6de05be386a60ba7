//! The agent's command line, shared by `ccswitch-agent` and by a datapath shim that hosts the
//! agent in its own process (`ccswitch-kernel --agent-in-process -- AGENT OPTIONS`, see
//! [`crate::in_process`]): one parser, so the options mean the same in both.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use clap::Parser;

use crate::events::EventLog;
use crate::registry::Registry;
use crate::selector::policy::Policy;
use crate::server::{Agent, OwnedSockets};
use crate::{flow, operator};

#[derive(Parser, Debug)]
#[command(name = "ccswitch-agent", version, about)]
#[command(group(clap::ArgGroup::new("listing").args(["list_algorithms", "list_policies"])))]
pub struct AgentCli {
    /// Unix socket the datapaths connect to. An agent in a shim's process serves it only when
    /// given, for datapaths other than its host.
    #[arg(long, default_value = "/run/ccswitch/agent.sock")]
    pub socket: PathBuf,
    /// Permissions of the socket (octal). The default lets only root connect.
    #[arg(long, default_value = "600", value_parser = parse_mode)]
    pub socket_mode: u32,
    /// Algorithm for flows whose datapath does not ask for a known one: `NAME`,
    /// `NAME:PARAM=VALUE,...` (e.g. `cubic:beta=0.8`) or `py:MODULE:CLASS` (a Python class
    /// importable from PYTHONPATH).
    #[arg(long, default_value = "reno")]
    pub algorithm: String,
    /// Choose each flow's algorithm by a policy: a built-in name (`mystique`, `mcc-wifi`),
    /// `NAME:PARAM=VALUE,...` to override its thresholds, or a policy TOML file. Flows start on
    /// the policy's initial algorithm (else --algorithm) and hand flows over as it decides.
    #[arg(long, value_name = "SPEC")]
    pub policy: Option<String>,
    /// Turn the per-destination memory off whatever the policy's [memory] says: every policy
    /// flow starts on the policy's initial algorithm and closing flows teach it nothing.
    #[arg(long)]
    pub no_destination_memory: bool,
    /// Append every flow's creation, reports, algorithm handovers and close to FILE, one JSON
    /// object per line.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Serve the operator interface (Cap'n Proto; `ccswitch operator`) on this unix socket: list
    /// flows, pin flows, ports or prefixes to an algorithm, load a policy. Same mode as --socket.
    #[arg(long, value_name = "PATH")]
    pub operator_socket: Option<PathBuf>,
    /// The old name of --operator-socket, refused with the new one.
    #[arg(long = "control-socket", value_name = "PATH", hide = true)]
    pub control_socket_renamed: Option<PathBuf>,
    /// Log level (error, warn, info, debug, trace) or a tracing filter.
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// List the algorithms with their parameters and exit.
    #[arg(long)]
    pub list_algorithms: bool,
    /// List the built-in policies (--policy NAME) with their windows, decisions and rules, and exit.
    #[arg(long)]
    pub list_policies: bool,
    /// With --list-algorithms or --list-policies: print JSON.
    #[arg(long, requires = "listing")]
    pub json: bool,
    /// Time budget of one Python callback, ms: a callback still running past it is abandoned
    /// for that report (the flow keeps its window), interrupted and counted
    /// (`python_timeouts` in the events file), and its flow's reports skip Python for a while.
    #[arg(long, default_value_t = crate::python_guard::DEFAULT_BUDGET.as_secs_f64() * 1e3, value_parser = parse_budget_ms)]
    pub python_budget_ms: f64,
    /// Call Python algorithms on the datapath's thread, unguarded (no budget), as before the
    /// guard existed: only for measuring what the guard costs.
    #[arg(long, hide = true)]
    pub python_unguarded: bool,
    /// Benchmark: time N synthetic reports to --algorithm through the agent's report path,
    /// print JSON and exit (used by `ccswitch bench authoring`).
    #[arg(long, hide = true, value_name = "N")]
    pub bench_reports: Option<usize>,
    /// With --bench-reports: sleep this long between reports (not timed), as a flow that
    /// reports once per RTT does, so that threads the agent hands work to have gone to sleep.
    #[arg(long, hide = true, value_name = "US", default_value_t = 0, requires = "bench_reports")]
    pub bench_report_gap_us: u64,
}

fn parse_budget_ms(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(ms) if ms.is_finite() && ms > 0.0 && ms <= 60_000.0 => Ok(ms),
        _ => Err("a number of milliseconds above 0 and at most 60000".into()),
    }
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8).map_err(|e| format!("not an octal mode: {e}"))
}


impl AgentCli {
    /// Sets the Python guard's budget, checks --algorithm (now, with a clear message, rather
    /// than at the first flow) and loads --policy.
    pub fn algorithm_and_policy(&self) -> Result<Option<Arc<Policy>>> {
        crate::python_guard::set_budget(std::time::Duration::from_secs_f64(self.python_budget_ms / 1e3));
        crate::python_guard::set_unguarded(self.python_unguarded);
        flow::instantiate(&self.algorithm).map_err(|e| anyhow!("--algorithm {}: {e:#}", self.algorithm))?;
        Ok(self
            .policy
            .as_deref()
            .map(|spec| Policy::load(spec).map_err(|e| anyhow!("--policy {spec}: {e:#}")))
            .transpose()?
            .map(Arc::new))
    }

    /// The agent these options describe, with its flow registry, events file and operator
    /// interface (served from now on, its socket listed in `owned`); datapaths are served by
    /// the caller: on --socket, or in its own process.
    pub fn agent(&self, policy: Option<Arc<Policy>>, owned: &OwnedSockets) -> Result<Arc<Agent>> {
        let events = self.events.as_deref().map(EventLog::create).transpose()?;
        let registry = Arc::new(Registry::new(policy));
        if self.no_destination_memory {
            registry.memory().switch_off();
        }
        if let Some(path) = &self.operator_socket {
            operator::serve(Arc::clone(&registry), path, self.socket_mode, owned)?;
        }
        Agent::new(self.algorithm.clone(), registry, events)
    }
}
