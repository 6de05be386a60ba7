//! `ccswitch-agent`: runs congestion-control algorithms for the flows of any number of CCP
//! datapaths connected to its unix socket.
//!
//! On SIGTERM or SIGINT it removes the socket files it created (--socket, --operator-socket)
//! and exits with status 0; datapaths see the connection close and fall back on their own.

mod bench;
mod operator;
mod events;
mod flow;
mod memory;
mod program;
mod python;
mod registry;
mod selector;
mod server;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use clap::Parser;
use tracing::info;
use tracing_subscriber::EnvFilter;

use crate::server::OwnedSockets;

#[derive(Parser, Debug)]
#[command(name = "ccswitch-agent", version, about)]
#[command(group(clap::ArgGroup::new("listing").args(["list_algorithms", "list_policies"])))]
struct AgentCli {
    /// Unix socket the datapaths connect to.
    #[arg(long, default_value = "/run/ccswitch/agent.sock")]
    socket: PathBuf,
    /// Permissions of the socket (octal). The default lets only root connect.
    #[arg(long, default_value = "600", value_parser = parse_mode)]
    socket_mode: u32,
    /// Algorithm for flows whose datapath does not ask for a known one: `NAME`,
    /// `NAME:PARAM=VALUE,...` (e.g. `cubic:beta=0.8`) or `py:MODULE:CLASS` (a Python class
    /// importable from PYTHONPATH).
    #[arg(long, default_value = "reno")]
    algorithm: String,
    /// Choose each flow's algorithm by a policy: a built-in name (`mystique`, `mcc-wifi`),
    /// `NAME:PARAM=VALUE,...` to override its thresholds, or a policy TOML file. Flows start on
    /// the policy's initial algorithm (else --algorithm) and hand flows over as it decides.
    #[arg(long, value_name = "SPEC")]
    policy: Option<String>,
    /// Turn the per-destination memory off whatever the policy's [memory] says: every policy
    /// flow starts on the policy's initial algorithm and closing flows teach it nothing.
    #[arg(long)]
    no_destination_memory: bool,
    /// Append every flow's creation, reports, algorithm handovers and close to FILE, one JSON
    /// object per line.
    #[arg(long, value_name = "FILE")]
    events: Option<PathBuf>,
    /// Serve the operator interface (Cap'n Proto; `ccswitch operator`) on this unix socket: list
    /// flows, pin flows, ports or prefixes to an algorithm, load a policy. Same mode as --socket.
    #[arg(long, value_name = "PATH")]
    operator_socket: Option<PathBuf>,
    /// The old name of --operator-socket, refused with the new one.
    #[arg(long = "control-socket", value_name = "PATH", hide = true)]
    control_socket_renamed: Option<PathBuf>,
    /// Log level (error, warn, info, debug, trace) or a tracing filter.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// List the algorithms with their parameters and exit.
    #[arg(long)]
    list_algorithms: bool,
    /// List the built-in policies (--policy NAME) with their windows, decisions and rules, and exit.
    #[arg(long)]
    list_policies: bool,
    /// With --list-algorithms or --list-policies: print JSON.
    #[arg(long, requires = "listing")]
    json: bool,
    /// Benchmark: time N synthetic reports to --algorithm through the agent's report path,
    /// print JSON and exit (used by `ccswitch bench authoring`).
    #[arg(long, hide = true, value_name = "N")]
    bench_reports: Option<usize>,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8).map_err(|e| format!("not an octal mode: {e}"))
}

fn init_logging(args: &AgentCli) -> Result<()> {
    let filter = EnvFilter::try_new(&args.log_level)?;
    // Colours only for a person at a terminal: a redirected log gets no escape sequences.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    if args.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
    Ok(())
}

fn list_algorithms(json: bool) {
    use ccswitch_algorithms::{Make, ALGORITHMS};
    if json {
        let entries: Vec<String> = ALGORITHMS
            .iter()
            .map(|a| {
                let params: Vec<String> = a
                    .params
                    .iter()
                    .map(|p| {
                        format!(
                            "{{\"name\":{},\"default\":{},\"unit\":{},\"help\":{}}}",
                            json_str(p.name), p.default, json_str(p.unit), json_str(p.help)
                        )
                    })
                    .collect();
                let api = match a.make {
                    Make::Simple(_) => "simple",
                    Make::Full(_) => "full",
                };
                format!(
                    "{{\"name\":{},\"summary\":{},\"source\":{},\"api\":\"{api}\",\"params\":[{}]}}",
                    json_str(a.name), json_str(a.summary), json_str(a.source), params.join(",")
                )
            })
            .collect();
        println!("[{}]", entries.join(","));
        return;
    }
    for a in ALGORITHMS {
        println!("{:<14} {}", a.name, a.summary);
        for p in a.params {
            println!("{:<14}   {}={} ({}) {}", "", p.name, p.default, p.unit, p.help);
        }
    }
}

fn list_policies(json: bool) -> Result<()> {
    use selector::policy::Policy;
    let policies = Policy::BUILTIN_NAMES
        .iter()
        .map(|name| Policy::load(name).with_context(|| format!("built-in policy {name}")))
        .collect::<Result<Vec<_>>>()?;
    if json {
        let entries: Vec<_> = policies.iter().map(Policy::to_json).collect();
        println!("{}", serde_json::Value::Array(entries));
    } else {
        for p in &policies {
            print!("{p}");
        }
    }
    Ok(())
}

/// Remove the socket files and exit 0 on the first SIGTERM or SIGINT. Registered before any
/// socket is bound, so no signal finds a socket file it would leave behind.
fn stop_on_signals(owned: Arc<OwnedSockets>) -> Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT]).context("installing signal handlers")?;
    std::thread::Builder::new().name("signals".into()).spawn(move || {
        if let Some(signal) = signals.forever().next() {
            let name = if signal == SIGTERM { "SIGTERM" } else { "SIGINT" };
            let removed: Vec<String> = owned.remove_all().iter().map(|p| p.display().to_string()).collect();
            info!(signal = name, removed = ?removed, "agent stopping");
            events::flush_all();
            std::process::exit(0);
        }
    })?;
    Ok(())
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() -> Result<()> {
    let args = AgentCli::parse();
    if args.control_socket_renamed.is_some() {
        eprintln!("error: --control-socket was renamed: use --operator-socket (the operator interface)");
        std::process::exit(2);
    }
    if args.list_algorithms {
        list_algorithms(args.json);
        return Ok(());
    }
    if args.list_policies {
        return list_policies(args.json);
    }
    init_logging(&args)?;
    let owned = Arc::new(OwnedSockets::default());
    stop_on_signals(Arc::clone(&owned))?;
    // Fail now, with a clear message, rather than at the first flow.
    flow::instantiate(&args.algorithm)
        .map_err(|e| anyhow!("--algorithm {}: {e:#}", args.algorithm))?;
    let policy = args
        .policy
        .as_deref()
        .map(|spec| selector::policy::Policy::load(spec).map_err(|e| anyhow!("--policy {spec}: {e:#}")))
        .transpose()?
        .map(Arc::new);
    if let Some(n) = args.bench_reports {
        return bench::run(&args.algorithm, n, policy);
    }
    let events = args.events.as_deref().map(events::EventLog::create).transpose()?;
    let registry = Arc::new(registry::Registry::new(policy));
    if args.no_destination_memory {
        registry.memory().switch_off();
    }
    let result = (|| {
        if let Some(path) = &args.operator_socket {
            operator::serve(Arc::clone(&registry), path, args.socket_mode, &owned)?;
        }
        let agent = server::Agent::new(args.algorithm.clone(), registry, events)?;
        agent.serve(&args.socket, args.socket_mode, &owned)
    })();
    // Failing to start (e.g. the datapath socket is taken) leaves no operator socket behind.
    owned.remove_all();
    result
}
