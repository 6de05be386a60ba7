//! The ovs datapath: enforces an agent's congestion window on an unmodified TCP server
//! from the bridge port in front of it.
//!
//! Two TC-eBPF programs sit on the server-facing port of a bridge (Open vSwitch or Linux):
//! on the port's **ingress** (frames from the server) one observes the server's data and
//! hands every new segment, whole, to userspace; on the port's **egress** (frames toward the
//! server) the other reads the client's ACKs, folds the standard program's ACKs or reports
//! them, and, while the flow is under
//! control, lowers the advertised window to the agent's window, hides duplicate ACKs, SACK
//! blocks and ECE from the server. Rewrites sit on egress because Open vSwitch's userspace
//! datapath reads its ports with packet sockets, which see a frame before TC ingress.
//!
//! The userspace shim (`ccswitch-ovs`) keeps the unacknowledged segments, detects losses
//! and retransmits them toward the client itself, turns data and ACKs into CCP measurement
//! primitives, and speaks CCP to the agent exactly as the kernel datapath does.
//!
//! Modules: [`abi`] (the `#[repr(C)]` mirrors of `bpf/ovs.h`), [`events`] (the decoded
//! records and directives shared by the BPF side and the shim, and the decoder), [`loader`]
//! (loading, attaching, maps, injection), [`recovery`] (per-flow sender model: segment
//! buffer, SACK scoreboard, loss detection, measurement), [`fold`] (the shim's half of the
//! standard program's fold).

pub mod abi;
pub mod events;
pub mod fold;
pub mod loader;
pub mod recovery;

#[allow(
    clippy::all,
    unused_imports,
    dead_code,
    non_camel_case_types,
    non_snake_case
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/ovs.skel.rs"));
}
