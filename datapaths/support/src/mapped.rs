//! BPF arrays (BPF_F_MMAPABLE) mapped into the shim: what the shim tells the BPF programs
//! (each flow's directive, the agent deadline) is a plain store into memory they read, not a
//! map-update syscall each.
//!
//! A datapath that keeps one slot per flow puts flow F in slot F % len while the slot's owner
//! is F, and writes a slot's fields before its owner when it takes the slot and the owner
//! before anything else when it gives it back, so that a program never applies a
//! half-written slot to a flow (see each datapath's `*_slots` functions).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::{read_volatile, write_volatile};

use anyhow::{bail, Result};

/// `len` values of `T` (plain old data, the layout the BPF side declares) shared with BPF.
pub struct MappedArray<T: Copy> {
    ptr: *mut T,
    len: usize,
    bytes: usize,
}

impl<T: Copy> MappedArray<T> {
    /// Maps the whole array behind `fd` (`len` entries of `T`).
    pub fn new(fd: BorrowedFd<'_>, len: usize) -> Result<Self> {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as usize;
        let bytes = (len * std::mem::size_of::<T>()).div_ceil(page) * page;
        // SAFETY: a shared mapping of a BPF array map, whose size the kernel checks against
        // the map's; nothing else in this process aliases it.
        let ptr = unsafe {
            libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd.as_raw_fd(), 0)
        };
        if ptr == libc::MAP_FAILED {
            bail!("mapping a BPF array ({bytes} bytes): {}", std::io::Error::last_os_error());
        }
        Ok(Self { ptr: ptr.cast(), len, bytes })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entry `i`, for field-wise volatile stores (`write_volatile(&raw mut (*p).field, v)`).
    pub fn at(&self, i: usize) -> *mut T {
        assert!(i < self.len, "index {i} beyond {} entries", self.len);
        // SAFETY: in bounds of the mapping.
        unsafe { self.ptr.add(i) }
    }

    pub fn read(&self, i: usize) -> T {
        // SAFETY: in bounds; the kernel maps arrays page-aligned with 8-byte-aligned values.
        unsafe { read_volatile(self.at(i)) }
    }

    pub fn write(&self, i: usize, v: T) {
        // SAFETY: as in `read`.
        unsafe { write_volatile(self.at(i), v) }
    }
}

impl<T: Copy> Drop for MappedArray<T> {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.bytes) };
    }
}
