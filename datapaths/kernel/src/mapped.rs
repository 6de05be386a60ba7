//! BPF arrays mapped into the shim (BPF_F_MMAPABLE): directives and the agent deadline are
//! plain stores into memory the BPF program reads, not a syscall each.
//!
//! Flow F's directive lives in slot F % max_flows while the slot's `flow_id` is F. A store
//! writes the fields before `flow_id` when it takes a slot, and clears `flow_id` before
//! anything else when it gives one back, so the BPF program never applies a half-written
//! slot to a flow; a slot whose owner changes under an ACK is applied to no flow.

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::{read_volatile, write_volatile};
use std::sync::atomic::{fence, Ordering};

use anyhow::{bail, Result};

use crate::abi::{self, Directive};

/// `len` values of `T` shared with BPF.
pub(crate) struct Mapped<T> {
    ptr: *mut T,
    len: usize,
    bytes: usize,
}

impl<T: abi::Pod> Mapped<T> {
    /// Maps the whole array behind `fd` (`len` entries of `T`).
    pub(crate) fn new(fd: BorrowedFd<'_>, len: usize) -> Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let bytes = (len * std::mem::size_of::<T>()).div_ceil(page) * page;
        // SAFETY: a shared mapping of a BPF array map, whose size the kernel checks against
        // the map's; nothing else aliases it in this process.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0)
        };
        if ptr == libc::MAP_FAILED {
            bail!("mapping a BPF array ({bytes} bytes): {}", std::io::Error::last_os_error());
        }
        Ok(Self { ptr: ptr.cast(), len, bytes })
    }

    fn at(&self, i: usize) -> *mut T {
        assert!(i < self.len);
        // SAFETY: in bounds of the mapping.
        unsafe { self.ptr.add(i) }
    }

    pub(crate) fn read(&self, i: usize) -> T {
        // SAFETY: in bounds, aligned (the kernel maps arrays page-aligned with 8-byte values).
        unsafe { read_volatile(self.at(i)) }
    }

    pub(crate) fn write(&self, i: usize, v: T) {
        // SAFETY: as in `read`.
        unsafe { write_volatile(self.at(i), v) }
    }
}

impl Mapped<Directive> {
    fn slot_of(&self, flow_id: u32) -> usize {
        flow_id as usize % self.len
    }

    /// Changes `flow_id`'s directive, taking its slot if free; `Err(holder)` if another flow
    /// holds it.
    pub(crate) fn update(&self, flow_id: u32, change: impl FnOnce(&mut Directive)) -> Result<(), u32> {
        let i = self.slot_of(flow_id);
        let cur = self.read(i);
        if cur.flow_id != 0 && cur.flow_id != flow_id {
            return Err(cur.flow_id);
        }
        let mut d = if cur.flow_id == flow_id { cur } else { Directive::default() };
        change(&mut d);
        let p = self.at(i);
        // SAFETY: in bounds; each field store is a single aligned store.
        unsafe {
            write_volatile(&raw mut (*p).cwnd_bytes, d.cwnd_bytes);
            write_volatile(&raw mut (*p).fold, d.fold);
            write_volatile(&raw mut (*p).pacing_rate, d.pacing_rate);
            write_volatile(&raw mut (*p).fold_start_us, d.fold_start_us);
            fence(Ordering::Release);
            write_volatile(&raw mut (*p).flow_id, flow_id);
        }
        Ok(())
    }

    /// Gives `flow_id`'s slot back (if it holds it).
    pub(crate) fn clear(&self, flow_id: u32) {
        let i = self.slot_of(flow_id);
        if self.read(i).flow_id == flow_id {
            // SAFETY: in bounds, aligned.
            unsafe { write_volatile(&raw mut (*self.at(i)).flow_id, 0) };
            fence(Ordering::Release);
        }
    }

    /// `flow_id`'s directive, if it holds its slot.
    pub(crate) fn get(&self, flow_id: u32) -> Option<Directive> {
        let d = self.read(self.slot_of(flow_id));
        (d.flow_id == flow_id).then_some(d)
    }
}

impl<T> Drop for Mapped<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.bytes) };
    }
}
