//! CCP wire protocol and datapath-program interpreter, shared by the agent and both datapath
//! shims (DESIGN.md, decision 3).
//!
//! - [`wire`]: the libccp/portus message codec (CREATE, MEASURE, INSTALL_EXPR, UPDATE_FIELDS,
//!   CHANGE_PROG, READY) and stream framing ([`wire::FrameReader`]).
//! - [`agent_link`]: a shim's connection to the agent (unix stream, or portus's datagram IPC).
//! - [`cli`]: the command-line options of that connection and of logging, shared by the shims.
//! - [`session`]: the datapath-independent half of a shim (agent connection and liveness
//!   deadline, program table, per-flow [`CcpFlow`]s) behind the [`session::SessionDatapath`] trait.
//! - [`program`]: validation of installed programs ([`program::Program`], kept in a datapath-wide
//!   [`program::ProgramTable`]) and the per-flow interpreter ([`program::CcpFlow`]) with libccp's
//!   semantics.
//!
//! A datapath shim typically: sends `Msg::Ready` on connect and `Msg::Create` per new flow;
//! feeds received bytes to a `FrameReader` and `decode`s frames; gives INSTALL_EXPR to its
//! `ProgramTable::install_msg` and UPDATE_FIELDS / CHANGE_PROG to the addressed
//! `CcpFlow::handle`; calls `CcpFlow::on_ack` per ACK (and `CcpFlow::on_tick` from a timer), applying
//! each returned `Step` (cwnd, rate) and sending its report.

pub mod agent_link;
pub mod cli;
pub mod latency;
pub mod program;
pub mod session;
pub mod wire;

pub use program::{CcpFlow, ExecError, Primitives, Program, ProgramError, ProgramTable, Step};
pub use wire::{decode, FrameReader, Msg, WireError};
