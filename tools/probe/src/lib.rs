//! ccswitch-probe: per-flow packet timestamps at both ends of an emulated path.
//!
//! For every data segment a server sends (at the TC egress of its veth) and every one that
//! reaches the client (at the TC ingress of the client's innermost mahimahi namespace), the
//! probe's BPF programs (`bpf/probe.bpf.c`, which explains the model) match the two sightings
//! and record the one-way delay; they also count each flow's segments at both ends (their
//! difference is what the path dropped) and keep the server sockets' own TCP_INFO counters.
//! The binary (`main.rs`) writes the records and a per-flow summary in the files of issue 19's
//! data contract:
//!
//! - `OUT.packets.bin`: 24-byte little-endian records [`abi::ProbeRecord`], no header;
//! - `OUT.flows.json`: [`output::FlowsFile`].

pub mod abi;
pub mod loader;
pub mod netns;
pub mod output;

mod skel {
    #![allow(clippy::all, warnings)]
    include!(concat!(env!("OUT_DIR"), "/probe.skel.rs"));
}

pub use loader::{Hook, ProbeOptions, Probe, RET_NEXT};

/// CLOCK_MONOTONIC now, nanoseconds: the clock of `bpf_ktime_get_ns`, of the records, and of
/// Python's `time.monotonic()`.
pub fn monotonic_now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
