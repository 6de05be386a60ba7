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
