//! The datapath side of CCP, shared by both datapath shims (DESIGN.md, decision 3): the
//! protocol itself (messages, register meanings, the standard program's layout) is
//! `ccswitch-protocol`'s, which the agent uses too; this crate is what only a shim runs.
//!
//! - [`agent_link`]: a shim's connection to the agent (unix stream, or portus's datagram IPC).
//! - [`cli`]: the command-line options of that connection and of logging, shared by the shims.
//! - [`session`]: the datapath-independent half of a shim (agent connection and liveness
//!   deadline, program table, per-flow [`CcpFlow`]s) behind the [`session::SessionDatapath`] trait.
//! - [`program`]: validation of installed programs ([`program::Program`], kept in a datapath-wide
//!   [`program::ProgramTable`]) and the per-flow interpreter ([`program::CcpFlow`]) with libccp's
//!   semantics; [`program::fold`] recognises the standard program for a kernel to fold.
//!
//! A datapath shim typically: sends `Msg::Ready` on connect and `Msg::Create` per new flow;
//! feeds received bytes to a `FrameReader` and `decode`s frames (`ccswitch_protocol::wire`);
//! gives INSTALL_EXPR to its `ProgramTable::install_msg` and UPDATE_FIELDS / CHANGE_PROG to the
//! addressed `CcpFlow::handle`; calls `CcpFlow::on_ack` per ACK (and `CcpFlow::on_tick` from a
//! timer), applying each returned `Step` (cwnd, rate) and sending its report.

pub mod agent_link;
pub mod cli;
pub mod latency;
pub mod program;
pub mod session;

pub use program::{CcpFlow, ExecError, Primitives, Program, ProgramError, ProgramTable, Step};
