//! `#[repr(C)]` mirrors of `bpf/ovs.h` (sizes asserted against the C `_Static_assert`s and
//! against the skeleton's BTF-derived types).
//!
//! Naming: a mirror is its C struct's name without `ccsw_`, in CamelCase (`ccsw_flow_key` →
//! [`FlowKey`], `ccsw_ovs_directive_slot` → [`OvsDirectiveSlot`]). A C struct whose name the
//! kernel header also declares carries the datapath in its name, so no two mirrors share one.
//! The layouts of the standard program's fold, which both datapaths' programs share, are
//! mirrored once, in `ccswitch_datapath_support::std_fold`.

use std::mem::size_of;

use ccswitch_datapath_support::mapped::OwnedSlot;
pub use ccswitch_datapath_support::pod::{as_bytes, from_bytes, from_prefix, Pod};
use ccswitch_datapath_support::std_fold::{StdAck, StdFold, StdRegs, StdReporting};

/// Largest frame a slab slot holds (`CCSW_FRAME_MAX`).
pub const FRAME_MAX: usize = 1536;

pub const EV_ESTABLISHED: u8 = 1;
pub const EV_SEGMENT: u8 = 2;
pub const EV_RESENT: u8 = 3;
pub const EV_ACK: u8 = 4;
pub const EV_CLOSED: u8 = 5;
pub const EV_UNBUFFERED: u8 = 6;
pub const EV_FOLDED: u8 = 7;

pub const FOLD_PER_RTT: u32 = 1;
pub const FOLD_PER_ACK: u32 = 2;
pub const FOLD_HOLD: u32 = 4;

pub const FAMILY_V4: u8 = 4;
pub const FAMILY_V6: u8 = 6;

pub const ST_SYN_SEEN: u8 = 1;
pub const ST_SYNACK_SEEN: u8 = 2;
pub const ST_ESTABLISHED: u8 = 3;

pub const F_UNBUFFERED: u8 = 1 << 0;
pub const F_UNCOPYABLE: u8 = 1 << 5;
pub const F_CLIENT_FIN: u8 = 1 << 1;
pub const F_SERVER_FIN: u8 = 1 << 2;
pub const F_HAVE_LAST: u8 = 1 << 3;

pub const O_MSS: u8 = 1 << 0;
pub const O_WSCALE: u8 = 1 << 1;
pub const O_SACK: u8 = 1 << 2;
pub const O_TS: u8 = 1 << 3;
pub const O_CLIENT_SHIFT: u8 = 0;
pub const O_SERVER_SHIFT: u8 = 4;

pub const VERDICT_PASSED: u8 = 0;
pub const VERDICT_REWRITTEN: u8 = 1;
pub const VERDICT_HIDDEN: u8 = 2;

pub const ACK_F_ECE: u8 = 1 << 0;
pub const ACK_F_FIN: u8 = 1 << 1;

pub const CLOSE_FIN: u32 = 1;
pub const CLOSE_RST: u32 = 2;

pub const UNBUF_RING_FULL: u32 = 1;
pub const UNBUF_TOO_LARGE: u32 = 2;
pub const UNBUF_SLAB_FULL: u32 = 3;

pub const MAX_SACK: usize = 4;

/// The flow table's regions and probes (`CCSW_FLOW_*`, see `struct ccsw_ovs_flow_slot`).
pub const FLOW_NEAR_MAX: u32 = 16384;
pub const FLOW_NEAR_PROBES: u32 = 8;
pub const FLOW_FAR_PROBES: u32 = 32;
pub const FLOW_PROBES: u32 = FLOW_NEAR_PROBES + FLOW_FAR_PROBES;
pub const SLOT_FREE: u32 = 0;
pub const SLOT_CLAIMED: u32 = 1;
pub const SLOT_LIVE: u32 = 2;

/// Where `key`'s search starts in the flow table, before the masks: `ccsw_flow_hash` of
/// `bpf/ovs.h`, which the port programs compute.
pub fn flow_hash(key: &FlowKey) -> u32 {
    // The key's ten 32-bit words in host order, multiplied in, then murmur3's finalizer.
    let mut h = as_bytes(key)
        .chunks_exact(4)
        .fold(0u32, |h, w| (h ^ u32::from_ne_bytes(w.try_into().expect("4 bytes"))).wrapping_mul(0x9E37_79B1));
    h ^= h >> 16;
    h = h.wrapping_mul(0x85EB_CA6B);
    h ^= h >> 13;
    h = h.wrapping_mul(0xC2B2_AE35);
    h ^ (h >> 16)
}

/// The slot of probe `i` of a key whose hash is `h`, in a table of `near` + `far` slots
/// (`flow_probe` of `bpf/ovs.bpf.c`).
pub fn flow_probe(h: u32, i: u32, near: u32, far: u32) -> u32 {
    if far == 0 || i < FLOW_NEAR_PROBES {
        h.wrapping_add(i) & (near - 1)
    } else {
        near + (h.wrapping_add(i - FLOW_NEAR_PROBES) & (far - 1))
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FlowKey {
    pub family: u8,
    pub _pad0: u8,
    pub server_port: u16,
    pub client_port: u16,
    pub _pad1: u16,
    pub server_addr: [u8; 16],
    pub client_addr: [u8; 16],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct OvsFlowEntry {
    pub last_seen_ns: u64,
    pub flow_id: u32,
    pub client_isn: u32,
    pub snd_nxt: u32,
    pub seen_from: u32,
    pub server_isn: u32,
    pub server_fin_end: u32,
    pub last_ack: u32,
    pub last_win_fwd: u16,
    pub last_win_orig: u16,
    pub client_mss: u16,
    pub server_mss: u16,
    pub client_wscale: u8,
    pub server_wscale: u8,
    pub state: u8,
    pub flags: u8,
    pub opts: u8,
    pub _pad0: [u8; 7],
    pub hole_end: u32,
    pub acks_folded: u32,
    pub fold: StdFold,
    pub delivered: u64,
    pub probe_ns: u64,
    pub probe_delivered: u64,
    pub probe_end: u32,
    pub rtt_us: u32,
}

/// `struct ccsw_ovs_flow_slot`: a slot of the flow table.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct OvsFlowSlot {
    pub key: FlowKey,
    pub used: u32,
    pub generation: u32,
    pub f: OvsFlowEntry,
    pub _pad1: [u8; 24],
}

/// `struct ccsw_ovs_fold_test`: the context of the fold's test program.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OvsFoldTest {
    pub state: StdFold,
    pub ack: StdAck,
    pub reporting: StdReporting,
    pub start_us: u64,
    pub reported: u32,
    pub _pad0: u32,
    pub report: StdRegs,
}

/// `struct ccsw_folded_event`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct FoldedEvent {
    pub h: EvHead,
    pub start_us: u64,
    pub ack: u32,
    pub window_bytes: u32,
    pub acks: u32,
    pub reported: u8,
    pub _pad0: [u8; 3],
    pub regs: StdRegs,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct OvsDirectiveSlot {
    pub flow_id: u32,
    pub cwnd_bytes: u32,
    pub sacked_bytes: u32,
    pub sacked_una: u32,
    pub active: u32,
    pub fold_window_pct: u32,
    pub fold_start_us: u64,
    pub fold_idle_us: u64,
    pub fold_rate: u64,
    pub fold_micros_zero_us: u64,
    pub fold_cwnd_bytes: u32,
    pub fold: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct OvsConfig {
    pub valid_until_ns: u64,
    pub copy_limit: u32,
    pub wake_gap_ns: u32,
    pub inject_count: u32,
    pub inject_next: u32,
    pub inject_ifindex: u32,
    pub _pad0: u32,
    pub _pad1: [u8; 32],
    /// On a cache line of its own (see `bpf/ovs.h`).
    pub live_flows: u32,
    pub _pad2: [u32; 15],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct OvsCpuStats {
    pub counters: [u64; 22],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct EvHead {
    pub kind: u8,
    pub _pad0: [u8; 3],
    pub flow_id: u32,
    pub ts_ns: u64,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct EstablishedEvent {
    pub h: EvHead,
    pub key: FlowKey,
    pub mss: u16,
    pub client_wscale: u8,
    pub server_wscale: u8,
    pub sack: u8,
    pub timestamps: u8,
    pub _pad0: [u8; 2],
    pub server_isn: u32,
    pub client_isn: u32,
}

/// A segment record: the frame is in slab slot `slot`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SegmentEvent {
    pub h: EvHead,
    pub seq: u32,
    pub len: u32,
    pub frame_len: u16,
    pub fin: u8,
    pub has_tsval: u8,
    pub slot: u32,
    pub tsval: u32,
    pub _pad0: u32,
}

/// The owner word of one slab slot (0: free), padded to the array's 8-byte stride.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct SlotOwner {
    pub flow_id: u32,
    pub _pad0: u32,
}

/// One slot of the frame slab.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct OvsFrameSlot {
    pub frame: [u8; FRAME_MAX],
}

/// Frames one run of the inject program sends (`CCSW_INJECT_BATCH`).
pub const INJECT_BATCH: usize = 256;

/// A frame staged for re-injection (an entry of `inject_frames`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct InjectFrame {
    pub len: u32,
    pub _pad0: u32,
    pub frame: [u8; FRAME_MAX],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ResentEvent {
    pub h: EvHead,
    pub seq: u32,
    pub len: u32,
    pub tsval: u32,
    pub has_tsval: u8,
    pub _pad0: [u8; 3],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct OvsSackBlock {
    pub start: u32,
    pub end: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct OvsAckEvent {
    pub h: EvHead,
    pub ack: u32,
    pub window_bytes: u32,
    pub payload_len: u32,
    pub flags: u8,
    pub verdict: u8,
    pub nsack: u8,
    pub _pad0: u8,
    pub sack: [OvsSackBlock; MAX_SACK],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ClosedEvent {
    pub h: EvHead,
    pub reason: u32,
    pub _pad0: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct UnbufferedEvent {
    pub h: EvHead,
    pub reason: u32,
    pub hole_end: u32,
}

const _: () = assert!(size_of::<FlowKey>() == 40);
const _: () = assert!(size_of::<OvsFlowEntry>() == 184);
const _: () = assert!(size_of::<OvsFlowSlot>() == 256);
const _: () = assert!(size_of::<OvsDirectiveSlot>() == 64);
const _: () = assert!(size_of::<OvsConfig>() == 128 && std::mem::offset_of!(OvsConfig, live_flows) == 64);
const _: () = assert!(size_of::<InjectFrame>() == 8 + FRAME_MAX);
const _: () = assert!(size_of::<OvsCpuStats>() == 176);
const _: () = assert!(size_of::<OvsFoldTest>() == 248);
const _: () = assert!(size_of::<FoldedEvent>() == 112);
const _: () = assert!(size_of::<EvHead>() == 16);
const _: () = assert!(size_of::<EstablishedEvent>() == 72);
const _: () = assert!(size_of::<SegmentEvent>() == 40);
const _: () = assert!(size_of::<OvsFrameSlot>() == FRAME_MAX);
const _: () = assert!(size_of::<SlotOwner>() == 8);
const _: () = assert!(size_of::<ResentEvent>() == 32);
const _: () = assert!(size_of::<OvsAckEvent>() == 64);
const _: () = assert!(size_of::<ClosedEvent>() == 24);
const _: () = assert!(size_of::<UnbufferedEvent>() == 24);
use crate::skel::types as btf;
const _: () = assert!(size_of::<FlowKey>() == size_of::<btf::ccsw_flow_key>());
const _: () = assert!(size_of::<OvsFlowEntry>() == size_of::<btf::ccsw_ovs_flow_entry>());
const _: () = assert!(size_of::<OvsFlowSlot>() == size_of::<btf::ccsw_ovs_flow_slot>());
const _: () = assert!(size_of::<OvsDirectiveSlot>() == size_of::<btf::ccsw_ovs_directive_slot>());
const _: () = assert!(size_of::<OvsConfig>() == size_of::<btf::ccsw_ovs_config>());
const _: () = assert!(size_of::<OvsCpuStats>() == size_of::<btf::ccsw_ovs_cpu_stats>());
const _: () = assert!(size_of::<OvsFrameSlot>() == size_of::<btf::ccsw_ovs_frame_slot>());
const _: () = assert!(size_of::<InjectFrame>() == size_of::<btf::ccsw_inject_frame>());
const _: () = assert!(size_of::<SlotOwner>() == size_of::<btf::ccsw_slot_owner>());
const _: () = assert!(size_of::<OvsFoldTest>() == size_of::<btf::ccsw_ovs_fold_test>());

// Plain old data: records and map values are read from and written as bytes
// (`from_bytes`, `from_prefix`, `as_bytes`).
unsafe impl Pod for FlowKey {}
unsafe impl Pod for OvsFlowEntry {}
unsafe impl Pod for OvsDirectiveSlot {}
// The owner first, aligned, and the fold word after the fold's fields.
unsafe impl OwnedSlot for OvsDirectiveSlot {}
unsafe impl Pod for OvsConfig {}
unsafe impl Pod for OvsCpuStats {}
unsafe impl Pod for EvHead {}
unsafe impl Pod for EstablishedEvent {}
unsafe impl Pod for SegmentEvent {}
unsafe impl Pod for ResentEvent {}
unsafe impl Pod for OvsAckEvent {}
unsafe impl Pod for ClosedEvent {}
unsafe impl Pod for UnbufferedEvent {}
unsafe impl Pod for FoldedEvent {}
unsafe impl Pod for OvsFoldTest {}
