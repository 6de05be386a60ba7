//! Loading the port programs, attaching them to a port, and the maps and ring buffer between
//! them and the shim.
//!
//! The programs (`bpf/ovs.bpf.c`) attach with TCX links owned by [`OvsDatapath`]: no
//! qdisc is created, dropping the value detaches them, and so does the death of the process
//! (the links die with their last file descriptor).
//!
//! # Re-injection
//! [`OvsDatapath::inject`] hands a stored server frame back to the kernel as if it had just
//! arrived from the server on the port: it runs the XDP program `ccsw_inject` with
//! `BPF_PROG_TEST_RUN` in live-frames mode (`BPF_F_TEST_XDP_LIVE_FRAMES`), whose `XDP_PASS`
//! frames enter the receive path of the device named by `xdp_md.ingress_ifindex`. Frames are
//! staged in the mmapable `inject_frames` array ([`OvsDatapath::queue_inject`]) and sent by
//! one run per batch ([`OvsDatapath::flush_injections`]), each repetition of the program
//! sending the next staged frame: a run costs the kernel a page pool and a memory-model
//! registration, which per frame was most of the shim's time under loss. Everything
//! that listens on the port therefore sees the frame exactly like one from the server: Open
//! vSwitch's packet socket (verified with the userspace datapath), a Linux bridge's rx handler
//! (verified), and our own ingress program, which reports it as [`OvsEvent::Resent`] because its
//! end is not beyond the highest sequence seen. No extra device or socket is needed.
//!
//! Frames are stored as they crossed the port; a server with transmit checksum offload hands
//! them over with only the pseudo-header sum in the TCP checksum field (CHECKSUM_PARTIAL), which
//! nothing would complete after injection. `inject` therefore recomputes the TCP checksum of a
//! copy before sending (a no-op for frames whose checksum was already complete).

use std::cell::Cell;
use std::ffi::CString;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::{write_volatile, NonNull};
use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use ccswitch_datapath_support::mapped::{DirectiveSlots, MappedArray};
use ccswitch_datapath_support::object::SkeletonStorage;
pub use ccswitch_datapath_support::mapped::DirectiveSlotBusy;
use ccswitch_datapath_support::ring::EventRing;
use ccswitch_datapath_support::wait::{Waiter, Woken};
use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{AsRawLibbpf, Link, MapCore, MapFlags, OpenObject};

use crate::abi::{self, from_prefix};
use crate::events::{decode, key_from_raw, key_to_raw, FlowAddrs, FoldDirective, FrameSlot, OvsDirective, OvsEvent};
use crate::skel::{OvsSkel, OvsSkelBuilder};

pub use crate::abi::FRAME_MAX;

/// Bytes of the input each inject repetition starts from (a minimal Ethernet frame).
const INJECT_SEED_BYTES: usize = 64;

/// Name prefix of every port program (what [`detach_port`] looks for).
pub const PROG_PREFIX: &str = "ccsw_";
/// Return value of a port program that lets the frame continue (`TCX_NEXT`).
pub const RET_NEXT: i32 = -1;
/// Return value of a port program that drops the frame (`TCX_DROP`).
pub const RET_DROP: i32 = 2;

/// How to attach.
#[derive(Debug, Clone)]
pub struct AttachOptions {
    /// The bridge port facing the server (host side of its veth/tap).
    pub ifname: String,
    /// Capacity of the flow table (flows, half-open ones included: a full table refuses new
    /// flows, counted in `table_full`). The table has more than twice as many slots of 256
    /// bytes ([`AttachOptions::flow_regions`]), so that a SYN seldom finds every one of its
    /// key's probes taken before it is full (refused, counted alike), and as many directive
    /// slots of 64.
    pub max_flows: u32,
    /// Ring buffer size in bytes (power of two, multiple of the page size).
    pub ring_bytes: u32,
    /// Slots of the frame slab, [`FRAME_MAX`] bytes each: one per server frame not yet
    /// acknowledged, over all flows (see [`DEFAULT_SLAB_SLOTS`]).
    pub slab_slots: u32,
}

/// Default size of the frame slab: 65,536 slots of 1,536 bytes, 96 MiB. A flow holds one
/// slot per unacknowledged segment, about its window over the MSS: 1,000 flows with windows
/// of 64 segments (about 93 kB at a 1,448-byte MSS), or 100 flows with 650-segment windows.
/// A flow that finds no free slot is left to the server's TCP (unbuffered, counted).
pub const DEFAULT_SLAB_SLOTS: u32 = 65_536;

impl AttachOptions {
    /// Slots of the flow table's near and far regions (see `struct ccsw_ovs_flow_slot` in
    /// `bpf/ovs.h`): a power of two at least twice `max_flows`, so that a key's probes are
    /// seldom all taken even with `max_flows` flows, in the near region up to its size limit,
    /// else in the far one after a near region of that limit.
    pub fn flow_regions(&self) -> (u32, u32) {
        let slots = (self.max_flows.max(1) * 2).next_power_of_two();
        if slots <= abi::FLOW_NEAR_MAX {
            (slots, 0)
        } else {
            (abi::FLOW_NEAR_MAX, slots)
        }
    }
}

impl Default for AttachOptions {
    fn default() -> Self {
        Self {
            ifname: String::new(),
            max_flows: 65_536,
            ring_bytes: 16 << 20,
            slab_slots: DEFAULT_SLAB_SLOTS,
        }
    }
}

/// Counters of the port programs, summed over CPUs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OvsStats {
    pub packets: u64,
    pub malformed: u64,
    pub syns: u64,
    pub established: u64,
    pub closed: u64,
    pub segments: u64,
    pub resent: u64,
    pub acks: u64,
    pub acks_rewritten: u64,
    pub dupacks_hidden: u64,
    pub sack_stripped: u64,
    pub ece_cleared: u64,
    pub out_of_window: u64,
    pub wscale_capped: u64,
    pub ring_drops: u64,
    pub unbuffered: u64,
    pub dupacks_opened: u64,
    /// Frames not copied because the slab had no free slot (each left its flow unbuffered).
    pub slab_full: u64,
    /// SYNs of new flows the full flow table refused (those flows stay with the server's TCP).
    pub table_full: u64,
    /// ACKs the egress program folded instead of sending them up.
    pub acks_folded: u64,
    /// Reports of the fold (FOLDED records that report).
    pub folded_reports: u64,
    /// The shim's injected copies the ingress program recognised (reported, not copied).
    pub copies_seen: u64,
}

/// Run-time statistics of one attached program (kernel BPF statistics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgRunStats {
    pub name: String,
    pub id: u32,
    pub run_cnt: u64,
    pub run_time_ns: u64,
}

/// Which port program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Port {
    /// Frames from the server.
    Ingress,
    /// Frames toward the server.
    Egress,
}

/// Result of running a port program on a frame with `BPF_PROG_TEST_RUN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRun {
    /// [`RET_NEXT`] or [`RET_DROP`].
    pub ret: i32,
    /// The frame as the program left it.
    pub frame: Vec<u8>,
}

/// Handshake progress of a flow-table entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowPhase {
    SynSeen,
    SynAckSeen,
    Established,
}

/// TCP options one side put in its SYN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SynOptions {
    pub mss: Option<u16>,
    /// As sent, capped at 14.
    pub wscale: Option<u8>,
    pub sack_permitted: bool,
    pub timestamps: bool,
}

/// One flow-table entry, decoded (for tests and diagnostics).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowTableEntry {
    pub phase: FlowPhase,
    /// 0 until established.
    pub flow_id: u32,
    pub last_seen_ns: u64,
    pub client_isn: u32,
    pub server_isn: u32,
    /// End of the highest server data seen (FIN counted).
    pub snd_nxt: u32,
    pub client: SynOptions,
    pub server: SynOptions,
    /// Shift applied to the client's window field once established (0 unless both sides
    /// scale).
    pub client_wscale: u8,
    pub server_wscale: u8,
    pub unbuffered: bool,
    pub client_fin: bool,
    pub server_fin: bool,
    /// Acknowledgement number, forwarded window field and original window field of the last
    /// ACK that went on to the server, if any.
    pub last_forwarded: Option<(u32, u16, u16)>,
}

fn syn_options(bits: u8, mss: u16, wscale: u8) -> SynOptions {
    SynOptions {
        mss: (bits & abi::O_MSS != 0).then_some(mss),
        wscale: (bits & abi::O_WSCALE != 0).then_some(wscale),
        sack_permitted: bits & abi::O_SACK != 0,
        timestamps: bits & abi::O_TS != 0,
    }
}

fn flow_from_raw(f: &abi::OvsFlowEntry) -> Option<FlowTableEntry> {
    let phase = match f.state {
        abi::ST_SYN_SEEN => FlowPhase::SynSeen,
        abi::ST_SYNACK_SEEN => FlowPhase::SynAckSeen,
        abi::ST_ESTABLISHED => FlowPhase::Established,
        _ => return None,
    };
    let copts = (f.opts >> abi::O_CLIENT_SHIFT) & 0xf;
    let sopts = (f.opts >> abi::O_SERVER_SHIFT) & 0xf;
    Some(FlowTableEntry {
        phase,
        flow_id: f.flow_id,
        last_seen_ns: f.last_seen_ns,
        client_isn: f.client_isn,
        server_isn: f.server_isn,
        snd_nxt: f.snd_nxt,
        client: syn_options(copts, f.client_mss, f.client_wscale),
        server: syn_options(sopts, f.server_mss, f.server_wscale),
        client_wscale: f.client_wscale,
        server_wscale: f.server_wscale,
        unbuffered: f.flags & abi::F_UNBUFFERED != 0,
        client_fin: f.flags & abi::F_CLIENT_FIN != 0,
        server_fin: f.flags & abi::F_SERVER_FIN != 0,
        last_forwarded: (f.flags & abi::F_HAVE_LAST != 0).then_some((
            f.last_ack,
            f.last_win_fwd,
            f.last_win_orig,
        )),
    })
}

fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The one's-complement sum of `bytes` as big-endian 16-bit words (an odd last byte padded
/// with zero), folded to 16 bits. Summed four bytes at a time as little-endian words, which
/// gives the same sum byte-swapped (RFC 1071, 2(B)): a retransmission's checksum was 5% of
/// the shim's samples when summed by pairs of bytes.
fn sum_be16(bytes: &[u8]) -> u64 {
    let mut sum = 0u64;
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(u32::from_le_bytes([w[0], w[1], w[2], w[3]]));
    }
    let mut tail = [0u8; 4];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    sum += u64::from(u32::from_le_bytes(tail));
    u64::from(fold(sum).swap_bytes())
}

/// Recomputes the TCP checksum of an Ethernet/IPv4|IPv6/TCP frame in place (see the module
/// docs on why). Returns false, leaving the frame alone, if it is not such a frame or its
/// lengths do not fit.
pub fn complete_tcp_checksum(frame: &mut [u8]) -> bool {
    let Some(TcpSegment { offset, len, pseudo_sum }) = tcp_segment(frame) else { return false };
    let seg = &mut frame[offset..offset + len];
    seg[16] = 0;
    seg[17] = 0;
    let c = !fold(pseudo_sum + sum_be16(seg));
    seg[16..18].copy_from_slice(&c.to_be_bytes());
    true
}

/// Where the TCP segment of an Ethernet/IPv4|IPv6 frame lies, and its pseudo-header sum.
struct TcpSegment {
    offset: usize,
    len: usize,
    pseudo_sum: u64,
}

/// The TCP segment of an Ethernet/IPv4|IPv6 frame, or None if the frame is not TCP or its
/// lengths do not fit.
fn tcp_segment(frame: &[u8]) -> Option<TcpSegment> {
    match u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]) {
        0x0800 => {
            let ip = frame.get(14..34)?;
            let ihl = usize::from(ip[0] & 0xf) * 4;
            let tot = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            if ip[0] >> 4 != 4 || ip[9] != 6 || ihl < 20 || tot < ihl + 20 || 14 + tot > frame.len() {
                return None;
            }
            let len = tot - ihl;
            Some(TcpSegment { offset: 14 + ihl, len, pseudo_sum: sum_be16(&ip[12..20]) + 6 + len as u64 })
        }
        0x86dd => {
            let ip = frame.get(14..54)?;
            let len = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if ip[0] >> 4 != 6 || ip[6] != 6 || len < 20 || 54 + len > frame.len() {
                return None;
            }
            Some(TcpSegment { offset: 54, len, pseudo_sum: sum_be16(&ip[8..40]) + 6 + len as u64 })
        }
        _ => None,
    }
}

/// Raises the TCP timestamp value (RFC 7323) of an Ethernet/IPv4|IPv6/TCP frame in place to
/// `floor` if it is older (serial arithmetic); the checksum is left to the caller. Returns
/// whether the value changed. See `SenderFlow::tsval_floor` for why a copy needs it.
pub fn raise_tcp_tsval(frame: &mut [u8], floor: u32) -> bool {
    let Some(TcpSegment { offset, len, .. }) = tcp_segment(frame) else { return false };
    let seg = &mut frame[offset..offset + len];
    let doff = usize::from(seg[12] >> 4) * 4;
    if doff < 20 || doff > seg.len() {
        return false;
    }
    let mut i = 20;
    while i < doff {
        match seg[i] {
            0 => return false,
            1 => i += 1,
            kind => {
                let opt_len = usize::from(seg.get(i + 1).copied().unwrap_or(0));
                if opt_len < 2 || i + opt_len > doff {
                    return false;
                }
                if kind == 8 && opt_len == 10 {
                    let at = i + 2..i + 6;
                    let tsval = u32::from_be_bytes(seg[at.clone()].try_into().expect("4 bytes"));
                    if floor.wrapping_sub(tsval) as i32 <= 0 {
                        return false;
                    }
                    seg[at].copy_from_slice(&floor.to_be_bytes());
                    return true;
                }
                i += opt_len;
            }
        }
    }
    false
}

/// CLOCK_MONOTONIC now, nanoseconds: the clock of the programs' timestamps and of
/// [`OvsDatapath::set_valid_until`].
pub use ccswitch_ccp::session::monotonic_now_ns;

fn ifindex(ifname: &str) -> Result<u32> {
    let c = CString::new(ifname).context("interface name")?;
    // SAFETY: NUL-terminated string.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        bail!(
            "no interface {ifname:?}: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(idx)
}

fn prog_info(fd: RawFd) -> Result<libbpf_sys::bpf_prog_info> {
    // SAFETY: zeroed bpf_prog_info is valid; the kernel fills at most `len` bytes.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd, &mut info, &mut len) };
    if rc < 0 {
        bail!(
            "bpf_prog_get_info_by_fd: {}",
            std::io::Error::from_raw_os_error(-rc)
        );
    }
    Ok(info)
}

fn c_name(name: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The port's flow table (see `struct ccsw_ovs_flow_slot` in `bpf/ovs.h`), mapped, and its
/// regions' slots.
struct FlowTable {
    slots: MappedArray<abi::OvsFlowSlot>,
    near: u32,
    far: u32,
}

impl FlowTable {
    /// Slot `i`'s state word, shared with the port programs.
    fn used(&self, i: usize) -> &AtomicU32 {
        // SAFETY: in bounds of the mapping, which lives as long as `self`; aligned (slots are
        // 256 bytes, `used` at offset 40); the port programs change it only atomically.
        unsafe { AtomicU32::from_ptr(&raw mut (*self.slots.at(i)).used) }
    }

    /// A copy of slot `i` if it is live. The port programs may write the entry meanwhile:
    /// fields are each as they were at some moment of the read.
    fn live(&self, i: usize) -> Option<abi::OvsFlowSlot> {
        if self.used(i).load(Ordering::Acquire) != abi::SLOT_LIVE {
            return None;
        }
        // SAFETY: in bounds; plain old data, read once.
        Some(unsafe { std::ptr::read_volatile(self.slots.at(i)) })
    }

    /// `key`'s slot and a copy of it, searched as the port programs search: each live probe's
    /// key is compared in place, and only the slot found is copied.
    fn find(&self, key: &abi::FlowKey) -> Option<(usize, abi::OvsFlowSlot)> {
        let h = abi::flow_hash(key);
        (0..abi::FLOW_PROBES).map(|i| abi::flow_probe(h, i, self.near, self.far) as usize).find_map(|i| {
            if self.used(i).load(Ordering::Acquire) != abi::SLOT_LIVE {
                return None;
            }
            // SAFETY: in bounds; plain old data, read once.
            let probed = unsafe { std::ptr::read_volatile(&raw const (*self.slots.at(i)).key) };
            (probed == *key).then(|| self.live(i).map(|s| (i, s))).flatten()
        })
    }

    /// Frees live slot `i`, once: here or by the port closing the flow, whichever wins the
    /// swap (flow_free in bpf/ovs.bpf.c), which counts the entry out of `live_flows`.
    fn free(&self, i: usize, live_flows: &AtomicU32) {
        if self.used(i).compare_exchange(abi::SLOT_LIVE, abi::SLOT_FREE, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            live_flows.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// What `load_into` builds.
type Loaded = (
    OvsSkel<'static>,
    (EventRing<OvsEvent>, Waiter),
    FlowTable,
    DirectiveSlots<abi::OvsDirectiveSlot>,
    MappedArray<abi::OvsConfig>,
    MappedArray<abi::OvsFrameSlot>,
    MappedArray<abi::SlotOwner>,
    MappedArray<abi::InjectFrame>,
);

pub struct OvsDatapath {
    // Field order is drop order: links first (detaching), then the ring buffer, the
    // skeleton, and last the storage the skeleton borrows.
    links: Vec<Link>,
    ring: EventRing<OvsEvent>,
    /// Holds the ring's descriptor: what the shim sleeps on.
    waiter: Waiter,
    skel: OvsSkel<'static>,
    stats_fd: Option<OwnedFd>,
    ifindex: Option<u32>,
    /// The flow table, mapped: the shim reads entries and frees slots in place.
    flows: FlowTable,
    /// The directives array and the config, mapped: writing them is a store, not a syscall.
    directives: DirectiveSlots<abi::OvsDirectiveSlot>,
    conf: MappedArray<abi::OvsConfig>,
    /// The frame slab, read in place, and its owner words (0: free), which the shim zeroes
    /// to give a slot back (see `bpf/ovs.bpf.c` on why the two sides never race).
    slab: MappedArray<abi::OvsFrameSlot>,
    slab_owner: MappedArray<abi::SlotOwner>,
    /// Frames staged for the next inject run, and how many.
    inject_frames: MappedArray<abi::InjectFrame>,
    inject_staged: Cell<usize>,
    _object: SkeletonStorage,
}

impl OvsDatapath {
    /// Load the programs and attach them to `opts.ifname` (TCX links owned by this value:
    /// dropping it detaches them, and so does the process's death). Kernel run-time
    /// statistics are enabled while it lives (see [`OvsDatapath::prog_stats`]).
    pub fn attach(opts: AttachOptions) -> Result<Self> {
        let idx = ifindex(&opts.ifname)?;
        let mut dp = Self::load_detached(&opts)?;
        // SAFETY: plain syscall wrapper; returns an fd we own or a negative errno.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd >= 0 {
            // SAFETY: fresh fd owned by nobody else.
            dp.stats_fd = Some(unsafe { OwnedFd::from_raw_fd(fd) });
        } else {
            tracing::warn!(
                "BPF run-time statistics unavailable: {}",
                std::io::Error::from_raw_os_error(-fd)
            );
        }
        for (prog, what) in [
            (dp.skel.progs.ccsw_ingress.as_libbpf_object(), "ingress"),
            (dp.skel.progs.ccsw_egress.as_libbpf_object(), "egress"),
        ] {
            let tcx = libbpf_sys::bpf_tcx_opts {
                sz: size_of::<libbpf_sys::bpf_tcx_opts>() as _,
                ..Default::default()
            };
            // SAFETY: the program belongs to the loaded skeleton, which outlives the link.
            let link =
                unsafe { libbpf_sys::bpf_program__attach_tcx(prog.as_ptr(), idx as i32, &tcx) };
            let Some(link) = NonNull::new(link) else {
                bail!(
                    "attaching the {what} program to {} with TCX: {}",
                    opts.ifname,
                    std::io::Error::last_os_error()
                );
            };
            // SAFETY: libbpf handed us ownership of the link.
            dp.links.push(unsafe { Link::from_ptr(link) });
        }
        dp.ifindex = Some(idx);
        // SAFETY: in bounds; one aligned 32-bit store, before any inject run.
        unsafe { write_volatile(&raw mut (*dp.conf.at(0)).inject_ifindex, idx) };
        // Keep the inject program in the kernel's XDP dispatcher (see ccsw_inject): attached
        // to the loopback device, where it passes everything. Without it every inject run
        // waits for two RCU grace periods.
        match ifindex("lo") {
            Ok(lo) => {
                let prog = dp.skel.progs.ccsw_inject.as_libbpf_object();
                // SAFETY: the program belongs to the loaded skeleton, which outlives the link.
                let link = unsafe { libbpf_sys::bpf_program__attach_xdp(prog.as_ptr(), lo as i32) };
                match NonNull::new(link) {
                    // SAFETY: libbpf handed us ownership of the link.
                    Some(link) => dp.links.push(unsafe { Link::from_ptr(link) }),
                    None => tracing::warn!(
                        "cannot keep the inject program attached to lo (each retransmission batch will wait for RCU): {}",
                        std::io::Error::last_os_error()
                    ),
                }
            }
            Err(e) => tracing::warn!(error = %e, "no loopback device: each retransmission batch will wait for RCU"),
        }
        Ok(dp)
    }

    /// Load the programs and create the maps without attaching anything (tests run the
    /// programs with [`OvsDatapath::test_run`]; [`OvsDatapath::inject`] needs a port).
    pub fn load_detached(opts: &AttachOptions) -> Result<Self> {
        if !opts.ring_bytes.is_power_of_two() || opts.ring_bytes < 4096 {
            bail!(
                "ring_bytes must be a power of two of at least a page: {}",
                opts.ring_bytes
            );
        }
        if opts.max_flows == 0 || opts.max_flows > 1 << 26 {
            bail!("max_flows must be between 1 and 2^26: {}", opts.max_flows);
        }
        if opts.slab_slots == 0 {
            bail!("slab_slots must be positive");
        }
        let object = SkeletonStorage::new();
        // SAFETY: what borrows it either goes into the datapath, declared before it, or is
        // dropped inside load_into when that fails.
        let storage = unsafe { object.open_into() };
        let (skel, (ring, waiter), flows, directives, conf, slab, slab_owner, inject_frames) =
            Self::load_into(storage, opts)?;
        Ok(OvsDatapath {
            links: Vec::new(),
            ring,
            waiter,
            skel,
            stats_fd: None,
            ifindex: None,
            flows,
            directives,
            conf,
            slab,
            slab_owner,
            inject_frames,
            inject_staged: Cell::new(0),
            _object: object,
        })
    }

    fn load_into(
        storage: &'static mut MaybeUninit<OpenObject>,
        opts: &AttachOptions,
    ) -> Result<Loaded> {
        let mut open = OvsSkelBuilder::default()
            .open(storage)
            .context("opening the ovs BPF object")?;
        let (near, far) = opts.flow_regions();
        open.maps
            .flows
            .set_max_entries(near + far)
            .context("flows size")?;
        // One directive slot per flow slot, at its index (see `directives` in bpf/ovs.bpf.c).
        open.maps
            .directives
            .set_max_entries(near + far)
            .context("directives size")?;
        open.maps
            .events
            .set_max_entries(opts.ring_bytes)
            .context("ring buffer size")?;
        open.maps
            .slab
            .set_max_entries(opts.slab_slots)
            .context("slab size")?;
        open.maps
            .slab_owner
            .set_max_entries(opts.slab_slots)
            .context("slab owners size")?;
        let rodata = open.maps.rodata_data.as_deref_mut().context("BPF object without .rodata")?;
        rodata.ccsw_max_flows = opts.max_flows;
        rodata.ccsw_flow_near_slots = near;
        rodata.ccsw_flow_far_slots = far;
        rodata.ccsw_flow_slots = near + far;
        // Flow ids are generation * slots + index, generation from 1 (never 0), within 32 bits.
        rodata.ccsw_flow_generations = (u32::MAX - (near + far - 1)) / (near + far);
        rodata.ccsw_slab_slots = opts.slab_slots;
        let skel = open
            .load()
            .context("loading the ovs BPF programs (verifier)")?;

        let ring = EventRing::new(&skel.maps.events, decode)?;
        let waiter = Waiter::new(&[ring.epoll_fd()]).context("waiting on the ring buffer")?;
        let flows = FlowTable {
            slots: MappedArray::new(skel.maps.flows.as_fd(), (near + far) as usize).context("mapping the flow table")?,
            near,
            far,
        };
        let directives = DirectiveSlots::new(MappedArray::new(skel.maps.directives.as_fd(), (near + far) as usize).context("mapping the directives")?);
        let conf = MappedArray::new(skel.maps.conf.as_fd(), 1).context("mapping the config")?;
        let slots = opts.slab_slots as usize;
        let slab = MappedArray::new(skel.maps.slab.as_fd(), slots).context("mapping the frame slab")?;
        let slab_owner = MappedArray::new(skel.maps.slab_owner.as_fd(), slots).context("mapping the slab owners")?;
        let inject_frames = MappedArray::new(skel.maps.inject_frames.as_fd(), abi::INJECT_BATCH).context("mapping the inject staging")?;
        Ok((skel, (ring, waiter), flows, directives, conf, slab, slab_owner, inject_frames))
    }

    /// The frame in `slot`, read in place from the slab; `None` for a slot beyond the slab or
    /// a length beyond [`FRAME_MAX`]. Valid while the caller owns the slot (from its
    /// [`OvsEvent::Segment`] until [`OvsDatapath::free_frames`]).
    pub fn frame(&self, slot: &FrameSlot) -> Option<&[u8]> {
        let (i, n) = (slot.index as usize, slot.len as usize);
        if i >= self.slab.len() || n > FRAME_MAX {
            return None;
        }
        // SAFETY: in bounds of the mapping; the port program writes a slot only after taking
        // it from owner word 0, and the caller owns this one, so nothing writes it meanwhile.
        Some(unsafe { std::slice::from_raw_parts(self.slab.at(i).cast::<u8>(), n) })
    }

    /// Give slab slots back: after this, the port program may overwrite them. Indices beyond
    /// the slab are ignored.
    pub fn free_frames(&self, slots: &[u32]) {
        // Every read of these frames happens before the stores that free them.
        fence(Ordering::Release);
        for &i in slots {
            if (i as usize) < self.slab_owner.len() {
                // SAFETY: in bounds; one aligned 32-bit store.
                unsafe { write_volatile(&raw mut (*self.slab_owner.at(i as usize)).flow_id, 0) };
            }
        }
    }

    /// Slab slots in use now (owner word not 0): taken by the port program and not yet given
    /// back. For diagnostics and leak checks; reads every owner word.
    pub fn slab_in_use(&self) -> usize {
        (0..self.slab_owner.len()).filter(|&i| self.slab_owner.read(i).flow_id != 0).count()
    }

    /// Slots in the slab.
    pub fn slab_slots(&self) -> usize {
        self.slab.len()
    }

    /// Deliver pending records to `f`, waiting at most `timeout` for the first.
    pub fn poll(&mut self, timeout: Duration, f: impl FnMut(OvsEvent)) -> Result<()> {
        self.ring.poll(timeout, f)
    }

    /// Sleeps until the ring buffer wakes the shim, `extra` is readable, or `timeout` passes.
    pub fn wait(&self, extra: Option<RawFd>, timeout: Duration) -> Woken {
        self.waiter.wait(extra, timeout)
    }

    /// Records the ring buffer delivered that could not be decoded (unknown kind, wrong size).
    pub fn records_malformed(&self) -> u64 {
        self.ring.malformed()
    }

    /// Sets `flow_id`'s directive (see [`DirectiveSlots`]); [`DirectiveSlotBusy`] if another
    /// flow holds its slot.
    ///
    /// The slot is flow_id's flow slot's: a holder that no longer lives in that flow slot is a
    /// flow gone from the table whose directive nobody cleared (its CLOSED record lost with a
    /// full ring, say); it is cleared and the slot taken. So only a write for a flow that is
    /// itself gone can be refused.
    pub fn set_directive(&self, flow_id: u32, directive: &OvsDirective) -> Result<()> {
        let write = |d: &mut abi::OvsDirectiveSlot| {
            d.cwnd_bytes = directive.cwnd_bytes;
            d.sacked_bytes = directive.sacked_bytes;
            d.sacked_una = directive.sacked_una;
            d.active = directive.active as u32;
            FoldDirective::write(directive.fold, d);
        };
        match self.directives.update(flow_id, write) {
            Err(busy) if !self.flow_id_live(busy.holder) => {
                self.directives.clear(busy.holder);
                self.directives.update(flow_id, write)?;
            }
            r => r?,
        }
        Ok(())
    }

    /// Whether flow `flow_id` is live in the flow table (in the slot its id names).
    fn flow_id_live(&self, flow_id: u32) -> bool {
        let slot = flow_id as usize % self.flows.slots.len();
        self.flows.live(slot).is_some_and(|s| s.f.flow_id == flow_id)
    }

    /// Gives `flow_id`'s directive slot back; clearing a directive that does not exist is not an
    /// error.
    pub fn clear_directive(&self, flow_id: u32) -> Result<()> {
        self.directives.clear(flow_id);
        Ok(())
    }

    /// The directive of `flow_id` as the egress program reads it.
    pub fn directive(&self, flow_id: u32) -> Option<OvsDirective> {
        self.directives.get(flow_id).map(|c| OvsDirective {
            cwnd_bytes: c.cwnd_bytes,
            sacked_bytes: c.sacked_bytes,
            sacked_una: c.sacked_una,
            active: c.active != 0,
            fold: FoldDirective::read(&c),
        })
    }

    /// The egress program controls no flow once CLOCK_MONOTONIC passes this (ns). 0 (the
    /// value after loading) means no flow is controlled at all: control needs
    /// `now < deadline`, so the shim must keep pushing the deadline forward while the agent
    /// answers, and the port fails open when it stops. See [`monotonic_now_ns`].
    pub fn set_valid_until(&self, deadline_ns: u64) -> Result<()> {
        // SAFETY: in bounds; one aligned 64-bit store.
        unsafe { write_volatile(&raw mut (*self.conf.at(0)).valid_until_ns, deadline_ns) };
        Ok(())
    }

    /// Frames longer than this are not copied (the flow becomes unbuffered); clamped to
    /// [`FRAME_MAX`]. 0 restores the default ([`FRAME_MAX`]).
    pub fn set_copy_limit(&self, bytes: u32) -> Result<()> {
        // SAFETY: in bounds; one aligned 32-bit store.
        unsafe { write_volatile(&raw mut (*self.conf.at(0)).copy_limit, bytes) };
        Ok(())
    }

    /// Urgent records force a wake-up of the shim at most once per `ns` (see `wake_flags` in
    /// `bpf/ovs.bpf.c`); 0: whenever the shim has read the ring since the last one.
    pub fn set_wake_gap(&self, ns: u32) -> Result<()> {
        // SAFETY: in bounds; one aligned 32-bit store.
        unsafe { write_volatile(&raw mut (*self.conf.at(0)).wake_gap_ns, ns) };
        Ok(())
    }

    /// Forget a flow (idle expiry). Forgetting an unknown flow is not an error.
    pub fn remove_flow(&self, key: &FlowAddrs) -> Result<()> {
        if let Some((slot, _)) = self.flows.find(&key_to_raw(key)) {
            self.flows.free(slot, self.live_flows());
        }
        Ok(())
    }

    /// The count of live entries the port programs keep (at most --max-flows).
    fn live_flows(&self) -> &AtomicU32 {
        // SAFETY: in bounds of the config's mapping, which lives as long as `self`; aligned;
        // the port programs change it only atomically.
        unsafe { AtomicU32::from_ptr(&raw mut (*self.conf.at(0)).live_flows) }
    }

    /// The flow-table entry of `key`, decoded.
    pub fn flow(&self, key: &FlowAddrs) -> Option<FlowTableEntry> {
        flow_from_raw(&self.flows.find(&key_to_raw(key))?.1.f)
    }

    /// Every flow-table entry, decoded.
    pub fn flows(&self) -> Vec<(FlowAddrs, FlowTableEntry)> {
        (0..self.flows.slots.len())
            .filter_map(|i| {
                let s = self.flows.live(i)?;
                Some((key_from_raw(&s.key)?, flow_from_raw(&s.f)?))
            })
            .collect()
    }

    /// Remove the half-open entries (handshake not completed) last seen more than
    /// `older_than_ns` before `now_ns` (bpf_ktime_get_ns's clock): the table does not evict,
    /// so SYNs that never complete (a scan, a flood) would otherwise hold it full. It reads
    /// the whole table: call it when the table has refused flows, not on a timer.
    pub fn expire_half_open(&self, older_than_ns: u64, now_ns: u64) -> usize {
        (0..self.flows.slots.len())
            .filter(|&i| {
                let Some(f) = self.flows.live(i).and_then(|s| flow_from_raw(&s.f)) else { return false };
                let expired = f.phase != FlowPhase::Established && now_ns.saturating_sub(f.last_seen_ns) > older_than_ns;
                if expired {
                    self.flows.free(i, self.live_flows());
                }
                expired
            })
            .count()
    }

    /// Slots of the flow table, near and far regions together; as many directive slots.
    pub fn flow_slots(&self) -> usize {
        self.flows.slots.len()
    }

    /// The index of `key`'s slot in the flow table: its flow's id modulo [`Self::flow_slots`].
    pub fn flow_slot_of(&self, key: &FlowAddrs) -> Option<usize> {
        self.flows.find(&key_to_raw(key)).map(|(i, _)| i)
    }

    /// Number of entries in the flow table, half-open ones included.
    pub fn flow_count(&self) -> usize {
        (0..self.flows.slots.len()).filter(|&i| self.flows.used(i).load(Ordering::Relaxed) == abi::SLOT_LIVE).count()
    }

    /// [`OvsDatapath::inject`] the frame in a slab slot the caller owns.
    pub fn inject_slot(&self, slot: &FrameSlot) -> Result<()> {
        self.queue_inject_slot(slot, None)?;
        self.flush_injections().map(|_| ())
    }

    /// [`OvsDatapath::queue_inject`] the frame in a slab slot the caller owns, its timestamp
    /// value raised to `tsval_floor` if older ([`raise_tcp_tsval`]).
    pub fn queue_inject_slot(&self, slot: &FrameSlot, tsval_floor: Option<u32>) -> Result<()> {
        let frame = self.frame(slot).with_context(|| format!("no frame in slab slot {slot:?}"))?;
        self.stage_injection(frame, tsval_floor)
    }

    /// Send `frame` (an Ethernet frame the server sent earlier) on toward the client, as if
    /// the server had sent it again (see the module docs), at once. Needs an attached datapath.
    pub fn inject(&self, frame: &[u8]) -> Result<()> {
        self.queue_inject(frame)?;
        self.flush_injections().map(|_| ())
    }

    /// Stage `frame` for the next [`OvsDatapath::flush_injections`] (which runs by itself
    /// once a batch is full). The frame is copied, its TCP checksum completed in the copy.
    pub fn queue_inject(&self, frame: &[u8]) -> Result<()> {
        self.stage_injection(frame, None)
    }

    /// [`queue_inject`](Self::queue_inject), the copy's TCP timestamp value raised to
    /// `tsval_floor` if it is older ([`raise_tcp_tsval`]).
    fn stage_injection(&self, frame: &[u8], tsval_floor: Option<u32>) -> Result<()> {
        if self.ifindex.is_none() {
            bail!("inject needs a datapath attached to a port");
        }
        if frame.len() < 14 || frame.len() > FRAME_MAX {
            bail!("cannot inject a frame of {} bytes", frame.len());
        }
        if self.inject_staged.get() >= self.inject_frames.len() {
            self.flush_injections()?;
        }
        let i = self.inject_staged.get();
        let e = self.inject_frames.at(i);
        // SAFETY: in bounds of the mapping; the inject program reads entries only during a
        // run, which this thread starts and waits for (flush_injections), so nothing reads
        // this entry while it is written.
        unsafe {
            let buf = &mut (&mut (*e).frame)[..frame.len()];
            buf.copy_from_slice(frame);
            if let Some(floor) = tsval_floor {
                raise_tcp_tsval(buf, floor);
            }
            complete_tcp_checksum(buf);
            write_volatile(&raw mut (*e).len, frame.len() as u32);
        }
        self.inject_staged.set(i + 1);
        Ok(())
    }

    /// Send every staged frame with one run of the inject program; returns how many were
    /// staged (all lost if it fails).
    pub fn flush_injections(&self) -> Result<usize> {
        let n = self.inject_staged.replace(0);
        if n == 0 {
            return Ok(0);
        }
        let idx = self.ifindex.context("inject needs a datapath attached to a port")?;
        // SAFETY: in bounds; aligned 32-bit stores read by the inject program during the run.
        unsafe {
            write_volatile(&raw mut (*self.conf.at(0)).inject_next, 0);
            write_volatile(&raw mut (*self.conf.at(0)).inject_count, n as u32);
        }
        // Every repetition starts from this input and becomes one staged frame: the program
        // grows it to the frame's length (bpf_xdp_adjust_tail). The kernel copies the input
        // into every page of the run's page pool, one page per frame, so a frame-sized input
        // cost a 1.5 KiB copy into a cold page per retransmission (7% of the shim's samples
        // at 10k flows); a minimal Ethernet frame costs one cache line.
        let data = [0u8; INJECT_SEED_BYTES];
        let mut ctx = libbpf_sys::xdp_md {
            data: 0,
            data_end: data.len() as u32,
            data_meta: 0,
            ingress_ifindex: idx,
            rx_queue_index: 0,
            egress_ifindex: 0,
        };
        // SAFETY: zeroed opts with sz set is the documented way to build them.
        let mut o: libbpf_sys::bpf_test_run_opts = unsafe { std::mem::zeroed() };
        o.sz = size_of::<libbpf_sys::bpf_test_run_opts>() as _;
        o.data_in = data.as_ptr().cast();
        o.data_size_in = data.len() as u32;
        o.ctx_in = (&mut ctx as *mut libbpf_sys::xdp_md).cast();
        o.ctx_size_in = size_of::<libbpf_sys::xdp_md>() as u32;
        o.flags = libbpf_sys::BPF_F_TEST_XDP_LIVE_FRAMES;
        o.repeat = n as i32;
        o.batch_size = n as u32;
        let fd = self.skel.progs.ccsw_inject.as_fd().as_raw_fd();
        // Stores to the staged frames and the counters happen before the run reads them.
        fence(Ordering::Release);
        // SAFETY: all pointers in `o` are valid for the duration of the call.
        let rc = unsafe { libbpf_sys::bpf_prog_test_run_opts(fd, &mut o) };
        if rc < 0 {
            bail!(
                "injecting {n} frames (XDP live frames): {}",
                std::io::Error::from_raw_os_error(-rc)
            );
        }
        Ok(n)
    }

    /// Run one port program on `frame` with `BPF_PROG_TEST_RUN` (the skb is built by the
    /// kernel as a received frame; `gso_segs` > 1 makes it look like a GSO packet). The
    /// programs run against the real maps, so this is how tests drive the datapath.
    pub fn test_run(&self, port: Port, frame: &[u8], gso_segs: u32) -> Result<TestRun> {
        const GSO_SEGS_OFF: usize = 164; // offsetof(struct __sk_buff, gso_segs)
        let mut ctx = [0u8; GSO_SEGS_OFF + 4];
        ctx[GSO_SEGS_OFF..].copy_from_slice(&gso_segs.to_ne_bytes());
        let mut out = vec![0u8; frame.len() + 256];
        let prog = match port {
            Port::Ingress => &self.skel.progs.ccsw_ingress,
            Port::Egress => &self.skel.progs.ccsw_egress,
        };
        let input = libbpf_rs::ProgramInput {
            context_in: Some(&mut ctx[..]),
            data_in: Some(frame),
            data_out: Some(&mut out[..]),
            repeat: 1,
            ..Default::default()
        };
        let res = prog.test_run(input).context("BPF_PROG_TEST_RUN")?;
        let ret = res.return_value as i32;
        let n = res.data.map(|d| d.len()).unwrap_or(0);
        out.truncate(n);
        Ok(TestRun { ret, frame: out })
    }

    /// One ACK through the egress program's fold of the standard program (its test program,
    /// with BPF_PROG_TEST_RUN): `t.state` is updated, `t.reported` and `t.report` set.
    pub fn run_fold(&self, t: &mut abi::OvsFoldTest) -> Result<()> {
        // A syscall program's context is copied back into the input buffer.
        let mut ctx = abi::as_bytes(t).to_vec();
        let input = libbpf_rs::ProgramInput { context_in: Some(&mut ctx), ..Default::default() };
        self.skel.progs.ccsw_fold_test.test_run(input).context("BPF_PROG_TEST_RUN of the fold")?;
        *t = abi::from_bytes(&ctx).context("fold test context")?;
        Ok(())
    }

    pub fn stats(&self) -> OvsStats {
        let mut sum = [0u64; 22];
        if let Ok(Some(per_cpu)) = self
            .skel
            .maps
            .stats
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        {
            for bytes in per_cpu {
                if let Some(s) = from_prefix::<abi::OvsCpuStats>(&bytes) {
                    for (acc, v) in sum.iter_mut().zip(s.counters) {
                        *acc += v;
                    }
                }
            }
        }
        let [packets, malformed, syns, established, closed, segments, resent, acks, acks_rewritten, dupacks_hidden, sack_stripped, ece_cleared, out_of_window, wscale_capped, ring_drops, unbuffered, dupacks_opened, slab_full, table_full, acks_folded, folded_reports, copies_seen] =
            sum;
        OvsStats {
            packets,
            malformed,
            syns,
            established,
            closed,
            segments,
            resent,
            acks,
            acks_rewritten,
            dupacks_hidden,
            sack_stripped,
            ece_cleared,
            out_of_window,
            wscale_capped,
            ring_drops,
            unbuffered,
            dupacks_opened,
            slab_full,
            table_full,
            acks_folded,
            folded_reports,
            copies_seen,
        }
    }

    /// Kernel run-time statistics of the two port programs (run counts and times count only
    /// while some process, e.g. an attached datapath, holds statistics enabled).
    pub fn prog_stats(&self) -> Vec<ProgRunStats> {
        [&self.skel.progs.ccsw_ingress, &self.skel.progs.ccsw_egress]
            .iter()
            .filter_map(|p| {
                let info = prog_info(p.as_fd().as_raw_fd()).ok()?;
                Some(ProgRunStats {
                    name: c_name(&info.name),
                    id: info.id,
                    run_cnt: info.run_cnt,
                    run_time_ns: info.run_time_ns,
                })
            })
            .collect()
    }
}

/// Remove any ccswitch program left attached to `ifname` (e.g. by a killed shim whose links
/// were pinned); returns how many were removed. TCX attachments only: these programs are
/// never attached through clsact. Also removes the programs of a live [`OvsDatapath`] on
/// that port.
pub fn detach_port(ifname: &str) -> Result<usize> {
    let idx = ifindex(ifname)?;
    let mut removed = 0;
    for attach_type in [libbpf_sys::BPF_TCX_INGRESS, libbpf_sys::BPF_TCX_EGRESS] {
        let mut prog_ids = [0u32; 64];
        let mut link_ids = [0u32; 64];
        // SAFETY: zeroed query opts are valid; the arrays outlive the call.
        let mut q: libbpf_sys::bpf_prog_query_opts = unsafe { std::mem::zeroed() };
        q.sz = size_of::<libbpf_sys::bpf_prog_query_opts>() as _;
        q.prog_ids = prog_ids.as_mut_ptr();
        q.link_ids = link_ids.as_mut_ptr();
        q.__bindgen_anon_1.count = prog_ids.len() as u32;
        let rc = unsafe { libbpf_sys::bpf_prog_query_opts(idx as i32, attach_type, &mut q) };
        if rc < 0 {
            bail!(
                "querying TCX programs on {ifname}: {}",
                std::io::Error::from_raw_os_error(-rc)
            );
        }
        // SAFETY: the kernel wrote the count.
        let count = unsafe { q.__bindgen_anon_1.count } as usize;
        for i in 0..count.min(prog_ids.len()) {
            // SAFETY: plain syscall wrappers returning owned fds or negative errnos.
            let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(prog_ids[i]) };
            if fd < 0 {
                continue;
            }
            let prog_fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let Ok(info) = prog_info(prog_fd.as_raw_fd()) else {
                continue;
            };
            if !c_name(&info.name).starts_with(PROG_PREFIX) {
                continue;
            }
            let rc = if link_ids[i] != 0 {
                let lfd = unsafe { libbpf_sys::bpf_link_get_fd_by_id(link_ids[i]) };
                if lfd < 0 {
                    lfd
                } else {
                    let link_fd = unsafe { OwnedFd::from_raw_fd(lfd) };
                    unsafe { libbpf_sys::bpf_link_detach(link_fd.as_raw_fd()) }
                }
            } else {
                unsafe {
                    libbpf_sys::bpf_prog_detach_opts(
                        prog_fd.as_raw_fd(),
                        idx as i32,
                        attach_type,
                        std::ptr::null(),
                    )
                }
            };
            if rc < 0 {
                bail!(
                    "detaching program {} from {ifname}: {}",
                    prog_ids[i],
                    std::io::Error::from_raw_os_error(-rc)
                );
            }
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_completion_matches_a_known_frame() {
        // IPv4/TCP SYN with a valid checksum computed independently; corrupt and restore.
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12] = 0x08;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&40u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
        ip[16..20].copy_from_slice(&[192, 0, 2, 2]);
        let th = &mut f[34..54];
        th[0..2].copy_from_slice(&1234u16.to_be_bytes());
        th[2..4].copy_from_slice(&80u16.to_be_bytes());
        th[12] = 5 << 4;
        th[13] = 0x02;
        th[14..16].copy_from_slice(&64240u16.to_be_bytes());
        assert!(complete_tcp_checksum(&mut f));
        // Verification: the one's-complement sum over pseudo-header and segment is 0xffff.
        let pseudo = sum_be16(&f[26..34]) + 6 + 20;
        assert_eq!(fold(pseudo + sum_be16(&f[34..54])), 0xffff);
        let good = f.clone();
        f[50] ^= 0x55;
        assert!(complete_tcp_checksum(&mut f));
        assert_eq!(f, good);
        assert!(!complete_tcp_checksum(&mut f[..40]));
    }

    /// An IPv4/TCP data frame with NOP, NOP, timestamps (`tsval`) and `payload` bytes.
    fn frame_with_timestamps(tsval: u32, payload: usize) -> Vec<u8> {
        let tot = 20 + 32 + payload;
        let mut f = vec![0u8; 14 + tot];
        f[12] = 0x08;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(tot as u16).to_be_bytes());
        ip[9] = 6;
        let th = &mut f[34..66];
        th[12] = 8 << 4;
        th[13] = 0x10;
        th[20..24].copy_from_slice(&[1, 1, 8, 10]);
        th[24..28].copy_from_slice(&tsval.to_be_bytes());
        th[28..32].copy_from_slice(&7u32.to_be_bytes());
        f
    }

    #[test]
    fn a_copys_timestamp_is_raised_to_the_floor_only_if_older_and_the_checksum_follows() {
        let tsval = |f: &[u8]| u32::from_be_bytes(f[58..62].try_into().unwrap());
        let mut f = frame_with_timestamps(1_000, 100);
        assert!(raise_tcp_tsval(&mut f, 1_500));
        assert_eq!(tsval(&f), 1_500);
        assert_eq!(u32::from_be_bytes(f[62..66].try_into().unwrap()), 7, "the echo stays");
        assert!(!raise_tcp_tsval(&mut f, 1_200), "never lowered");
        assert!(!raise_tcp_tsval(&mut f, 1_500));
        assert_eq!(tsval(&f), 1_500);
        // Serial arithmetic: a value just past the wrap is newer.
        let mut f = frame_with_timestamps(u32::MAX - 5, 0);
        assert!(raise_tcp_tsval(&mut f, 3));
        assert_eq!(tsval(&f), 3);
        assert!(complete_tcp_checksum(&mut f));
        let pseudo = sum_be16(&f[26..34]) + 6 + 32;
        assert_eq!(fold(pseudo + sum_be16(&f[34..])), 0xffff);
        // No timestamp option, or not TCP: left alone.
        let mut f = frame_with_timestamps(1_000, 10);
        f[34 + 22] = 4; // SACK-permitted (2 bytes) where the timestamps began
        f[34 + 23] = 2;
        f[34 + 24..34 + 32].fill(1);
        let before = f.clone();
        assert!(!raise_tcp_tsval(&mut f, 5_000));
        assert_eq!(f, before);
        let mut f = frame_with_timestamps(1_000, 10);
        f[14 + 9] = 17;
        assert!(!raise_tcp_tsval(&mut f, 5_000));
    }

    #[test]
    fn the_word_sum_equals_the_sum_of_big_endian_byte_pairs() {
        let by_pairs = |b: &[u8]| -> u64 {
            fold(b.chunks(2).map(|c| u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum()).into()
        };
        let mut rng = ccswitch_datapath_support::rng::SplitMix64(5);
        for len in (0..70).chain([1499, 1500, 1514, 9000]) {
            for _ in 0..20 {
                let b: Vec<u8> = (0..len).map(|_| rng.below(256) as u8).collect();
                assert_eq!(sum_be16(&b), by_pairs(&b), "{len} bytes: {b:?}");
            }
        }
        assert_eq!(sum_be16(&[0xff; 64]), 0xffff);
    }
}
