//! BPF arrays (BPF_F_MMAPABLE) mapped into the shim: what the shim tells the BPF programs
//! (each flow's directive, the agent deadline) is a plain store into memory they read, not a
//! map-update syscall each.
//!
//! Each datapath keeps one directive slot per flow ([`DirectiveSlots`]): flow F in slot
//! F % len while the slot's owner is F. The shim writes a slot's fields before its owner when
//! it takes the slot, and the owner before anything else when it gives it back, so that a
//! program never applies a half-written slot to a flow (the BPF side of this protocol is
//! `datapaths/bpf/shim_channel.bpf.h`).

use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::{read_volatile, write_volatile};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use anyhow::{bail, Result};

use crate::pod::{as_bytes, Pod};

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

/// A value of a directives array.
///
/// # Safety
/// `#[repr(C)]` plain old data ([`Pod`]) whose first field is the owner's flow id (`u32`, 0:
/// free), 8-byte aligned, its size a multiple of 8, and its fields laid out in the order the
/// BPF program may see them change: [`DirectiveSlots::update`] stores them in address order,
/// each aligned 8-byte word at once (so no field is ever seen half-written), the owner last.
/// A field that must not change before others (a sequence that ends what the others start)
/// goes after them.
pub unsafe trait OwnedSlot: Pod {}

/// A flow's directive slot is held by another flow: the flow stays uncontrolled (fallback)
/// until that one gives the slot back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectiveSlotBusy {
    pub flow_id: u32,
    pub holder: u32,
    pub slots: usize,
}

impl std::fmt::Display for DirectiveSlotBusy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { flow_id, holder, slots } = self;
        write!(f, "no directive slot for flow {flow_id}: flow {holder} holds it ({slots} slots; raise --max-flows)")
    }
}

impl std::error::Error for DirectiveSlotBusy {}

/// A directives array mapped into the shim: one slot per flow, written with plain stores.
pub struct DirectiveSlots<T: OwnedSlot>(MappedArray<T>);

impl<T: OwnedSlot> DirectiveSlots<T> {
    pub fn new(array: MappedArray<T>) -> Self {
        const { assert!(std::mem::align_of::<T>() >= 8 && std::mem::size_of::<T>().is_multiple_of(8)) };
        Self(array)
    }

    /// Slots in the array.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn slot_of(&self, flow_id: u32) -> usize {
        flow_id as usize % self.0.len()
    }

    fn owner(d: &T) -> u32 {
        let b = as_bytes(d);
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Changes `flow_id`'s directive: `change` gets it as the slot holds it, or all zeros when
    /// the flow takes a free slot, and the slot gets the result. Refused if another flow holds
    /// the slot.
    pub fn update(&self, flow_id: u32, change: impl FnOnce(&mut T)) -> Result<(), DirectiveSlotBusy> {
        let i = self.slot_of(flow_id);
        let cur = self.0.read(i);
        let holder = Self::owner(&cur);
        if holder != 0 && holder != flow_id {
            return Err(DirectiveSlotBusy { flow_id, holder, slots: self.0.len() });
        }
        let mut d = if holder == flow_id { cur } else { T::default() };
        change(&mut d);
        let b = as_bytes(&d);
        let word = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let p = self.0.at(i).cast::<u8>();
        // SAFETY: in bounds of the mapping; the value is 8-byte aligned (asserted in `new`,
        // and the kernel maps array values 8-byte aligned), so each word is aligned. The BPF
        // program reads these words concurrently: atomic stores, ordered by Release.
        unsafe {
            AtomicU32::from_ptr(p.add(4).cast()).store(u32::from_ne_bytes(b[4..8].try_into().expect("4 bytes")), Ordering::Release);
            for at in (8..b.len()).step_by(8) {
                AtomicU64::from_ptr(p.add(at).cast()).store(word(at), Ordering::Release);
            }
            AtomicU32::from_ptr(p.cast()).store(flow_id, Ordering::Release);
        }
        Ok(())
    }

    /// Gives `flow_id`'s slot back (if it holds it).
    pub fn clear(&self, flow_id: u32) {
        let i = self.slot_of(flow_id);
        if Self::owner(&self.0.read(i)) == flow_id {
            // SAFETY: in bounds, aligned (see `update`).
            unsafe { AtomicU32::from_ptr(self.0.at(i).cast()).store(0, Ordering::Release) };
        }
    }

    /// `flow_id`'s directive, if it holds its slot.
    pub fn get(&self, flow_id: u32) -> Option<T> {
        let d = self.0.read(self.slot_of(flow_id));
        (Self::owner(&d) == flow_id).then_some(d)
    }
}
