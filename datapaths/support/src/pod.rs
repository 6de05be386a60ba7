//! Plain-old-data records shared with BPF: the `#[repr(C)]` mirrors in each datapath's
//! `abi.rs` implement [`Pod`], and these helpers read them from and write them as the bytes
//! that cross the ring buffer and the maps.

use std::mem::size_of;

/// Plain-old-data marker: any bit pattern is a valid value.
///
/// # Safety
/// Implementors must be `#[repr(C)]`, contain only integer fields and
/// arrays of them, and have no implicit padding.
pub unsafe trait Pod: Copy + Default {}

/// Decodes `T` from exactly `size_of::<T>()` bytes (unaligned read).
pub fn from_bytes<T: Pod>(bytes: &[u8]) -> Option<T> {
    if bytes.len() != size_of::<T>() {
        return None;
    }
    // SAFETY: length checked; T is Pod, so every bit pattern is valid.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// Decodes `T` from the first `size_of::<T>()` bytes (unaligned read), e.g. the head of a
/// longer record.
pub fn from_prefix<T: Pod>(bytes: &[u8]) -> Option<T> {
    if bytes.len() < size_of::<T>() {
        return None;
    }
    // SAFETY: length checked; T is Pod.
    Some(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast::<T>()) })
}

/// The bytes of a Pod value (for map updates and test-run contexts).
pub fn as_bytes<T: Pod>(v: &T) -> &[u8] {
    // SAFETY: T is Pod without padding, so all bytes are initialised.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    struct Rec {
        kind: u32,
        id: u32,
        ts_ns: u64,
    }
    unsafe impl Pod for Rec {}

    #[test]
    fn a_record_round_trips_through_its_bytes_and_only_exact_sizes_decode() {
        let r = Rec { kind: 1, id: 7, ts_ns: 42 };
        let b = as_bytes(&r);
        assert_eq!(b.len(), 16);
        assert_eq!(from_bytes::<Rec>(b), Some(r));
        assert_eq!(from_bytes::<Rec>(&b[..15]), None);
        let mut longer = b.to_vec();
        longer.push(0);
        assert_eq!(from_bytes::<Rec>(&longer), None);
        assert_eq!(from_prefix::<Rec>(&longer), Some(r));
        assert_eq!(from_prefix::<Rec>(&b[..15]), None);
    }
}
