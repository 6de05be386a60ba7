//! The ccswitch agent: congestion-control algorithms for the flows of CCP datapaths.
//!
//! `ccswitch-agent` (main.rs) serves datapaths on a unix socket, one thread per datapath. A
//! datapath shim can instead host the agent in its own process ([`in_process`]): the agent's
//! controllers then run on the shim's thread, called with the CCP messages the shim would
//! have written to the socket. Both are built from the same command line ([`cli::AgentCli`]).

pub mod bench;
pub mod cli;
pub mod events;
pub mod flow;
pub mod in_process;
pub mod memory;
pub mod operator;
pub mod program;
pub mod python;
pub mod python_guard;
pub mod pyportus;
pub mod registry;
pub mod selector;
pub mod server;
#[cfg(test)]
mod test_files;
