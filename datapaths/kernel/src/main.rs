//! `ccswitch-kernel`: the kernel datapath's userspace shim.
//!
//! It registers the BPF congestion control `ccswitch`, turns each flow's per-ACK primitives
//! into CCP datapath-program evaluations, exchanges CCP messages with the agent, and writes
//! the agent's window and rate back where the BPF program applies them on the next ACK.
//! While the agent is absent, gone or silent, it lets the agent deadline in the BPF config
//! lapse, and the BPF program carries every flow on with its in-kernel fallback algorithm.
//!
//! The agent is the ccswitch agent (unix stream socket, the default) or any portus agent on
//! portus's unix datagram IPC (`--agent-ipc portus-unix`), e.g. upstream CCP's
//! `generic_cong_avoid` binaries: see `ccswitch_ccp::agent_link`.

mod shim;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use ccswitch_ccp::agent_link::{AgentAddr, PortusAddr, ReplyAddr};
use ccswitch_kernel::{Fallback, KernelDatapath, LoadOptions, DEFAULT_CC_NAME};
use clap::Parser;
use tracing_subscriber::EnvFilter;

#[derive(Parser, Debug)]
#[command(name = "ccswitch-kernel", version, about)]
struct Args {
    /// The agent's unix socket (with `--agent-ipc unix-stream`).
    #[arg(long, default_value = "/run/ccswitch/agent.sock")]
    agent_socket: PathBuf,
    /// How to reach the agent: `unix-stream` (the ccswitch agent, at --agent-socket) or
    /// `portus-unix` (portus's unix datagram IPC, as `portus::start!("unix", ..)` binds it,
    /// e.g. upstream CCP's generic-cong-avoid; sockets under --portus-dir).
    #[arg(long, default_value = "unix-stream", value_parser = ["unix-stream", "portus-unix"])]
    agent_ipc: String,
    /// portus-unix: directory of the agent's and the datapath's sockets (portus hard-codes
    /// /tmp/ccp).
    #[arg(long, default_value = "/tmp/ccp")]
    portus_dir: PathBuf,
    /// portus-unix: the agent's socket name in --portus-dir.
    #[arg(long, default_value = "portus")]
    portus_agent: String,
    /// portus-unix: this datapath's socket name in --portus-dir.
    #[arg(long, default_value = "ccswitch-kernel")]
    portus_name: String,
    /// portus-unix: the agent's portus version, which decides how it addresses its answers
    /// (0.7 prepends /tmp/ccp/ to the datapath's address, 0.9 uses it as given).
    #[arg(long, default_value = "0.7", value_parser = ["0.7", "0.9"])]
    portus_version: String,
    /// In-kernel algorithm for flows the agent does not drive.
    #[arg(long, default_value = "reno", value_parser = ["reno", "cubic"])]
    fallback: String,
    /// The agent counts as silent once a report has gone unanswered this long; flows then
    /// fall back until it answers again.
    #[arg(long, default_value_t = 500)]
    agent_timeout_ms: u64,
    /// Name under which the congestion control registers.
    #[arg(long, default_value = DEFAULT_CC_NAME)]
    cc_name: String,
    /// Log level (error, warn, info, debug, trace) or a tracing filter.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let filter = EnvFilter::try_new(&args.log_level)?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if args.log_format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }

    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;

    let fallback = if args.fallback == "cubic" { Fallback::Cubic } else { Fallback::Reno };
    let datapath = KernelDatapath::load(LoadOptions { fallback, cc_name: args.cc_name.clone() })?;
    tracing::info!(cc = %args.cc_name, fallback = %args.fallback, "congestion control registered");
    let agent_addr = if args.agent_ipc == "portus-unix" {
        AgentAddr::Portus(PortusAddr {
            dir: args.portus_dir,
            agent: args.portus_agent,
            name: args.portus_name,
            reply_addr: if args.portus_version == "0.7" { ReplyAddr::Relative } else { ReplyAddr::Absolute },
        })
    } else {
        AgentAddr::Stream(args.agent_socket)
    };
    let mut shim = shim::Shim::new(datapath, agent_addr, Duration::from_millis(args.agent_timeout_ms));
    let result = shim.run(&stop);
    shim.log_totals();
    drop(shim);
    tracing::info!(cc = %args.cc_name, "congestion control unregistered");
    result
}
