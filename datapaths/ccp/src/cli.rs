//! Command-line options every datapath shim shares: how to reach the agent, and logging; and
//! the signals both shims answer.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use tracing_subscriber::EnvFilter;

use crate::agent_link::{AgentAddr, PortusAddr, ReplyAddr};

#[derive(Args, Debug, Clone)]
pub struct AgentArgs {
    /// The agent's unix socket (with `--agent-ipc unix-stream`).
    #[arg(long, default_value = "/run/ccswitch/agent.sock")]
    pub agent_socket: PathBuf,
    /// How to reach the agent: `unix-stream` (the ccswitch agent, at --agent-socket) or
    /// `portus-unix` (portus's unix datagram IPC, as `portus::start!("unix", ..)` binds it,
    /// e.g. upstream CCP's generic-cong-avoid; sockets under --portus-dir).
    #[arg(long, default_value = "unix-stream", value_parser = ["unix-stream", "portus-unix"])]
    pub agent_ipc: String,
    /// portus-unix: directory of the agent's and the datapath's sockets (portus hard-codes
    /// /tmp/ccp).
    #[arg(long, default_value = "/tmp/ccp")]
    pub portus_dir: PathBuf,
    /// portus-unix: the agent's socket name in --portus-dir.
    #[arg(long, default_value = "portus")]
    pub portus_agent: String,
    /// portus-unix: this datapath's socket name in --portus-dir (default: the program's name).
    #[arg(long)]
    pub portus_name: Option<String>,
    /// portus-unix: the agent's portus version, which decides how it addresses its answers
    /// (0.7 prepends /tmp/ccp/ to the datapath's address, 0.9 uses it as given).
    #[arg(long, default_value = "0.7", value_parser = ["0.7", "0.9"])]
    pub portus_version: String,
    /// The agent counts as silent once a report has gone unanswered this long; flows then
    /// fall back until it answers again.
    #[arg(long, default_value_t = 500)]
    pub agent_timeout_ms: u64,
}

impl AgentArgs {
    /// Where the agent is; `program` names this datapath's portus socket by default.
    pub fn addr(&self, program: &str) -> AgentAddr {
        if self.agent_ipc == "portus-unix" {
            AgentAddr::Portus(PortusAddr {
                dir: self.portus_dir.clone(),
                agent: self.portus_agent.clone(),
                name: self.portus_name.clone().unwrap_or_else(|| program.to_string()),
                reply_addr: if self.portus_version == "0.7" { ReplyAddr::Relative } else { ReplyAddr::Absolute },
            })
        } else {
            AgentAddr::Stream(self.agent_socket.clone())
        }
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.agent_timeout_ms)
    }
}

#[derive(Args, Debug, Clone)]
pub struct LogArgs {
    /// Log level (error, warn, info, debug, trace) or a tracing filter.
    #[arg(long, default_value = "info")]
    pub log_level: String,
    /// Log format.
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
}

impl LogArgs {
    /// Log to stderr with the chosen filter and format; colours only on a terminal, so that
    /// redirected logs stay plain text.
    pub fn init(&self) -> Result<()> {
        let filter =
            EnvFilter::try_new(&self.log_level).with_context(|| format!("bad --log-level {:?}", self.log_level))?;
        let builder = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
        if self.log_format == "json" {
            builder.json().init();
        } else {
            builder.init();
        }
        Ok(())
    }
}

/// The shims' SCHED_FIFO priority when none is given.
pub const DEFAULT_REALTIME_PRIORITY: u8 = 10;

#[derive(Args, Debug, Clone)]
pub struct SchedArgs {
    /// Run the shim under SCHED_FIFO at this priority, 1-99, or 0 for the normal scheduler
    /// [default: 10, or the normal scheduler with a warning where SCHED_FIFO is refused]. An
    /// urgent record (a loss, a timeout) wakes the shim at once, but under the normal scheduler
    /// it waits for its CPU behind whatever runs there: beside 10k flows at 1% loss on a 2-core
    /// machine, urgent p99 3.8-4.6 ms, against 0.38-0.58 ms real-time. The shim sleeps between
    /// events, and the kernel keeps 5% of every second for other tasks (sched_rt_runtime_us),
    /// so it cannot starve them.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=99))]
    pub realtime_priority: Option<u8>,
}

impl SchedArgs {
    /// Applies the policy to the calling thread; call it before spawning threads, which
    /// inherit it. A priority given and refused is an error; the default, refused (no
    /// CAP_SYS_NICE), leaves the normal scheduler and says so.
    pub fn apply(&self) -> Result<()> {
        let priority = self.realtime_priority.unwrap_or(DEFAULT_REALTIME_PRIORITY);
        if priority == 0 {
            return Ok(());
        }
        let param = libc::sched_param { sched_priority: i32::from(priority) };
        // SAFETY: plain syscall on the calling thread with a valid parameter block.
        if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } == 0 {
            return Ok(());
        }
        let refused = std::io::Error::last_os_error();
        if self.realtime_priority.is_none() {
            tracing::warn!(error = %refused, "SCHED_FIFO refused (needs CAP_SYS_NICE): the shim runs under the normal scheduler, and urgent answers wait behind other tasks");
            return Ok(());
        }
        Err(refused).with_context(|| format!("--realtime-priority {priority}: SCHED_FIFO refused (needs CAP_SYS_NICE)"))
    }
}

/// The signals that delimit a benchmark's measurement window, so that a shim's figures (answer
/// latency, fallbacks) cover the window and not the ramp before it: SIGUSR1 begins a window,
/// SIGUSR2 ends it (the shim then records its figures at once).
pub struct WindowSignals {
    start: Arc<AtomicBool>,
    end: Arc<AtomicBool>,
}

/// An edge of the measurement window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowEdge {
    Start,
    End,
}

impl WindowSignals {
    pub fn register() -> Result<Self> {
        let start = Arc::new(AtomicBool::new(false));
        let end = Arc::new(AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&start))?;
        signal_hook::flag::register(signal_hook::consts::SIGUSR2, Arc::clone(&end))?;
        Ok(Self { start, end })
    }

    /// The edge signalled since the last call, if any (a start before an end).
    pub fn take(&self) -> Option<WindowEdge> {
        if self.start.swap(false, Ordering::Relaxed) {
            Some(WindowEdge::Start)
        } else if self.end.swap(false, Ordering::Relaxed) {
            Some(WindowEdge::End)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        sched: SchedArgs,
    }

    #[test]
    fn the_shim_is_real_time_unless_told_otherwise_and_bad_priorities_are_refused() {
        assert!(Cli::try_parse_from(["shim", "--realtime-priority", "100"]).is_err());
        let policy_after = |argv: &'static [&'static str]| {
            // On a thread of its own, which takes its policy with it when it ends.
            std::thread::spawn(move || {
                let applied = Cli::try_parse_from(argv).unwrap().sched.apply();
                // SAFETY: plain syscall on the calling thread.
                (applied.map_err(|e| format!("{e:#}")), unsafe { libc::sched_getscheduler(0) })
            })
            .join()
            .unwrap()
        };
        assert_eq!(policy_after(&["shim", "--realtime-priority", "0"]), (Ok(()), libc::SCHED_OTHER));
        // SAFETY: plain syscall on the calling thread.
        let root = unsafe { libc::geteuid() } == 0;
        let (default, policy) = policy_after(&["shim"]);
        assert_eq!(default, Ok(()), "the default never fails");
        assert!(policy == libc::SCHED_FIFO || !root, "root runs the shim real-time by default");
        match policy_after(&["shim", "--realtime-priority", "20"]) {
            (Ok(()), policy) => assert_eq!(policy, libc::SCHED_FIFO),
            // Refused (only without root: CI runs as root), the error says what is missing.
            (Err(e), _) => {
                assert!(!root, "root may run SCHED_FIFO: {e}");
                assert!(e.contains("CAP_SYS_NICE"));
            }
        }
    }
}
