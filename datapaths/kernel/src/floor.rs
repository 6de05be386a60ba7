//! The floor congestion control, `ccsw_floor` (`src/bpf/floor.bpf.c`): a BPF Reno on the hook
//! ccswitch's program uses and nothing more. `make bench` runs transfers with it beside
//! ccswitch's, so that its BPF time per ACK says what this machine charges any program there
//! (`ccswitch-kernel --floor-cc`).

use std::mem::MaybeUninit;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::OpenObject;

use crate::skel::floor::FloorSkelBuilder;

/// The name it registers under (`net.ipv4.tcp_available_congestion_control`).
pub const FLOOR_CC_NAME: &str = "ccsw_floor";

/// Registers `ccsw_floor`, calls `registered` with its per-ACK program's id, and keeps it
/// registered until `stop` is set.
pub fn run_until(stop: &AtomicBool, registered: impl FnOnce(u32)) -> Result<()> {
    let mut storage = MaybeUninit::<OpenObject>::uninit();
    let mut skel = FloorSkelBuilder::default()
        .open(&mut storage)
        .context("opening the ccsw_floor BPF object")?
        .load()
        .context("loading ccsw_floor (verifier or kfunc availability)")?;
    let _link = skel
        .maps
        .ccsw_floor
        .attach_struct_ops()
        .with_context(|| format!("registering congestion control {FLOOR_CC_NAME:?}"))?;
    let id = libbpf_rs::Program::id_from_fd(skel.progs.ccsw_floor_ack.as_fd()).context("ccsw_floor_ack's id")?;
    registered(id);
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}
