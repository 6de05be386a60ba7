//! `ccswitch-kernel`: the kernel datapath's userspace shim.
//!
//! It registers the BPF congestion control `ccswitch`, exchanges CCP messages with the agent,
//! and writes the agent's window and rate back where the BPF program applies them on the next
//! ACK. A flow on the standard program (every simple-API algorithm) is folded in the BPF
//! program, which sends only its reports; any other program's per-ACK primitives are
//! evaluated here.
//! While the agent is absent, gone or silent, it lets the agent deadline in the BPF config
//! lapse, and the BPF program carries every flow on with its in-kernel fallback algorithm.
//!
//! The agent is the ccswitch agent (unix stream socket, the default) or any portus agent on
//! portus's unix datagram IPC (`--agent-ipc portus-unix`), e.g. upstream CCP's
//! `generic_cong_avoid` binaries: see `ccswitch_ccp::agent_link`. With `--agent-in-process`
//! the ccswitch agent runs in this process instead, its controllers on the shim's thread
//! (`ccswitch_agent::in_process`): `ccswitch-kernel --agent-in-process [SHIM OPTIONS] --
//! [AGENT OPTIONS]`, the agent's options being those of `ccswitch-agent`.

mod shim;

use std::ffi::OsString;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use ccswitch_agent::in_process::InProcessHost;
use ccswitch_ccp::agent_link::{AgentAddr, InProcessAddr};
use ccswitch_ccp::cli::{AgentArgs, LogArgs, SchedArgs, WindowSignals};
use ccswitch_kernel::{Fallback, KernelDatapath, LoadOptions, DEFAULT_CC_NAME, DEFAULT_MAX_FLOWS, DEFAULT_MAX_VM_FLOWS, DEFAULT_REPORT_DELAY, DEFAULT_RING_BYTES};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(name = "ccswitch-kernel", version, about)]
#[command(after_help = "With --agent-in-process, the options after `--` are the agent's (see `ccswitch-agent --help`), \
e.g. `ccswitch-kernel --agent-in-process --fallback reno -- --algorithm cubic --operator-socket /run/ccswitch/operator.sock`.")]
struct KernelCli {
    #[command(flatten)]
    agent: AgentArgs,
    #[command(flatten)]
    sched: SchedArgs,
    /// Run the ccswitch agent in this process, its controllers on the shim's thread, instead of
    /// reaching one over a socket: no socket hop and no thread wake-up between a report and
    /// its answer. Its options follow `--`, as `ccswitch-agent` takes them; it serves its
    /// operator interface as usual, and its --socket only when given (for other datapaths).
    #[arg(long, conflicts_with_all = ["agent_socket", "agent_ipc", "portus_dir", "portus_agent", "portus_name", "portus_version"])]
    agent_in_process: bool,
    /// With --agent-in-process: the agent's options.
    #[arg(last = true, value_name = "AGENT OPTIONS", requires = "agent_in_process")]
    agent_options: Vec<OsString>,
    /// In-kernel algorithm for flows the agent does not drive.
    #[arg(long, default_value = "reno", value_parser = ["reno", "cubic"])]
    fallback: String,
    /// Name under which the congestion control registers.
    #[arg(long, default_value = DEFAULT_CC_NAME)]
    cc_name: String,
    /// Longest a routine record (the report of a flow folded in the kernel, the ACK of a flow
    /// the shim interprets) waits in its lane before the next one wakes the shim; until then
    /// routine records are read whenever the shim is awake anyway. Urgent ones (a flow's start
    /// or end, loss, timeout, ECN) wake it at once, and the report of a flow reporting per ACK
    /// (slow start) within 1 ms. Every wake-up costs the shim and the agent tens of µs, so at
    /// many flows this sets their CPU cost.
    #[arg(long, default_value_t = DEFAULT_REPORT_DELAY.as_micros() as u64, value_parser = clap::value_parser!(u64).range(50..=100_000))]
    report_delay_us: u64,
    /// Flows that can hold a directive at once; beyond it a flow stays on the fallback
    /// (counted, logged at most once per second).
    #[arg(long, default_value_t = DEFAULT_MAX_FLOWS, value_parser = clap::value_parser!(u32).range(1..))]
    max_flows: u32,
    /// Size of the routine lane's ring buffer in bytes (a power of two, at least 4096; the
    /// urgent lane's is a quarter of it); a full ring loses records (counted).
    #[arg(long, default_value_t = DEFAULT_RING_BYTES)]
    ring_bytes: u32,
    /// Flows whose program (other than the standard one) the kernel can interpret at once;
    /// beyond it their programs run in this process (logged).
    #[arg(long, default_value_t = DEFAULT_MAX_VM_FLOWS, value_parser = clap::value_parser!(u32).range(1..))]
    max_vm_flows: u32,
    /// Run programs other than the standard one (full-API algorithms, portus's) in this
    /// process's interpreter instead of the kernel's, where they run by default.
    #[arg(long)]
    programs_in_shim: bool,
    /// Register only `ccsw_floor`, a BPF Reno on the same hook as ccswitch's program and
    /// nothing more, until SIGINT/SIGTERM: `make bench` measures its BPF time per ACK beside
    /// ccswitch's, as the floor this machine charges any program there.
    #[arg(long, conflicts_with_all = ["agent_in_process", "agent_socket", "agent_ipc", "portus_dir", "portus_agent", "portus_name", "portus_version"])]
    floor_cc: bool,
    #[command(flatten)]
    log: LogArgs,
}

fn main() -> Result<()> {
    let args = KernelCli::parse();
    args.log.init()?;
    args.sched.apply()?;

    let stop = Arc::new(AtomicBool::new(false));
    signal_hook::flag::register(signal_hook::consts::SIGINT, Arc::clone(&stop))?;
    signal_hook::flag::register(signal_hook::consts::SIGTERM, Arc::clone(&stop))?;
    if args.floor_cc {
        return ccswitch_kernel::floor::run_until(&stop, |prog_id| {
            tracing::info!(cc = ccswitch_kernel::floor::FLOOR_CC_NAME, prog_id, "congestion control registered");
        });
    }
    let window = WindowSignals::register()?;
    // The agent first: a bad algorithm or policy fails before the congestion control registers.
    let agent_addr = if args.agent_in_process {
        let host = InProcessHost::start(args.agent_options.iter().cloned()).context("the in-process agent")?;
        AgentAddr::InProcess(InProcessAddr(host))
    } else {
        args.agent.addr("ccswitch-kernel")
    };

    let fallback = if args.fallback == "cubic" { Fallback::Cubic } else { Fallback::Reno };
    let datapath = KernelDatapath::load(LoadOptions {
        fallback,
        cc_name: args.cc_name.clone(),
        max_flows: args.max_flows,
        ring_bytes: args.ring_bytes,
        report_delay: std::time::Duration::from_micros(args.report_delay_us),
        max_vm_flows: args.max_vm_flows,
        programs_in_kernel: !args.programs_in_shim,
    })?;
    tracing::info!(
        cc = %args.cc_name, fallback = %args.fallback, map_id = datapath.struct_ops_map_id().ok(),
        prog_ids = ?datapath.prog_ids().iter().map(|p| p.id).collect::<Vec<_>>(),
        "congestion control registered"
    );
    let mut shim = shim::KernelShim::new(datapath, agent_addr, args.agent.timeout());
    let result = shim.run(&stop, &window);
    shim.log_totals();
    // The session's link, hence an in-process agent's connection and flows, go with the shim;
    // the agent itself (its sockets removed) with the last handle on it, just after.
    drop(shim);
    tracing::info!(cc = %args.cc_name, "congestion control unregistered");
    result
}
