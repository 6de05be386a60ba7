//! The CCP protocol as ccswitch speaks it, declared once for the agent and both datapath shims
//! (DESIGN.md, decision 3):
//!
//! - [`wire`]: the libccp/portus messages (CREATE, MEASURE, INSTALL_EXPR, UPDATE_FIELDS,
//!   CHANGE_PROG, READY), their codec and stream framing ([`wire::FrameReader`]).
//! - [`lang`]: what the codes inside those messages mean: op codes, register types, the
//!   implicit registers and the primitives by index, libccp's register banks and limits.
//! - [`standard`]: the standard program every simple-API algorithm runs: its source, its
//!   report and control registers by index, their defaults, and its INSTALL_EXPR message.
//!
//! The datapath side of the protocol (validating and interpreting programs, a shim's session
//! with the agent) is `ccswitch-ccp`'s; the agent's side (compiling programs, algorithms) is
//! the agent's.

pub mod lang;
pub mod standard;
pub mod wire;
