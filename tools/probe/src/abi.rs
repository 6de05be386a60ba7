//! Rust mirrors of `bpf/probe.h`, with the same sizes asserted on both sides.

use std::mem::size_of;

pub use ccswitch_datapath_support::pod::{as_bytes, from_bytes, Pod};

/// `probe_record.flags`: the segment matched a stamp from the sender's egress.
pub const PROBE_MATCHED: u32 = 1;
/// Most segments of one GSO packet whose ends are stamped.
pub const PROBE_MAX_GSO_SEGS: u32 = 64;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ProbeEndpoint {
    /// Network order.
    pub ip: u32,
    /// Network order.
    pub port: u16,
    pub _pad: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProbeFlowKey {
    /// Network order.
    pub server_ip: u32,
    /// Network order.
    pub server_port: u16,
    /// Network order.
    pub client_port: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeSegmentKey {
    pub flow: ProbeFlowKey,
    pub seq_end: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeFlow {
    pub flow: u32,
    pub _pad: u32,
    pub segments_sent: u64,
    pub bytes_sent: u64,
    pub segments_received: u64,
    pub bytes_received: u64,
    pub unmatched: u64,
    pub first_sent_ns: u64,
    pub last_received_ns: u64,
}

/// One received data segment: the ring record and the 24-byte record of OUT.packets.bin.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeRecord {
    pub t_ns: u64,
    pub owd_us: u32,
    pub flow: u32,
    pub bytes: u32,
    pub flags: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeTcpInfo {
    pub state: u32,
    pub total_retrans: u32,
    pub bytes_retrans: u64,
    pub srtt_us: u32,
    pub min_rtt_us: u32,
    pub data_segs_out: u32,
    pub delivered: u32,
    pub bytes_acked: u64,
    pub snapshot_ns: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProbeCounters {
    pub records: u64,
    pub ring_dropped: u64,
    pub stamps_lost: u64,
    pub flows_lost: u64,
}

// SAFETY: repr(C), integer fields only, sizes asserted below (no implicit padding).
unsafe impl Pod for ProbeEndpoint {}
unsafe impl Pod for ProbeFlowKey {}
unsafe impl Pod for ProbeSegmentKey {}
unsafe impl Pod for ProbeFlow {}
unsafe impl Pod for ProbeRecord {}
unsafe impl Pod for ProbeTcpInfo {}
unsafe impl Pod for ProbeCounters {}

const _: () = assert!(size_of::<ProbeEndpoint>() == 8);
const _: () = assert!(size_of::<ProbeFlowKey>() == 8);
const _: () = assert!(size_of::<ProbeSegmentKey>() == 12);
const _: () = assert!(size_of::<ProbeFlow>() == 64);
const _: () = assert!(size_of::<ProbeRecord>() == 24);
const _: () = assert!(size_of::<ProbeTcpInfo>() == 48);
const _: () = assert!(size_of::<ProbeCounters>() == 32);

/// Name of a TCP state number (include/net/tcp_states.h), as `ss` spells it.
pub fn tcp_state_name(state: u32) -> &'static str {
    match state {
        1 => "ESTABLISHED",
        2 => "SYN_SENT",
        3 => "SYN_RECV",
        4 => "FIN_WAIT1",
        5 => "FIN_WAIT2",
        6 => "TIME_WAIT",
        7 => "CLOSE",
        8 => "CLOSE_WAIT",
        9 => "LAST_ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW_SYN_RECV",
        _ => "UNKNOWN",
    }
}
