//! Records the port programs hand to userspace, decoded, and the per-flow directive userspace
//! hands back. Their C layouts are in `bpf/ovs.h` (mirrored in `abi`); [`decode`] converts
//! records into these types.
//!
//! Sequence and acknowledgement numbers are raw 32-bit TCP numbers (they wrap); times are
//! CLOCK_MONOTONIC nanoseconds taken by the BPF program when the frame crossed the port
//! (`bpf_ktime_get_ns`), so RTT samples do not include the shim's own scheduling delay.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ccswitch_protocol::standard::report;

use crate::abi::{self, from_bytes, from_prefix, FRAME_MAX};

/// A connection's addresses, server side first. IPv4 and IPv6 (the BPF map key they decode
/// from is [`abi::FlowKey`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowAddrs {
    pub server: SocketAddr,
    pub client: SocketAddr,
}

/// The three-way handshake completed (the client's ACK of the SYN-ACK crossed the port).
/// Only then does a flow reach userspace, so spoofed SYNs never do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Established {
    pub flow_id: u32,
    pub ts_ns: u64,
    pub key: FlowAddrs,
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

/// Where the port program put a copy of a server frame: a slot of the frame slab, which the
/// receiver of the [`Segment`] owns until it gives the slot back
/// ([`crate::loader::OvsDatapath::free_frames`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FrameSlot {
    /// Index of the slot in the slab.
    pub index: u32,
    /// Frame bytes in the slot (at most [`FRAME_MAX`]).
    pub len: u32,
}

/// New data from the server (its end is beyond everything seen before); the whole L2 frame is
/// in a slab slot, so the shim can retransmit it unchanged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub flow_id: u32,
    pub ts_ns: u64,
    pub seq: u32,
    /// Payload bytes, plus one for a FIN.
    pub len: u32,
    pub fin: bool,
    /// Where the port program left the frame (Ethernet header on, as it crossed the port): a
    /// slab slot, given back once the shim no longer needs it.
    pub frame: FrameSlot,
    /// Its TCP timestamp value, if it carries the option.
    pub tsval: Option<u32>,
}

/// Server data whose end is at or below the highest sequence seen: a retransmission (the
/// server's own, or one the shim injected). Carries no frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resent {
    pub flow_id: u32,
    pub ts_ns: u64,
    pub seq: u32,
    pub len: u32,
    /// Its TCP timestamp value, if it carries the option.
    pub tsval: Option<u32>,
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

/// Why the BPF side could not hand a segment of a flow to userspace; the flow is then
/// uncontrolled until the client acknowledges the hole (for good if its frames are too large).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnbufferedReason {
    /// The ring buffer was full when a segment had to be copied.
    RingFull,
    /// A frame larger than the copy slot (e.g. a GSO super-packet: turn TSO off on the port).
    FrameTooLarge,
    /// No free slot in the frame slab (raise --slab-slots).
    SlabFull,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OvsEvent {
    Established(Established),
    Segment(Segment),
    Resent(Resent),
    Ack(Ack),
    Closed { flow_id: u32, ts_ns: u64, reason: CloseReason },
    /// A copy failed: the data up to `hole_end` (raw sequence, exclusive) is not all in the slab.
    Unbuffered { flow_id: u32, ts_ns: u64, reason: UnbufferedReason, hole_end: u32 },
    /// The standard program's registers folded by the egress program.
    Folded(Folded),
}

/// The standard program's registers the egress program folded for a flow (see `on_ack` in
/// `bpf/ovs.bpf.c`): its report (`reported`), or handed over before an ACK that follows,
/// which the shim folds itself. Either way the ACKs folded acknowledged up to `ack`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    pub flow_id: u32,
    pub ts_ns: u64,
    /// The program start these registers belong to (µs).
    pub start_us: u64,
    /// Acknowledgement number of the last ACK folded (raw).
    pub ack: u32,
    /// Its window as the client sent it, in bytes.
    pub window_bytes: u32,
    /// ACKs folded.
    pub acks: u32,
    pub reported: bool,
    /// The report registers, in MEASURE order (`ccswitch_protocol::standard::report`).
    pub fields: [u64; report::COUNT],
}

impl OvsEvent {
    pub fn flow_id(&self) -> u32 {
        match self {
            OvsEvent::Established(e) => e.flow_id,
            OvsEvent::Segment(s) => s.flow_id,
            OvsEvent::Resent(r) => r.flow_id,
            OvsEvent::Ack(a) => a.flow_id,
            OvsEvent::Closed { flow_id, .. } | OvsEvent::Unbuffered { flow_id, .. } => *flow_id,
            OvsEvent::Folded(f) => f.flow_id,
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
pub struct OvsDirective {
    pub cwnd_bytes: u32,
    pub sacked_bytes: u32,
    pub sacked_una: u32,
    pub active: bool,
    /// The egress program folds the flow's standard program ([`FoldDirective`]), or not (`None`:
    /// every ACK goes up).
    pub fold: Option<FoldDirective>,
}

/// How the egress program folds a flow's standard program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldDirective {
    /// A report on every ACK, else per RTT while the window binds and every `idle_report_us`.
    pub per_ack: bool,
    /// When the program (re)started (µs): registers reset, Micros counts from here.
    pub start_us: u64,
    /// `Control.window_use_pct` and `Control.idle_report_us` (per-RTT mode).
    pub window_use_pct: u32,
    pub idle_report_us: u64,
    /// The program's Cwnd and Rate (the agent's, before the port's own caps).
    pub cwnd_bytes: u32,
    pub rate: u64,
    /// When the flow last reported under this start (µs), 0 if it has not: the program's
    /// Micros restarted there (the port restarts it at the start itself until then).
    pub micros_zero_us: u64,
    /// The shim recovers a loss (or holds ECN marks the port cannot see): every ACK goes up.
    pub hold: bool,
}

impl FoldDirective {
    pub(crate) fn write(fold: Option<FoldDirective>, d: &mut abi::OvsDirectiveSlot) {
        let Some(f) = fold else {
            d.fold = 0;
            return;
        };
        d.fold = (if f.per_ack { abi::FOLD_PER_ACK } else { abi::FOLD_PER_RTT }) | if f.hold { abi::FOLD_HOLD } else { 0 };
        d.fold_start_us = f.start_us;
        d.fold_idle_us = f.idle_report_us;
        d.fold_window_pct = f.window_use_pct;
        d.fold_cwnd_bytes = f.cwnd_bytes;
        d.fold_rate = f.rate;
        d.fold_micros_zero_us = f.micros_zero_us;
    }

    pub(crate) fn read(d: &abi::OvsDirectiveSlot) -> Option<FoldDirective> {
        let mode = d.fold & (abi::FOLD_PER_RTT | abi::FOLD_PER_ACK);
        (mode != 0).then_some(FoldDirective {
            per_ack: mode == abi::FOLD_PER_ACK,
            start_us: d.fold_start_us,
            window_use_pct: d.fold_window_pct,
            idle_report_us: d.fold_idle_us,
            cwnd_bytes: d.fold_cwnd_bytes,
            rate: d.fold_rate,
            micros_zero_us: d.fold_micros_zero_us,
            hold: d.fold & abi::FOLD_HOLD != 0,
        })
    }
}

pub(crate) fn key_from_raw(k: &abi::FlowKey) -> Option<FlowAddrs> {
    let (s, c) = match k.family {
        abi::FAMILY_V4 => {
            let s: [u8; 4] = k.server_addr[..4].try_into().ok()?;
            let c: [u8; 4] = k.client_addr[..4].try_into().ok()?;
            (IpAddr::V4(Ipv4Addr::from(s)), IpAddr::V4(Ipv4Addr::from(c)))
        }
        abi::FAMILY_V6 => (
            IpAddr::V6(Ipv6Addr::from(k.server_addr)),
            IpAddr::V6(Ipv6Addr::from(k.client_addr)),
        ),
        _ => return None,
    };
    Some(FlowAddrs {
        server: SocketAddr::new(s, k.server_port),
        client: SocketAddr::new(c, k.client_port),
    })
}

/// The flow-table key of `key` (a v4 and a v6 address in one key cannot match any frame).
pub fn key_to_raw(key: &FlowAddrs) -> abi::FlowKey {
    let mut k = abi::FlowKey {
        server_port: key.server.port(),
        client_port: key.client.port(),
        ..Default::default()
    };
    for (ip, out) in [
        (key.server.ip(), &mut k.server_addr),
        (key.client.ip(), &mut k.client_addr),
    ] {
        match ip {
            IpAddr::V4(a) => {
                k.family = abi::FAMILY_V4;
                out[..4].copy_from_slice(&a.octets());
            }
            IpAddr::V6(a) => {
                k.family = abi::FAMILY_V6;
                out.copy_from_slice(&a.octets());
            }
        }
    }
    k
}

/// Decodes one ring-buffer record; `None` for an unknown kind or a record of the wrong size.
pub fn decode(data: &[u8]) -> Option<OvsEvent> {
    let h: abi::EvHead = from_prefix(data)?;
    match h.kind {
        abi::EV_ESTABLISHED => {
            let e: abi::EstablishedEvent = from_bytes(data)?;
            Some(OvsEvent::Established(Established {
                flow_id: h.flow_id,
                ts_ns: h.ts_ns,
                key: key_from_raw(&e.key)?,
                mss: e.mss,
                client_wscale: e.client_wscale,
                server_wscale: e.server_wscale,
                sack: e.sack != 0,
                timestamps: e.timestamps != 0,
                server_isn: e.server_isn,
                client_isn: e.client_isn,
            }))
        }
        abi::EV_SEGMENT => {
            let s: abi::SegmentEvent = from_bytes(data)?;
            if s.frame_len as usize > FRAME_MAX {
                return None;
            }
            Some(OvsEvent::Segment(Segment {
                flow_id: h.flow_id,
                ts_ns: h.ts_ns,
                seq: s.seq,
                len: s.len,
                fin: s.fin != 0,
                frame: FrameSlot { index: s.slot, len: u32::from(s.frame_len) },
                tsval: (s.has_tsval != 0).then_some(s.tsval),
            }))
        }
        abi::EV_RESENT => {
            let r: abi::ResentEvent = from_bytes(data)?;
            Some(OvsEvent::Resent(Resent {
                flow_id: h.flow_id,
                ts_ns: h.ts_ns,
                seq: r.seq,
                len: r.len,
                tsval: (r.has_tsval != 0).then_some(r.tsval),
            }))
        }
        abi::EV_ACK => {
            let a: abi::OvsAckEvent = from_bytes(data)?;
            let verdict = match a.verdict {
                abi::VERDICT_PASSED => AckVerdict::Passed,
                abi::VERDICT_REWRITTEN => AckVerdict::Rewritten,
                abi::VERDICT_HIDDEN => AckVerdict::Hidden,
                _ => return None,
            };
            if a.nsack as usize > abi::MAX_SACK {
                return None;
            }
            Some(OvsEvent::Ack(Ack {
                flow_id: h.flow_id,
                ts_ns: h.ts_ns,
                ack: a.ack,
                window_bytes: a.window_bytes,
                payload_len: a.payload_len,
                ece: a.flags & abi::ACK_F_ECE != 0,
                fin: a.flags & abi::ACK_F_FIN != 0,
                sack: a.sack[..a.nsack as usize]
                    .iter()
                    .map(|b| SackBlock {
                        start: b.start,
                        end: b.end,
                    })
                    .collect(),
                verdict,
            }))
        }
        abi::EV_CLOSED => {
            let c: abi::ClosedEvent = from_bytes(data)?;
            let reason = match c.reason {
                abi::CLOSE_FIN => CloseReason::Fin,
                abi::CLOSE_RST => CloseReason::Rst,
                _ => return None,
            };
            Some(OvsEvent::Closed {
                flow_id: h.flow_id,
                ts_ns: h.ts_ns,
                reason,
            })
        }
        abi::EV_UNBUFFERED => {
            let u: abi::UnbufferedEvent = from_bytes(data)?;
            let reason = match u.reason {
                abi::UNBUF_RING_FULL => UnbufferedReason::RingFull,
                abi::UNBUF_TOO_LARGE => UnbufferedReason::FrameTooLarge,
                abi::UNBUF_SLAB_FULL => UnbufferedReason::SlabFull,
                _ => return None,
            };
            Some(OvsEvent::Unbuffered {
                flow_id: h.flow_id,
                ts_ns: h.ts_ns,
                reason,
                hole_end: u.hole_end,
            })
        }
        abi::EV_FOLDED => {
            let f: abi::FoldedEvent = from_bytes(data)?;
            Some(OvsEvent::Folded(Folded {
                flow_id: h.flow_id,
                ts_ns: h.ts_ns,
                start_us: f.start_us,
                ack: f.ack,
                window_bytes: f.window_bytes,
                acks: f.acks,
                reported: f.reported != 0,
                // The port folds no flow that measures ACK aggregation (fold.rs).
                fields: f.regs.report(&Default::default()),
            }))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_rejects_wrong_sizes_and_kinds() {
        let r = abi::ResentEvent {
            h: abi::EvHead {
                kind: abi::EV_RESENT,
                flow_id: 3,
                ts_ns: 9,
                ..Default::default()
            },
            seq: 100,
            len: 1448,
            tsval: 77,
            has_tsval: 1,
            ..Default::default()
        };
        let b = abi::as_bytes(&r);
        assert_eq!(
            decode(b),
            Some(OvsEvent::Resent(Resent {
                flow_id: 3,
                ts_ns: 9,
                seq: 100,
                len: 1448,
                tsval: Some(77),
            }))
        );
        assert_eq!(decode(&b[..b.len() - 1]), None);
        let mut longer = b.to_vec();
        longer.push(0);
        assert_eq!(decode(&longer), None);
        let mut unknown = b.to_vec();
        unknown[0] = 99;
        assert_eq!(decode(&unknown), None);
        assert_eq!(decode(&[]), None);

        let mut a = abi::OvsAckEvent {
            h: abi::EvHead {
                kind: abi::EV_ACK,
                ..Default::default()
            },
            ..Default::default()
        };
        a.nsack = 5;
        assert_eq!(decode(abi::as_bytes(&a)), None, "more SACK blocks than slots");
        a.nsack = 1;
        a.verdict = 7;
        assert_eq!(decode(abi::as_bytes(&a)), None, "unknown verdict");
    }

    #[test]
    fn keys_round_trip() {
        for k in [
            FlowAddrs {
                server: "10.0.0.1:80".parse().unwrap(),
                client: "10.0.0.2:4000".parse().unwrap(),
            },
            FlowAddrs {
                server: "[2001:db8::1]:80".parse().unwrap(),
                client: "[2001:db8::2]:4000".parse().unwrap(),
            },
        ] {
            assert_eq!(key_from_raw(&key_to_raw(&k)), Some(k));
        }
    }

}
