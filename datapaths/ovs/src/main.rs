//! `ccswitch-ovs`: the ovs datapath's userspace shim.
//!
//! `run` attaches the port programs to the bridge port facing an unmodified TCP server, keeps
//! every unacknowledged server segment, retransmits losses toward the client itself, and
//! speaks CCP to the agent exactly as the kernel datapath's shim does (the agent cannot tell
//! the two apart). While the agent is absent, gone or silent, the shim lets the deadline in
//! the port's config lapse and the port passes every frame unchanged: the server's own TCP
//! carries the flows. `detach` removes programs a killed shim left behind.

mod shim;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use ccswitch_ccp::cli::{AgentArgs, LogArgs, SchedArgs};
use ccswitch_ovs::loader::{detach_port, AttachOptions, OvsDatapath};
use ccswitch_ovs::recovery::RecoveryConfig;
use clap::{Args, Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(name = "ccswitch-ovs", version, about)]
struct OvsCli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Attach to a port and run until SIGINT/SIGTERM.
    Run(Box<RunArgs>),
    /// Remove ccswitch programs left attached to a port; prints how many.
    Detach {
        /// The bridge port facing the server.
        #[arg(long)]
        port: String,
    },
}

#[derive(Args, Debug)]
struct RunArgs {
    /// The bridge port facing the server (host side of its veth or tap).
    #[arg(long)]
    port: String,
    #[command(flatten)]
    agent: AgentArgs,
    /// Capacity of the port's flow table (half-open flows included) and of its directive slots.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u32).range(1..))]
    max_flows: u32,
    /// Ring buffer size in bytes (a power of two, at least 4096): it holds the records (small
    /// descriptors of the server's frames, ACKs) until the shim reads them; a full ring leaves
    /// flows unbuffered (counted).
    #[arg(long, default_value_t = 16 << 20)]
    ring_bytes: u32,
    /// Slots of the frame slab (1,536 bytes each): the port program copies each new server
    /// frame into one, and the shim gives it back once the client acknowledges the data. A
    /// flow holds about its window over the MSS; the default (96 MiB) covers 1,000 flows
    /// with 64-segment windows. A flow that finds no free slot is left to the server's TCP
    /// (counted as slab_full, logged once per second).
    #[arg(long, default_value_t = ccswitch_ovs::loader::DEFAULT_SLAB_SLOTS, value_parser = clap::value_parser!(u32).range(1..))]
    slab_slots: u32,
    /// Frame bytes one flow may keep buffered before it falls back.
    #[arg(long, default_value_t = 8 << 20)]
    flow_buffer_bytes: u64,
    /// Frame bytes all flows together may keep buffered.
    #[arg(long, default_value_t = 256 << 20)]
    total_buffer_bytes: u64,
    /// A flow with no traffic for this long is forgotten.
    #[arg(long, default_value_t = 120)]
    idle_timeout_s: u64,
    /// Longest a routine record (a segment copy, an ACK that only moves forward) waits before
    /// the shim reads it; urgent ones (losses, duplicates, a flow's start or end) wake it at
    /// once, so that a packet does not cost an interrupt.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(50..=5_000))]
    record_delay_us: u64,
    /// Urgent records (losses, duplicates, a flow's start or end) wake the shim at most once
    /// per this many microseconds (a wake-up is an interrupt, several microseconds of the port
    /// program's time on a VM); records that do not wake it wait at most --record-delay-us.
    /// With 0, an urgent record wakes the shim unless the shim has not read the ring since the
    /// last wake-up (it then sees the record in the same pass). A shim with flows reads the
    /// ring at least every record delay anyway, so a wake-up only shortens that wait; the
    /// default lets one through per 5 ms, the shim's own period without flows. Measured at
    /// 10k flows under loss: with 0, urgent records woke the shim ~2,000 times a second and
    /// the egress program took 1.6 µs per packet; 1 ms, 1.2 µs; 5 ms, 1.0 µs, the latency
    /// from an urgent report to the agent's answer unchanged (p99 6.7 ms).
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u32).range(0..=1_000_000))]
    wake_gap_us: u32,
    /// Write counters, program run times and buffer occupancy here (JSON) at exit.
    #[arg(long)]
    stats_file: Option<PathBuf>,
    #[command(flatten)]
    log: LogArgs,
    #[command(flatten)]
    sched: SchedArgs,
}

fn main() -> ExitCode {
    let cli = OvsCli::parse();
    let result = match cli.command {
        Command::Run(args) => run(*args),
        Command::Detach { port } => detach_port(&port).map(|n| {
            println!("removed {n} program(s) from {port}");
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccswitch-ovs: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: RunArgs) -> Result<()> {
    args.log.init()?;
    args.sched.apply()?;
    if args.port.is_empty() {
        anyhow::bail!("--port must name the bridge port facing the server");
    }
    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    let window = ccswitch_ccp::cli::WindowSignals::register()?;

    let opts = AttachOptions {
        ifname: args.port.clone(),
        max_flows: args.max_flows,
        ring_bytes: args.ring_bytes,
        slab_slots: args.slab_slots,
    };
    let datapath = OvsDatapath::attach(opts).with_context(|| format!("attaching to port {}", args.port))?;
    datapath.set_wake_gap(args.wake_gap_us.saturating_mul(1000))?;
    let ids: Vec<String> = datapath.prog_stats().iter().map(|p| format!("{}={}", p.name, p.id)).collect();
    tracing::info!(port = %args.port, programs = %ids.join(","), "attached");

    let agent_addr = args.agent.addr("ccswitch-ovs");
    let cfg = shim::ShimConfig {
        recovery: RecoveryConfig {
            flow_buffer_bytes: args.flow_buffer_bytes,
            idle_timeout_ns: args.idle_timeout_s.saturating_mul(1_000_000_000),
        },
        total_buffer_bytes: args.total_buffer_bytes,
        agent_timeout: args.agent.timeout(),
        record_delay: Duration::from_micros(args.record_delay_us),
    };
    let mut shim = shim::OvsShim::new(datapath, agent_addr, cfg);
    let result = shim.run(&stop, &window);
    shim.log_totals();
    let stats = shim.stats_file_json();
    drop(shim);
    tracing::info!(port = %args.port, "detached");
    if let Some(path) = &args.stats_file {
        let text = serde_json::to_string_pretty(&stats)?;
        std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    result
}
