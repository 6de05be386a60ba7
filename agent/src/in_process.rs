//! The agent in a datapath shim's process (`ccswitch-kernel --agent-in-process -- AGENT
//! OPTIONS`).
//!
//! Over the socket, every report costs two thread wake-ups (the agent's, then the shim's
//! again for the answer) on top of the shim's own, and on the machines this runs on a
//! wake-up costs 9–20 µs, far more than the controller's work. Here the shim's session hands
//! the CCP messages it would have written to the socket to an in-process [`Connection`] on
//! its own thread, which decodes them, runs the controllers and returns the encoded answers
//! before the call returns: one code path with the socket server (registry, operator
//! interface, policies, handovers, events, Python algorithms), no wake-up.
//!
//! The host ([`InProcessHost`]) is built from the agent's own options; what only a process
//! of its own can do (its log, its signals, listing, benchmarks) is the shim's or refused.
//! The operator interface keeps its thread; `--socket`, when given, is served too, for
//! datapaths in other processes (an ovs shim). Dropping the host removes the socket files.
//!
//! [`Connection`]: crate::server

use std::ffi::OsString;
use std::sync::Arc;

use anyhow::{bail, Result};
use ccswitch_ccp::agent_link::{InProcessAgent, InProcessConnection};
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches};
use tracing::error;

use crate::cli::AgentCli;
use crate::events;
use crate::server::{bind, Agent, OwnedSockets};

/// The agent hosted by a shim: hands out in-process connections, owns the agent's sockets.
pub struct InProcessHost {
    agent: Arc<Agent>,
    owned: Arc<OwnedSockets>,
}

/// Options that belong to a process of the agent's own.
const REFUSED: &[(&str, &str)] = &[
    ("log_level", "--log-level: give it to the shim (before `--`): the process has one log"),
    ("log_format", "--log-format: give it to the shim (before `--`): the process has one log"),
    ("list_algorithms", "--list-algorithms: run `ccswitch-agent --list-algorithms`"),
    ("list_policies", "--list-policies: run `ccswitch-agent --list-policies`"),
    ("bench_reports", "--bench-reports: run `ccswitch-agent --bench-reports N`"),
    ("bench_report_gap_us", "--bench-report-gap-us: run `ccswitch-agent --bench-reports N`"),
    ("control_socket_renamed", "--control-socket was renamed: use --operator-socket (the operator interface)"),
];

impl InProcessHost {
    /// The agent `args` describe (the options of `ccswitch-agent`, without the program name),
    /// serving its operator interface and, if given, `--socket`. Fails as `ccswitch-agent`
    /// would at start (an unknown algorithm, a bad policy, a socket taken), or on an option
    /// only a process of the agent's own has.
    pub fn start<I: IntoIterator<Item = OsString>>(args: I) -> Result<Arc<Self>> {
        let argv = std::iter::once(OsString::from("ccswitch-agent")).chain(args);
        let matches = match AgentCli::command().try_get_matches_from(argv) {
            Ok(m) => m,
            // `-- --help` and `-- --version` are the agent's, printed as `ccswitch-agent` would.
            Err(e) if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) => e.exit(),
            Err(e) => return Err(e.into()),
        };
        let cli = AgentCli::from_arg_matches(&matches)?;
        let given = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        if let Some((_, why)) = REFUSED.iter().find(|(id, _)| given(id)) {
            bail!("agent option {why}");
        }
        let owned = Arc::new(OwnedSockets::default());
        let started = (|| {
            let policy = cli.algorithm_and_policy()?;
            let agent = cli.agent(policy, &owned)?;
            if given("socket") {
                let listener = bind(&cli.socket, cli.socket_mode, &owned)?;
                agent.log_start(&format!("in-process and {}", cli.socket.display()));
                let serving = Arc::clone(&agent);
                std::thread::Builder::new().name("datapath-socket".into()).spawn(move || {
                    if let Err(e) = serving.accept_datapaths(listener) {
                        error!(error = %e, "the agent stopped serving its socket");
                    }
                })?;
            } else {
                agent.log_start("in-process");
            }
            Ok(agent)
        })();
        match started {
            Ok(agent) => Ok(Arc::new(Self { agent, owned })),
            Err(e) => {
                // Failing to start leaves no socket behind.
                owned.remove_all();
                Err(e)
            }
        }
    }
}

impl InProcessAgent for InProcessHost {
    fn connect(&self) -> Box<dyn InProcessConnection> {
        Box::new(self.agent.connect_in_process())
    }
}

impl Drop for InProcessHost {
    fn drop(&mut self) {
        let removed: Vec<String> = self.owned.remove_all().iter().map(|p| p.display().to_string()).collect();
        tracing::info!(removed = ?removed, "in-process agent stopping");
        events::flush_all();
    }
}
