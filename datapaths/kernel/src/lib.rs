//! ccswitch kernel datapath: loader and event decoder for the BPF struct_ops
//! congestion control in `src/bpf/kernel.bpf.c`.
//!
//! ```no_run
//! use std::time::Duration;
//! use ccswitch_kernel::{Fallback, KernelDatapath, KernelEvent, LoadOptions};
//!
//! let mut dp = KernelDatapath::load(LoadOptions { fallback: Fallback::Reno, ..Default::default() })?;
//! // "ccswitch" is now in /proc/sys/net/ipv4/tcp_available_congestion_control.
//! loop {
//!     dp.set_agent_valid_until(ccswitch_kernel::monotonic_now_ns() + 500_000_000)?;
//!     let mut created = vec![];
//!     dp.poll(Duration::from_millis(100), |ev| match ev {
//!         KernelEvent::Created(f) => created.push(f.flow_id),
//!         KernelEvent::Ack(_a) => {}
//!         KernelEvent::Report(_r) => {} // flows folded with set_fold
//!         KernelEvent::ProgramReport(_r) => {} // flows whose program runs in the kernel (run_program)
//!         KernelEvent::Closed { .. } => {}
//!     })?;
//!     for id in created {
//!         dp.set_directive(id, Some(20_000), None)?;
//!     }
//! }
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! Semantics of the kernel side (see the header comment of the BPF program):
//! a directive is applied on each ACK only while the agent deadline set with
//! [`KernelDatapath::set_agent_valid_until`] lies in the future; otherwise
//! the flow runs the fallback algorithm chosen in [`LoadOptions`].

pub mod abi;
mod events;
pub mod floor;
mod loader;
mod teardown;
pub mod vm;

#[allow(
    clippy::all,
    unused_imports,
    dead_code,
    non_camel_case_types,
    non_snake_case
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/kernel.skel.rs"));

    /// `src/bpf/floor.bpf.c`'s skeleton (see [`crate::floor`]).
    pub mod floor {
        include!(concat!(env!("OUT_DIR"), "/floor.skel.rs"));
    }
}

pub use ccswitch_ccp::program::fold::FoldMode;
pub use events::{AckSample, FlowInfo, FoldedReport, KernelEvent, ProgramReport};
pub use ccswitch_datapath_support::mapped::DirectiveSlotBusy;
pub use loader::{
    monotonic_now_ns, Fallback, HandBack, KernelDatapath, KernelStats, LoadOptions, ProgId,
    DEFAULT_CC_NAME, DEFAULT_MAX_FLOWS, DEFAULT_MAX_VM_FLOWS, DEFAULT_REPORT_DELAY, DEFAULT_RING_BYTES,
};
