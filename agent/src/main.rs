//! `ccswitch-agent`: runs congestion-control algorithms for the flows of any number of CCP
//! datapaths connected to its unix socket.
//!
//! On SIGTERM or SIGINT it removes the socket files it created (--socket, --operator-socket)
//! and exits with status 0; datapaths see the connection close and fall back on their own.

use std::io::IsTerminal;
use std::sync::Arc;

use anyhow::{Context, Result};
use ccswitch_agent::cli::AgentCli;
use ccswitch_agent::server::OwnedSockets;
use ccswitch_agent::{bench, events, selector};
use clap::Parser;
use tracing::info;
use tracing_subscriber::EnvFilter;

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
    let policy = args.algorithm_and_policy()?;
    if let Some(n) = args.bench_reports {
        return bench::run(&args.algorithm, n, policy, std::time::Duration::from_micros(args.bench_report_gap_us));
    }
    let result = (|| {
        let agent = args.agent(policy, &owned)?;
        agent.serve(&args.socket, args.socket_mode, &owned)
    })();
    // Failing to start (e.g. the datapath socket is taken) leaves no operator socket behind.
    owned.remove_all();
    result
}
