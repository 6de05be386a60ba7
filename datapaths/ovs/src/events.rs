//! Records the port programs hand to userspace, decoded, and the per-flow directive userspace
//! hands back. Their C layouts are in `bpf/switch.h`; `datapath` converts between the two.
//!
//! Sequence and acknowledgement numbers are raw 32-bit TCP numbers (they wrap); times are
//! CLOCK_MONOTONIC nanoseconds taken by the BPF program when the frame crossed the port
//! (`bpf_ktime_get_ns`), so RTT samples do not include the shim's own scheduling delay.

use std::net::SocketAddr;

/// A connection, server side first. IPv4 and IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    pub server: SocketAddr,
    pub client: SocketAddr,
}

/// The three-way handshake completed (the client's ACK of the SYN-ACK crossed the port).
/// Only then does a flow reach userspace, so spoofed SYNs never do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Established {
    pub flow_id: u32,
    pub ts_ns: u64,
    pub key: FlowKey,
    /// Sender MSS: the smaller of the two MSS options (536 for IPv4 / 1220 for IPv6 when absent).
    pub mss: u16,
    /// Shift to apply to the window field of the client's ACKs: the client's SYN option
    /// (capped at 14, RFC 7323) when both sides sent one, else 0.
    pub client_wscale: u8,
    /// The server's shift, likewise.
    pub server_wscale: u8,
    /// Both SYNs carried SACK-permitted.
    pub sack: bool,
    /// Both SYNs carried timestamps.
    pub timestamps: bool,
    pub server_isn: u32,
    pub client_isn: u32,
}

/// New data from the server (its end is beyond everything seen before), with the whole L2
/// frame so the shim can retransmit it unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub flow_id: u32,
    pub ts_ns: u64,
    pub seq: u32,
    /// Payload bytes, plus one for a FIN.
    pub len: u32,
    pub fin: bool,
    /// The frame from the Ethernet header on, exactly as it crossed the port.
    pub frame: Vec<u8>,
}

/// Server data whose end is at or below the highest sequence seen: a retransmission (the
/// server's own, or one the shim injected). Carries no frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resent {
    pub flow_id: u32,
    pub ts_ns: u64,
    pub seq: u32,
    pub len: u32,
}

/// One SACK block, `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackBlock {
    pub start: u32,
    pub end: u32,
}

/// What the egress program did with an ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckVerdict {
    /// Passed unchanged (flow not under control, or nothing to change).
    Passed,
    /// Forwarded with the window lowered and/or SACK blocks and ECE removed.
    Rewritten,
    /// Dropped: a duplicate ACK hidden from the server.
    Hidden,
}

/// An ACK from the client toward the server (any segment with the ACK flag after the
/// handshake, including ones carrying data).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ack {
    pub flow_id: u32,
    pub ts_ns: u64,
    pub ack: u32,
    /// The client's advertised window in bytes (field << client_wscale), before any rewrite.
    pub window_bytes: u32,
    /// Client payload bytes carried by this segment.
    pub payload_len: u32,
    pub ece: bool,
    pub fin: bool,
    /// Up to four SACK blocks, in option order (a D-SACK block comes first).
    pub sack: Vec<SackBlock>,
    pub verdict: AckVerdict,
}

/// Why a flow left the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// Both FINs seen and the last one acknowledged.
    Fin,
    Rst,
}

/// Why the BPF side stopped being able to hand a flow's data to userspace; the flow is then
/// uncontrolled for good (it cannot be protected by retransmission any more).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnbufferedReason {
    /// The ring buffer was full when a segment had to be copied.
    RingFull,
    /// A frame larger than the copy slot (e.g. a GSO super-packet: turn TSO off on the port).
    FrameTooLarge,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Established(Established),
    Segment(Segment),
    Resent(Resent),
    Ack(Ack),
    Closed { flow_id: u32, ts_ns: u64, reason: CloseReason },
    Unbuffered { flow_id: u32, ts_ns: u64, reason: UnbufferedReason },
}

impl Event {
    pub fn flow_id(&self) -> u32 {
        match self {
            Event::Established(e) => e.flow_id,
            Event::Segment(s) => s.flow_id,
            Event::Resent(r) => r.flow_id,
            Event::Ack(a) => a.flow_id,
            Event::Closed { flow_id, .. } | Event::Unbuffered { flow_id, .. } => *flow_id,
        }
    }
}

/// The shim's directive for one flow, read by the egress program on every ACK.
///
/// While `active` (and the shim's global deadline has not lapsed) the egress program
/// advertises at most `cwnd_bytes + extra` past the ACK's acknowledgement number, where
/// `extra = sacked_bytes` if the ACK acknowledges exactly `sacked_una`, else 0: bytes the
/// client already holds above a hole do not count against the window, as in TCP's
/// `packets_in_flight` (`packets_out − sacked_out − lost_out + retrans_out`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Control {
    pub cwnd_bytes: u32,
    pub sacked_bytes: u32,
    pub sacked_una: u32,
    pub active: bool,
}
