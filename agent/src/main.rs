//! `ccswitch-agent`: runs congestion-control algorithms for the flows of any number of CCP
//! datapaths connected to its unix socket.

mod flow;
mod program;
mod server;

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Parser;
use tracing_subscriber::EnvFilter;

#[derive(Parser, Debug)]
#[command(name = "ccswitch-agent", version, about)]
struct Args {
    /// Unix socket the datapaths connect to.
    #[arg(long, default_value = "/run/ccswitch/agent.sock")]
    socket: PathBuf,
    /// Permissions of the socket (octal). The default lets only root connect.
    #[arg(long, default_value = "600", value_parser = parse_mode)]
    socket_mode: u32,
    /// Algorithm for flows whose datapath does not ask for a known one.
    #[arg(long, default_value = "reno")]
    algorithm: String,
    /// Log level (error, warn, info, debug, trace) or a tracing filter.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// List the algorithms and exit.
    #[arg(long)]
    list_algorithms: bool,
}

fn parse_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s, 8).map_err(|e| format!("not an octal mode: {e}"))
}

fn init_logging(args: &Args) -> Result<()> {
    let filter = EnvFilter::try_new(&args.log_level)?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if args.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
    Ok(())
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.list_algorithms {
        for a in ccswitch_algorithms::ALGORITHMS {
            println!("{:<8} {}", a.name, a.summary);
        }
        return Ok(());
    }
    init_logging(&args)?;
    if ccswitch_algorithms::by_name(&args.algorithm).is_none() {
        let known: Vec<_> = ccswitch_algorithms::ALGORITHMS.iter().map(|a| a.name).collect();
        bail!("unknown algorithm {:?}; known: {}", args.algorithm, known.join(", "));
    }
    let agent = server::Agent::new(args.algorithm.clone())?;
    agent.serve(&args.socket, args.socket_mode)
}
