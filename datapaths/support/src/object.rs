//! The storage a libbpf-rs skeleton opens its object into, for a loader that keeps the
//! skeleton in the same value as that storage.
//!
//! A skeleton borrows its `OpenObject` for as long as it lives; a loader that returns one
//! value holding both needs the storage on the heap, at an address that does not move with
//! the value, and freed only after the skeleton is gone.

use libbpf_rs::OpenObject;
use std::mem::MaybeUninit;
use std::ptr::NonNull;

/// Heap storage for one `OpenObject`, freed when this is dropped. Its holder declares it
/// after every field that borrows it (fields drop in declaration order, after the holder's
/// own `Drop`), so the storage outlives the skeleton opened into it.
pub struct SkeletonStorage(NonNull<MaybeUninit<OpenObject>>);

impl SkeletonStorage {
    pub fn new() -> Self {
        SkeletonStorage(NonNull::from(Box::leak(Box::new(MaybeUninit::uninit()))))
    }

    /// The storage, to open a skeleton into.
    ///
    /// # Safety
    /// Call it once, and drop whatever borrows the result (the skeleton and the maps, links
    /// and rings taken from it) before this value.
    pub unsafe fn open_into(&self) -> &'static mut MaybeUninit<OpenObject> {
        // SAFETY: the allocation lives until Drop; the caller holds the borrow to that.
        unsafe { &mut *self.0.as_ptr() }
    }
}

impl Default for SkeletonStorage {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SkeletonStorage {
    fn drop(&mut self) {
        // SAFETY: the pointer came from Box::leak in `new` and is freed only here.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}
