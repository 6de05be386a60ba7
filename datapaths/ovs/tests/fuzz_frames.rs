//! Randomized frames through the port programs with BPF_PROG_TEST_RUN (issue 12, item 4).
//! Needs root (CAP_BPF + CAP_NET_ADMIN).
//!
//! Model: a few real flows are set up (IPv4 and IPv6, with and without window scaling, SACK and
//! timestamps, controlled with a small window, with a 1-byte window, uncontrolled), all with a
//! server ISN just below 2^32 so their sequence space wraps. The fuzz then builds frames from
//! valid segments and ACKs of those flows and of random flows, mutates them (TCP options of
//! every length, malformed options, bogus SACK blocks, data offsets 0..15, truncation at every
//! offset, IPv4 IHL / total length / fragment / IP options, IPv6 payload length, link padding,
//! window scale above 14 on SYNs, every flag combination, sequence and ack numbers around the
//! wrap, bit flips) and runs each through the program of its direction, and some through the
//! other one. For EVERY frame:
//!
//!  - the verdict is RET_NEXT, or RET_DROP for a duplicate (same ack and original window as
//!    the last ACK forwarded, no data) of a controlled flow; the ring must then carry as many
//!    HIDDEN records as there were drops;
//!  - the frame leaves byte-identical, or (only on egress, only for a controlled flow) with
//!    the same length, differing only in the window field (never raised), the ECE bit (only
//!    cleared), the TCP checksum and SACK option bytes replaced by NOP, and with its checksum
//!    residuals unchanged (a valid checksum stays valid), verified with the tests' own
//!    one's-complement sum; an ACK of a controlled flow leaves with the window a restated
//!    model of the clamp computes from the flow's entry and directive;
//!  - `packets` grows by one, `malformed` exactly when an independent RFC 9293 parser here
//!    rejects the frame, and a rejected or non-TCP frame leaves every flow entry untouched.
//!
//! "Fuzzed" flows take all of this and may legitimately be closed (RST, FIN) or replaced (a
//! new SYN); they are then set up again, and their directives change now and then as the
//! agent's would. While they live, their handshake state never changes and a fresh valid ACK
//! is clamped as the model says. "Sentinel" flows (tuples no single bit flip of a fuzzed frame
//! reaches) receive only valid ACKs, in this datapath and in a clean one that sees no fuzz:
//! verdicts, output frames and final entries must match. At the end, directives are as last set
//! and the counters add up.
//!
//! CCSWITCH_FUZZ_SEED (decimal or 0x-hex) replays a run; the seed is printed first and in
//! every failure. CCSWITCH_FUZZ_FRAMES sets the number of frames run (default 100,000).

mod common;

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::ops::Range;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use ccswitch_datapath_support::rng::SplitMix64;
use ccswitch_ovs::loader::{FlowPhase, FlowTableEntry, Port, OvsDatapath, RET_DROP, RET_NEXT};
use ccswitch_ovs::events::{AckVerdict, FlowAddrs, OvsDirective, OvsEvent};
use common::*;

const URG: u8 = 0x20;
const CWR: u8 = 0x80;

const DEFAULT_FRAMES: u64 = 100_000;
/// Server data each flow sends after its handshake: ACKs up to SERVER_ISN + 1 + this are in
/// window, a range that crosses 2^32.
const FLOW_DATA: u32 = 8000;
const MAX_FLOWS: u32 = 1 << 16; // room for the random SYNs: a full table would refuse real flows
const RING_BYTES: u32 = 1 << 22;
const DRAIN_EVERY: u64 = 256;
const CHECK_FLOWS_EVERY: u64 = 100;
const SENTINEL_EVERY: u64 = 1000;

/// The tests' generator, with the one draw this test adds.

/// A sequence or acknowledgement number around one of the places where serial arithmetic
/// turns over: 0, 2^31 and 2^32, or anywhere.
fn near_wrap(r: &mut SplitMix64) -> u32 {
    let d = r.below(3000) as u32;
    match r.below(4) {
        0 => u32::MAX - d,
        1 => d,
        2 => 0x8000_0000u32.wrapping_add(d).wrapping_sub(1500),
        _ => r.next() as u32,
    }
}

fn seed_from_env() -> u64 {
    match std::env::var("CCSWITCH_FUZZ_SEED") {
        Ok(s) => {
            let s = s.trim();
            let v = match s.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => s.parse(),
            };
            v.unwrap_or_else(|_| panic!("CCSWITCH_FUZZ_SEED={s}: not a number"))
        }
        Err(_) => SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    }
}

fn frames_from_env() -> u64 {
    std::env::var("CCSWITCH_FUZZ_FRAMES")
        .map(|s| s.trim().parse().expect("CCSWITCH_FUZZ_FRAMES: a number"))
        .unwrap_or(DEFAULT_FRAMES)
}

// ---- An independent reading of the frame (RFC 791 / 8200 / 9293) ----

struct ParsedSegment {
    l4: usize,
    src: SocketAddr,
    dst: SocketAddr,
    ack: u32,
    flags: u8,
    window: u16,
    payload: usize,
    /// Byte ranges of the frame holding SACK options.
    sack: Vec<Range<usize>>,
}

enum Parsed {
    /// Not an IPv4 or IPv6 TCP frame: not the programs' business.
    NotTcp,
    /// Claims to be TCP but cannot be read: must pass unchanged and be counted as malformed.
    Malformed(&'static str),
    Tcp(ParsedSegment),
}

fn be16(f: &[u8], at: usize) -> usize {
    u16::from_be_bytes([f[at], f[at + 1]]) as usize
}

fn parse(f: &[u8]) -> Parsed {
    use Parsed::*;
    if f.len() < 14 {
        return Malformed("shorter than an Ethernet header");
    }
    let (l4, end, src, dst): (usize, usize, IpAddr, IpAddr) = match be16(f, 12) {
        0x0800 => {
            if f.len() < 34 {
                return Malformed("IPv4 header truncated");
            }
            let ihl = (f[14] & 0xf) as usize * 4;
            if f[14] >> 4 != 4 || ihl < 20 {
                return Malformed("IPv4 version or IHL");
            }
            if f[23] != 6 {
                return NotTcp;
            }
            if be16(f, 20) & 0x3fff != 0 {
                return Malformed("IPv4 fragment");
            }
            let tot = be16(f, 16);
            if tot < ihl + 20 || 14 + tot > f.len() {
                return Malformed("IPv4 total length");
            }
            let a = |o: usize| IpAddr::from(<[u8; 4]>::try_from(&f[o..o + 4]).unwrap());
            (14 + ihl, 14 + tot, a(26), a(30))
        }
        0x86dd => {
            if f.len() < 54 {
                return Malformed("IPv6 header truncated");
            }
            if f[14] >> 4 != 6 {
                return Malformed("IPv6 version");
            }
            if f[20] != 6 {
                return NotTcp;
            }
            let plen = be16(f, 18);
            if plen < 20 || 54 + plen > f.len() {
                return Malformed("IPv6 payload length");
            }
            let a = |o: usize| IpAddr::from(<[u8; 16]>::try_from(&f[o..o + 16]).unwrap());
            (54, 54 + plen, a(22), a(38))
        }
        _ => return NotTcp,
    };
    let doff = (f[l4 + 12] >> 4) as usize * 4;
    if doff < 20 || l4 + doff > end {
        return Malformed("TCP data offset");
    }
    // RFC 9293 §3.1: EOL ends the list, NOP is one byte, every other option has a length
    // byte of at least 2 that stays within the header.
    let mut sack = Vec::new();
    let (mut i, oend) = (l4 + 20, l4 + doff);
    while i < oend {
        match f[i] {
            0 => break,
            1 => i += 1,
            kind => {
                if i + 1 >= oend {
                    return Malformed("option without a length byte");
                }
                let n = f[i + 1] as usize;
                if n < 2 || i + n > oend {
                    return Malformed("option length");
                }
                if kind == 5 {
                    sack.push(i..i + n);
                }
                i += n;
            }
        }
    }
    Tcp(ParsedSegment {
        l4,
        src: SocketAddr::new(src, be16(f, l4) as u16),
        dst: SocketAddr::new(dst, be16(f, l4 + 2) as u16),
        ack: u32::from_be_bytes(f[l4 + 8..l4 + 12].try_into().unwrap()),
        flags: f[l4 + 13],
        window: be16(f, l4 + 14) as u16,
        payload: end - l4 - doff,
        sack,
    })
}

/// Headers lie within the frame, so that common::residuals / fix_checksums can read them.
fn checksummable(f: &[u8]) -> bool {
    if f.len() < 14 {
        return false;
    }
    let (l4, end) = match be16(f, 12) {
        0x0800 if f.len() >= 34 && f[14] & 0xf >= 5 => (l4_off(f), l4_end(f)),
        0x86dd if f.len() >= 54 => (54, l4_end(f)),
        _ => return false,
    };
    end >= l4 + 20 && end <= f.len()
}

/// The kernel's BPF_PROG_TEST_RUN refuses frames shorter than the L3 header their EtherType
/// announces (and than an Ethernet header); nothing runs then.
fn kernel_refuses(f: &[u8]) -> bool {
    f.len() < 14
        || (be16(f, 12) == 0x0800 && f.len() < 34)
        || (be16(f, 12) == 0x86dd && f.len() < 54)
}

fn key_for(port: Port, t: &ParsedSegment) -> FlowAddrs {
    match port {
        Port::Egress => FlowAddrs {
            server: t.dst,
            client: t.src,
        },
        Port::Ingress => FlowAddrs {
            server: t.src,
            client: t.dst,
        },
    }
}

/// How an output frame may differ from its input: the invariant of every frame.
fn check_output(
    port: Port,
    f: &[u8],
    p: &Parsed,
    out: &[u8],
    controlled: bool,
) -> Result<(), String> {
    if out.len() != f.len() {
        return Err(format!("length {} -> {}", f.len(), out.len()));
    }
    let t = match p {
        Parsed::Tcp(t) if controlled && matches!(port, Port::Egress) => t,
        _ => return Err("frame changed, but only egress ACKs of controlled flows may be".into()),
    };
    let l4 = t.l4;
    for i in 0..f.len() {
        if out[i] == f[i] {
            continue;
        }
        let ok = (i == l4 + 13 && out[i] == f[i] & !ECE)
            || (l4 + 14..l4 + 18).contains(&i) // window, checksum
            || (t.sack.iter().any(|r| r.contains(&i)) && out[i] == 1);
        if !ok {
            return Err(format!("byte {i} changed {:#04x} -> {:#04x}", f[i], out[i]));
        }
    }
    if window_of(out) > window_of(f) {
        return Err(format!(
            "window raised {} -> {}",
            window_of(f),
            window_of(out)
        ));
    }
    let (rin, rout) = (residuals(f), residuals(out));
    if rin != rout {
        return Err(format!(
            "checksum residuals {rin:x?} -> {rout:x?} (valid is ffff)"
        ));
    }
    if checksums_ok(f) && !checksums_ok(out) {
        return Err("checksum no longer valid".into());
    }
    Ok(())
}

// ---- Flows ----

#[derive(Clone)]
struct FuzzFlow {
    name: &'static str,
    ends: Ends,
    client_opts: Vec<u8>,
    server_opts: Vec<u8>,
    cwnd: Option<u32>,
    /// Current incarnation.
    id: u32,
    /// Its entry right after setup: what must not change while it lives.
    setup: Option<FlowTableEntry>,
    incarnations: u32,
    /// Last ACK built for it, replayed to make duplicates.
    last_ack: Option<SegmentSpec>,
}

/// The real flows. Sentinel tuples differ from every fuzzed tuple in more than one bit.
fn flows(sentinel: bool) -> Vec<FuzzFlow> {
    let ends = |i: u16, v6: bool| -> Ends {
        let (server, client): (SocketAddr, SocketAddr) = match (sentinel, v6) {
            (false, false) => (
                ([192, 0, 2, 1], 8080).into(),
                ([198, 51, 100, 7 + i as u8], 40001 + i).into(),
            ),
            (false, true) => (
                (Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1), 8080).into(),
                (
                    Ipv6Addr::new(0x2001, 0xdb8, 0xffff, 0, 0, 0, 0, 7 + i),
                    40001 + i,
                )
                    .into(),
            ),
            (true, false) => (
                ([203, 0, 113, 200], 443).into(),
                ([100, 64, 0x30 + i as u8, 9], 50000 + 8 * i).into(),
            ),
            (true, true) => (
                (Ipv6Addr::new(0x2001, 0xdb8, 0x5555, 0, 0, 0, 0, 0x200), 443).into(),
                (
                    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0x30 + i, 9),
                    50000 + 8 * i,
                )
                    .into(),
            ),
        };
        Ends { server, client }
    };
    let flow = |name, ends, client_opts, server_opts, cwnd| FuzzFlow {
        name,
        ends,
        client_opts,
        server_opts,
        cwnd,
        id: 0,
        setup: None,
        incarnations: 0,
        last_ack: None,
    };
    vec![
        flow(
            "v4 SACK+TS wscale 7, window 3000",
            ends(0, false),
            full_opts(7),
            full_opts(7),
            Some(3000),
        ),
        flow(
            "v6 wscale 14/9, window 200000",
            ends(1, true),
            full_opts(14),
            full_opts(9),
            Some(200_000),
        ),
        flow(
            "v4 no options, uncontrolled",
            ends(2, false),
            vec![],
            vec![],
            None,
        ),
        flow(
            "v6 timestamps only, window 1",
            ends(3, true),
            TS.to_vec(),
            TS.to_vec(),
            Some(1),
        ),
        flow(
            "v4 client wscale 15 (capped to 14), SACK",
            ends(4, false),
            [mss(1460), ws(15), SACK_PERM.to_vec()].concat(),
            full_opts(2),
            Some(50_000),
        ),
        flow(
            "v6 SACK+TS, uncontrolled",
            ends(5, true),
            full_opts(7),
            full_opts(7),
            None,
        ),
    ]
}

/// Handshake, FLOW_DATA bytes from the server, a directive. Returns the directive given, if any.
fn bring_up(dp: &mut OvsDatapath, f: &mut FuzzFlow) -> Option<(u32, OvsDirective)> {
    dp.remove_flow(&f.ends.key()).unwrap();
    f.id = handshake(dp, &f.ends, &f.client_opts, &f.server_opts);
    server_sends(dp, &f.ends, FLOW_DATA as usize);
    f.setup = dp.flow(&f.ends.key());
    f.incarnations += 1;
    f.last_ack = None;
    let c = f.cwnd?;
    give_directive(dp, f.id, c);
    Some((f.id, dp.directive(f.id).unwrap()))
}

/// The window a fresh ACK of window `w` at `ack` (not a duplicate) must leave with, from the
/// flow's entry and directive: the clamp of ovs.bpf.c restated.
fn clamp_model(st: &FlowTableEntry, ctl: Option<&OvsDirective>, ack: u32, w: u16) -> u16 {
    let stale = st.last_forwarded.is_some_and(|(la, _, _)| {
        (la.wrapping_sub(ack) as i32) > 0 && la.wrapping_sub(ack) > 1 << 30
    });
    let beyond = (ack.wrapping_sub(st.snd_nxt) as i32) > 0;
    match ctl {
        Some(c) if c.active && !st.unbuffered && !stale && !beyond => {
            let sacked = if ack == c.sacked_una {
                c.sacked_bytes
            } else {
                0
            };
            let allowed = c.cwnd_bytes as u64 + sacked as u64;
            let units = allowed.div_ceil(1 << st.client_wscale).min(0xffff) as u16;
            w.min(units)
        }
        _ => w,
    }
}

/// A flow entry without the fields that legitimately move.
fn without_time(st: &FlowTableEntry) -> FlowTableEntry {
    FlowTableEntry {
        last_seen_ns: 0,
        ..st.clone()
    }
}

// ---- Frame generation ----

fn sack_option(r: &mut SplitMix64, una: u32, blocks: usize) -> Vec<u8> {
    let mut o = vec![5, (2 + 8 * blocks) as u8];
    for _ in 0..blocks {
        let start = match r.below(4) {
            0 => una.wrapping_add(r.below(FLOW_DATA as u64) as u32),
            1 => una.wrapping_sub(r.below(2000) as u32), // D-SACK-like, below una
            2 => near_wrap(r),
            _ => r.next() as u32,
        };
        let end = match r.below(3) {
            0 => start.wrapping_add(r.below(3000) as u32),
            1 => start.wrapping_sub(r.below(3000) as u32), // reversed
            _ => r.next() as u32,
        };
        o.extend_from_slice(&start.to_be_bytes());
        o.extend_from_slice(&end.to_be_bytes());
    }
    o
}

/// TCP options, at most 40 bytes before padding, well formed or not.
fn options(r: &mut SplitMix64, una: u32, syn: bool) -> Vec<u8> {
    let mut o = match r.below(7) {
        0 => vec![],
        1 | 2 => {
            // A well-formed list (if it fits; cut short it is malformed too).
            let mut o = Vec::new();
            for _ in 0..r.below(6) {
                match r.below(8) {
                    0 => o.extend(mss(r.next() as u16)),
                    1 => o.extend(ws(if syn { r.byte() } else { r.below(21) as u8 })),
                    2 => o.extend(SACK_PERM),
                    3 => {
                        let mut ts = TS;
                        ts[2..].copy_from_slice(&r.bytes(8));
                        o.extend(ts);
                    }
                    4 => o.push(1),
                    5 => {
                        let b = r.below(5) as usize;
                        o.extend(sack_option(r, una, b));
                    }
                    6 => {
                        o.push(0); // EOL, then anything
                        let n = r.below(6) as usize;
                        o.extend(r.bytes(n));
                    }
                    _ => {
                        let (k, n) = (r.byte().max(2), r.below(12) as u8 + 2);
                        o.push(k);
                        o.push(n);
                        o.extend(r.bytes(n as usize - 2));
                    }
                }
            }
            o
        }
        3 => {
            // Raw bytes, a multiple of 4 so that no padding is added.
            let n = 4 * r.below(11) as usize;
            r.bytes(n)
        }
        4 => {
            // One option of every length 2..=40 (or a bad length byte), any kind.
            let n = r.below(39) as usize + 2;
            let mut o = vec![r.byte().max(2), n as u8];
            o.extend(r.bytes(n - 2));
            if r.chance(20) {
                o[1] = r.byte();
            }
            o
        }
        5 => {
            // A malformed tail: length 0, 1, beyond the space, or a kind in the last byte.
            let mut o = vec![1; r.below(9) as usize];
            if r.chance(40) {
                o.splice(0..0, TS);
            }
            let kind = r.byte().max(2);
            match r.below(4) {
                0 => o.extend([kind, 0]),
                1 => o.extend([kind, 1]),
                2 => o.extend([kind, 40]),
                _ => {
                    while !(o.len() + 1).is_multiple_of(4) {
                        o.push(1);
                    }
                    o.push(kind);
                }
            }
            o
        }
        _ => {
            // SACK with 0..5 blocks (5 cannot fit), timestamps before it or not.
            let mut o = if r.chance(50) {
                [vec![1, 1], TS.to_vec(), vec![1, 1]].concat()
            } else {
                vec![1, 1]
            };
            let b = r.below(6) as usize;
            o.extend(sack_option(r, una, b));
            o
        }
    };
    o.truncate(40);
    o
}

fn random_addr(r: &mut SplitMix64, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::from(Ipv6Addr::from(
            ((r.next() as u128) << 64) | r.next() as u128,
        ))
    } else {
        IpAddr::from((r.next() as u32).to_be_bytes())
    }
}

fn random_flags(r: &mut SplitMix64) -> u8 {
    match r.below(3) {
        0 => r.byte(), // every combination over a run
        1 => *[
            SYN | FIN,
            RST | ACK,
            0,
            URG,
            URG | ACK,
            SYN | RST,
            FIN,
            0xff,
            ACK | ECE | CWR,
            SYN | ECE | CWR,
        ]
        .get(r.below(10) as usize)
        .unwrap(),
        _ => ACK | (r.byte() & (PSH | URG | ECE | CWR)),
    }
}

fn window(r: &mut SplitMix64) -> u16 {
    match r.below(5) {
        0 => 0,
        1 => 1,
        2 => 0xffff,
        3 => 60_000,
        _ => r.next() as u16,
    }
}

/// A segment of a real flow, or of a random one, in its direction.
fn segment(r: &mut SplitMix64, fuzzed: &mut [FuzzFlow]) -> (Port, SegmentSpec) {
    let una = SERVER_ISN.wrapping_add(1);
    if r.chance(30) {
        let v6 = r.chance(50);
        let seg = SegmentSpec {
            src: SocketAddr::new(random_addr(r, v6), r.next() as u16),
            dst: SocketAddr::new(random_addr(r, v6), r.next() as u16),
            seq: near_wrap(r),
            ack: near_wrap(r),
            flags: random_flags(r),
            window: window(r),
            opts: vec![],
            payload: vec![],
        };
        let syn = seg.flags & SYN != 0;
        let seg = seg
            .opts(&options(r, una, syn))
            .payload(r.below(100) as usize);
        let port = if r.chance(50) {
            Port::Egress
        } else {
            Port::Ingress
        };
        return (port, seg);
    }
    let n = fuzzed.len() as u64;
    let f = &mut fuzzed[r.below(n) as usize];
    let e = f.ends;
    match r.below(10) {
        0..=4 => {
            if let (Some(last), true) = (&f.last_ack, r.chance(25)) {
                // The same ACK again, options maybe changed: a duplicate if it went through.
                let mut d = last.clone();
                if r.chance(50) {
                    d = d.opts(&options(r, una, false));
                }
                return (Port::Egress, d);
            }
            let ack = match r.below(5) {
                0 => una.wrapping_add(FLOW_DATA),
                1 => near_wrap(r),
                _ => una.wrapping_add(r.below(FLOW_DATA as u64 + 1) as u32),
            };
            let mut flags = ACK;
            if r.chance(20) {
                flags |= ECE;
            }
            if r.chance(10) {
                flags |= PSH | CWR;
            }
            let payload = if r.chance(80) {
                0
            } else {
                r.below(300) as usize + 1
            };
            let seg = SegmentSpec::to_server(&e, flags, CLIENT_ISN + 1, ack, window(r))
                .opts(&options(r, una, false))
                .payload(payload);
            f.last_ack = Some(seg.clone());
            (Port::Egress, seg)
        }
        5 => {
            let seq = if r.chance(75) {
                CLIENT_ISN
            } else {
                near_wrap(r)
            };
            let mut flags = SYN;
            if r.chance(20) {
                flags |= ECE | CWR;
            }
            let o = if r.chance(50) {
                [mss(1460), ws(15 + r.below(241) as u8), SACK_PERM.to_vec()].concat()
            } else {
                options(r, una, true)
            };
            (
                Port::Egress,
                SegmentSpec::to_server(&e, flags, seq, 0, window(r)).opts(&o),
            )
        }
        6 | 7 => {
            let seq = if r.chance(80) {
                una.wrapping_add(r.below(FLOW_DATA as u64 + 2000) as u32)
            } else {
                near_wrap(r)
            };
            let mut flags = ACK | PSH;
            if r.chance(10) {
                flags |= FIN;
            }
            let o = if r.chance(50) {
                TS.to_vec()
            } else {
                options(r, una, false)
            };
            let seg = SegmentSpec::from_server(&e, flags, seq, CLIENT_ISN + 1)
                .opts(&o)
                .payload(r.below(300) as usize);
            (Port::Ingress, seg)
        }
        8 => {
            let seq = if r.chance(50) {
                SERVER_ISN
            } else {
                near_wrap(r)
            };
            let o = if r.chance(50) {
                [
                    mss(1400),
                    ws(15 + r.below(241) as u8),
                    SACK_PERM.to_vec(),
                    TS.to_vec(),
                ]
                .concat()
            } else {
                options(r, una, true)
            };
            (
                Port::Ingress,
                SegmentSpec::from_server(&e, SYN | ACK, seq, CLIENT_ISN + 1).opts(&o),
            )
        }
        _ => {
            let seg = SegmentSpec::from_server(&e, ACK, una.wrapping_add(FLOW_DATA), near_wrap(r));
            (Port::Ingress, seg)
        }
    }
}

fn flip_bits(r: &mut SplitMix64, f: &mut [u8]) {
    for _ in 0..r.below(4) + 1 {
        let i = r.below(f.len() as u64) as usize;
        f[i] ^= 1 << r.below(8);
    }
}

/// Mutations of the built frame below TCP options; checksums are then fixed most of the time,
/// so that the rewrite's checksum update is checked from a valid start.
fn mutate(r: &mut SplitMix64, f: &mut Vec<u8>) {
    let v4 = f[12] == 0x08;
    if v4 && r.chance(8) {
        // IP options (never parsed by the programs), up to IHL 15.
        let k = r.below(10) as usize + 1;
        let o = if r.chance(50) {
            vec![1; 4 * k]
        } else {
            r.bytes(4 * k)
        };
        f.splice(34..34, o);
        f[14] = 0x40 | (5 + k as u8);
        let tot = be16(f, 16) + 4 * k;
        f[16..18].copy_from_slice(&(tot as u16).to_be_bytes());
    }
    if r.chance(8) {
        // Link padding after the IP datagram.
        let n = r.below(60) as usize + 1;
        let pad = if r.chance(50) { vec![0; n] } else { r.bytes(n) };
        f.extend(pad);
    }
    if v4 && r.chance(12) {
        match r.below(6) {
            0 => f[14] = (f[14] & 0xf0) | r.below(16) as u8, // IHL
            1 => f[14] = ((r.below(16) as u8) << 4) | (f[14] & 0xf), // version
            2 => {
                let tot = match r.below(3) {
                    0 => be16(f, 16)
                        .wrapping_add(r.below(41) as usize)
                        .wrapping_sub(20),
                    1 => 0,
                    _ => r.next() as usize,
                };
                f[16..18].copy_from_slice(&(tot as u16).to_be_bytes());
            }
            3 => {
                let frag: u16 = match r.below(4) {
                    0 => 0x2000,                 // MF
                    1 => r.below(0x2000) as u16, // offset
                    2 => 0x4000,                 // DF alone: not a fragment
                    _ => r.next() as u16,
                };
                f[20..22].copy_from_slice(&frag.to_be_bytes());
            }
            4 => f[23] = if r.chance(50) { 17 } else { r.byte() }, // protocol
            _ => f[12..14].copy_from_slice(&[0x08, 0x06]),         // ARP
        }
    }
    if !v4 && r.chance(10) {
        match r.below(3) {
            0 => {
                let plen = match r.below(2) {
                    0 => be16(f, 18)
                        .wrapping_add(r.below(41) as usize)
                        .wrapping_sub(20),
                    _ => r.next() as usize,
                };
                f[18..20].copy_from_slice(&(plen as u16).to_be_bytes());
            }
            1 => f[20] = if r.chance(50) { 0 } else { r.byte() }, // next header
            _ => f[14] = ((r.below(16) as u8) << 4) | (f[14] & 0xf),
        }
    }
    if r.chance(8) {
        let l4 = if v4 {
            14 + (f[14] & 0xf) as usize * 4
        } else {
            54
        };
        if l4 + 12 < f.len() {
            f[l4 + 12] = ((r.below(16) as u8) << 4) | (f[l4 + 12] & 0xf); // data offset
        }
    }
    if r.chance(4) {
        flip_bits(r, f);
    }
    if checksummable(f) && r.chance(90) {
        fix_checksums(f);
    }
    if r.chance(4) {
        flip_bits(r, f);
    }
    if r.chance(8) {
        truncate(r, f);
    }
}

/// Cuts the frame anywhere; half the time the IP length is made to agree.
fn truncate(r: &mut SplitMix64, f: &mut Vec<u8>) {
    let at = r.below(f.len() as u64 + 1) as usize;
    f.truncate(at);
    if r.chance(50) && f.len() >= 20 {
        match be16(f, 12) {
            0x0800 => {
                let tot = (f.len() - 14) as u16;
                f[16..18].copy_from_slice(&tot.to_be_bytes());
            }
            0x86dd if f.len() >= 54 => {
                let plen = (f.len() - 54) as u16;
                f[18..20].copy_from_slice(&plen.to_be_bytes());
            }
            _ => {}
        }
        if checksummable(f) {
            fix_checksums(f);
        }
    }
}

// ---- The run ----

#[derive(Default, Debug)]
struct RunTally {
    runs: u64,
    refused: u64,
    not_tcp: u64,
    malformed: u64,
    rewritten: u64,
    drops: u64,
    hidden_records: u64,
    setup_packets: u64,
    egress: u64,
    ingress: u64,
}

struct Fuzz {
    dp: OvsDatapath,
    fuzzed: Vec<FuzzFlow>,
    sentinels: Vec<FuzzFlow>,
    clean: OvsDatapath,
    directives: HashMap<u32, OvsDirective>,
    t: RunTally,
    packets: u64,
    malformed: u64,
    sentinel_round: u32,
}

impl Fuzz {
    fn new() -> Self {
        let mut dp = dp(MAX_FLOWS, RING_BYTES);
        let mut clean = common::dp(MAX_FLOWS, RING_BYTES);
        let mut directives = HashMap::new();
        let mut fuzzed = flows(false);
        for f in &mut fuzzed {
            directives.extend(bring_up(&mut dp, f));
        }
        let mut sentinels = flows(true);
        for s in &mut sentinels {
            let mut twin = s.clone();
            directives.extend(bring_up(&mut dp, s));
            bring_up(&mut clean, &mut twin);
        }
        let _ = drain(&mut dp);
        let _ = drain(&mut clean);
        let st = dp.stats();
        Fuzz {
            dp,
            fuzzed,
            sentinels,
            clean,
            directives,
            t: RunTally {
                setup_packets: st.packets,
                ..Default::default()
            },
            packets: st.packets,
            malformed: st.malformed,
            sentinel_round: 0,
        }
    }

    /// Runs one frame and checks every per-frame invariant. None if the kernel refused it.
    fn run(&mut self, port: Port, f: &[u8]) -> Result<Option<(i32, Vec<u8>)>, String> {
        let p = parse(f);
        let (mut controlled, mut may_drop) = (false, false);
        // The window a controlled ACK must leave with (if it is not hidden).
        let mut clamp = None;
        let mut before = None;
        match &p {
            Parsed::Tcp(t) => {
                if matches!(port, Port::Egress) && t.flags & ACK != 0 && t.flags & RST == 0 {
                    if let Some(st) = self.dp.flow(&key_for(port, t)) {
                        let ctl = self.directives.get(&st.flow_id);
                        controlled = st.phase == FlowPhase::Established
                            && !st.unbuffered
                            && ctl.is_some_and(|c| c.active);
                        // A duplicate: same ack and same original window as the last ACK
                        // forwarded, no data.
                        may_drop = controlled
                            && t.payload == 0
                            && t.flags & (SYN | FIN) == 0
                            && st
                                .last_forwarded
                                .is_some_and(|(a, _, orig)| a == t.ack && orig == t.window);
                        if controlled {
                            clamp = Some(clamp_model(&st, ctl, t.ack, t.window));
                        }
                    }
                }
            }
            _ => before = Some(self.snapshot()),
        }
        let r = match self.dp.test_run(port, f, 0) {
            Ok(r) => r,
            Err(e) if kernel_refuses(f) => {
                let _ = e;
                self.t.refused += 1;
                return Ok(None);
            }
            Err(e) => return Err(format!("BPF_PROG_TEST_RUN failed: {e:#}")),
        };
        if kernel_refuses(f) {
            return Err("expected the kernel to refuse this frame".into());
        }
        self.t.runs += 1;
        match port {
            Port::Egress => self.t.egress += 1,
            Port::Ingress => self.t.ingress += 1,
        }
        let s = self.dp.stats();
        let malformed = matches!(p, Parsed::Malformed(_));
        if s.packets != self.packets + 1 || s.malformed != self.malformed + malformed as u64 {
            return Err(format!(
                "packets +{} malformed +{}, expected +1 +{} (independent parser: {})",
                s.packets - self.packets,
                s.malformed - self.malformed,
                malformed as u8,
                match &p {
                    Parsed::Malformed(why) => why,
                    Parsed::NotTcp => "not TCP",
                    Parsed::Tcp(_) => "valid TCP",
                }
            ));
        }
        (self.packets, self.malformed) = (s.packets, s.malformed);
        match p {
            Parsed::Malformed(_) => self.t.malformed += 1,
            Parsed::NotTcp => self.t.not_tcp += 1,
            Parsed::Tcp(_) => {}
        }
        if r.ret == RET_DROP {
            if !may_drop {
                return Err("dropped, but not a pure ACK of a controlled flow".into());
            }
            self.t.drops += 1;
        } else if r.ret != RET_NEXT {
            return Err(format!("verdict {}", r.ret));
        } else {
            if r.frame != f {
                check_output(port, f, &p, &r.frame, controlled)?;
                self.t.rewritten += 1;
            }
            if let Some(w) = clamp {
                if window_of(&r.frame) != w {
                    return Err(format!(
                        "controlled ACK left with window {}, the clamp model says {w}",
                        window_of(&r.frame)
                    ));
                }
            }
        }
        if let Some(b) = before {
            if self.snapshot() != b {
                return Err("a frame that is not valid TCP changed a flow entry".into());
            }
        }
        Ok(Some((r.ret, r.frame)))
    }

    fn snapshot(&self) -> Vec<Option<FlowTableEntry>> {
        self.fuzzed
            .iter()
            .chain(&self.sentinels)
            .map(|f| self.dp.flow(&f.ends.key()))
            .collect()
    }

    /// Counts the records so far: HIDDEN verdicts must match drops.
    fn account(&mut self) {
        for ev in drain(&mut self.dp) {
            if let OvsEvent::Ack(a) = ev {
                if a.verdict == AckVerdict::Hidden {
                    self.t.hidden_records += 1;
                }
            }
        }
    }

    /// Setup traffic is trusted; its packets are counted apart.
    fn setup<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        self.account();
        let v = f(self);
        let s = self.dp.stats();
        assert_eq!(s.malformed, self.malformed, "setup frames are well formed");
        self.t.setup_packets += s.packets - self.packets;
        self.packets = s.packets;
        v
    }

    /// Fuzzed flows: alive ones kept their handshake and clamp a fresh ACK as the model says;
    /// closed or replaced ones are set up again. Controls change now and then, as the agent's
    /// would.
    fn check_fuzzed(&mut self, r: &mut SplitMix64) -> Result<(), String> {
        for i in 0..self.fuzzed.len() {
            let (key, id) = (self.fuzzed[i].ends.key(), self.fuzzed[i].id);
            let st = match self.dp.flow(&key) {
                Some(st) if st.flow_id == id => st,
                _ => {
                    // Closed by an RST or FIN, or replaced by a new SYN: legitimate. Its
                    // directive goes, as the shim clears it on the flow's CLOSED record.
                    if self.directives.remove(&id).is_some() {
                        self.dp.clear_directive(id).unwrap();
                    }
                    let c = self.setup(|z| bring_up(&mut z.dp, &mut z.fuzzed[i]));
                    self.directives.extend(c);
                    continue;
                }
            };
            let f = &self.fuzzed[i];
            let setup = f.setup.as_ref().unwrap();
            let same = |a: &FlowTableEntry| {
                (a.phase, a.client_isn, a.server_isn, a.client, a.server)
                    == (
                        setup.phase,
                        setup.client_isn,
                        setup.server_isn,
                        setup.client,
                        setup.server,
                    )
                    && (a.client_wscale, a.server_wscale, a.unbuffered)
                        == (setup.client_wscale, setup.server_wscale, false)
            };
            if !same(&st) {
                return Err(format!(
                    "{}: entry corrupted: {st:?}, set up as {setup:?}",
                    f.name
                ));
            }
            let ack = st.snd_nxt;
            let w = if st.last_forwarded.map(|l| l.2) == Some(60_000) {
                59_999
            } else {
                60_000
            };
            let seg = SegmentSpec::to_server(&f.ends, ACK, CLIENT_ISN + 1, ack, w).build();
            let want = clamp_model(&st, self.directives.get(&id), ack, w);
            let name = f.name;
            let (ret, out) = self.run(Port::Egress, &seg)?.unwrap();
            if ret != RET_NEXT || window_of(&out) != want {
                return Err(format!(
                    "{name}: fresh ACK {ack:#x} window {w} left with ({ret}, {}), model says {want}; entry {st:?}",
                    window_of(&out)
                ));
            }
            if self.fuzzed[i].cwnd.is_some() && r.chance(20) {
                let una = SERVER_ISN.wrapping_add(1);
                let c = OvsDirective {
                    cwnd_bytes: match r.below(4) {
                        0 => 1,
                        1 => 3000,
                        2 => 200_000,
                        _ => r.next() as u32,
                    },
                    sacked_bytes: r.below(20_000) as u32,
                    sacked_una: if r.chance(50) {
                        ack
                    } else {
                        una.wrapping_add(r.below(FLOW_DATA as u64 + 1) as u32)
                    },
                    active: r.chance(90),
                    fold: None,
                };
                self.dp.set_directive(id, &c).unwrap();
                self.directives.insert(id, c);
            }
        }
        Ok(())
    }

    /// Sentinels: the same valid ACK through this datapath and the clean one.
    fn sentinel_round(&mut self) -> Result<(), String> {
        self.sentinel_round += 1;
        let k = self.sentinel_round;
        let una = SERVER_ISN.wrapping_add(1);
        for i in 0..self.sentinels.len() {
            let s = &self.sentinels[i];
            let ack = una.wrapping_add((k * 97).min(FLOW_DATA));
            let seg = SegmentSpec::to_server(
                &s.ends,
                ACK,
                CLIENT_ISN + 1,
                ack,
                60_000 - (k % 5000) as u16,
            );
            let seg = if k.is_multiple_of(3) {
                seg.opts(&TS)
            } else {
                seg
            };
            let f = seg.build();
            let name = s.name;
            let got = self.run(Port::Egress, &f)?.unwrap();
            let r = self.clean.test_run(Port::Egress, &f, 0).unwrap();
            if got != (r.ret, r.frame.clone()) {
                return Err(format!(
                    "sentinel {name}: ({}, window {}) here, ({}, window {}) in the clean datapath",
                    got.0,
                    window_of(&got.1),
                    r.ret,
                    window_of(&r.frame)
                ));
            }
        }
        let _ = drain(&mut self.clean);
        Ok(())
    }
}

fn hex(f: &[u8]) -> String {
    f.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn mutated_frames_pass_unchanged_or_leave_valid_with_a_window_never_raised() {
    let seed = seed_from_env();
    let target = frames_from_env();
    println!("fuzz seed {seed:#x} (replay with CCSWITCH_FUZZ_SEED={seed:#x}), {target} frames");
    let fail = |what: &str, port: Option<Port>, f: &[u8], e: String| -> ! {
        panic!(
            "{what}: {e}\n  port {port:?}\n  frame {}\n  seed {seed:#x}: replay with CCSWITCH_FUZZ_SEED={seed:#x}",
            hex(f)
        )
    };
    let start = Instant::now();
    let mut r = SplitMix64(seed);
    let mut z = Fuzz::new();

    // Deterministic sweeps first: every truncation of a controlled ACK with TS+SACK and of a
    // server data segment, every flag combination and every data offset on a controlled ACK.
    let una = SERVER_ISN.wrapping_add(1);
    for i in [0, 1] {
        let e = z.fuzzed[i].ends;
        let sack = sack_option(&mut r, una, 2);
        let ack = SegmentSpec::to_server(&e, ACK | ECE, CLIENT_ISN + 1, una.wrapping_add(100), 60_000)
            .opts(&[vec![1, 1], TS.to_vec(), vec![1, 1], sack].concat())
            .build();
        let data = SegmentSpec::from_server(&e, ACK, una.wrapping_add(10), CLIENT_ISN + 1)
            .opts(&TS)
            .payload(50)
            .build();
        for (port, full) in [(Port::Egress, &ack), (Port::Ingress, &data)] {
            for at in 0..=full.len() {
                for fix in [false, true] {
                    let mut f = full[..at].to_vec();
                    if fix && f.len() >= 20 {
                        let n = (f.len() - 14) as u16;
                        if f[12] == 0x08 {
                            f[16..18].copy_from_slice(&n.to_be_bytes());
                        } else if f.len() >= 54 {
                            f[18..20].copy_from_slice(&(n - 40).to_be_bytes());
                        }
                        if checksummable(&f) {
                            fix_checksums(&mut f);
                        }
                    }
                    if let Err(e) = z.run(port, &f) {
                        fail("truncation sweep", Some(port), &f, e);
                    }
                }
            }
        }
        let l4 = l4_off(&ack);
        for flags in 0..=255u8 {
            let mut f = ack.clone();
            f[l4 + 13] = flags;
            fix_checksums(&mut f);
            if let Err(e) = z.run(Port::Egress, &f) {
                fail("flag sweep", Some(Port::Egress), &f, e);
            }
        }
        for doff in 0..16u8 {
            let mut f = ack.clone();
            f[l4 + 12] = doff << 4;
            fix_checksums(&mut f);
            if let Err(e) = z.run(Port::Egress, &f) {
                fail("data offset sweep", Some(Port::Egress), &f, e);
            }
        }
    }
    if let Err(e) = z.check_fuzzed(&mut r) {
        fail("fuzzed flows after the sweeps", None, &[], e);
    }

    let mut last_drain = 0;
    let mut last_check = 0;
    let mut last_sentinel = 0;
    while z.t.runs < target {
        let (port, seg) = segment(&mut r, &mut z.fuzzed);
        let mut seg = seg;
        if r.chance(10) {
            seg.flags = random_flags(&mut r);
        }
        if r.chance(10) {
            seg.seq = near_wrap(&mut r);
        }
        if r.chance(10) {
            seg.ack = near_wrap(&mut r);
        }
        let mut f = seg.build();
        mutate(&mut r, &mut f);
        if let Err(e) = z.run(port, &f) {
            fail("frame", Some(port), &f, e);
        }
        if r.chance(20) {
            let other = match port {
                Port::Egress => Port::Ingress,
                Port::Ingress => Port::Egress,
            };
            if let Err(e) = z.run(other, &f) {
                fail("frame in the wrong direction", Some(other), &f, e);
            }
        }
        if z.t.runs - last_drain >= DRAIN_EVERY {
            z.account();
            last_drain = z.t.runs;
        }
        if z.t.runs - last_check >= CHECK_FLOWS_EVERY {
            if let Err(e) = z.check_fuzzed(&mut r) {
                fail("fuzzed flows", None, &[], e);
            }
            last_check = z.t.runs;
        }
        if z.t.runs - last_sentinel >= SENTINEL_EVERY {
            if let Err(e) = z.sentinel_round() {
                fail("sentinels", None, &[], e);
            }
            last_sentinel = z.t.runs;
        }
    }
    if let Err(e) = z.check_fuzzed(&mut r).and_then(|_| z.sentinel_round()) {
        fail("after the fuzz", None, &[], e);
    }
    z.account();
    let elapsed = start.elapsed();

    // No flow state corrupted: sentinels match the clean run, directives are as set, every entry
    // is sane.
    for s in &z.sentinels {
        let here = z.dp.flow(&s.ends.key()).map(|st| FlowTableEntry {
            flow_id: 0,
            ..without_time(&st)
        });
        let clean = z.clean.flow(&s.ends.key()).map(|st| FlowTableEntry {
            flow_id: 0,
            ..without_time(&st)
        });
        assert!(here.is_some(), "seed {seed:#x}: sentinel {} lost", s.name);
        assert_eq!(
            here, clean,
            "seed {seed:#x}: sentinel {} differs from the clean run",
            s.name
        );
    }
    for (id, c) in &z.directives {
        assert_eq!(
            z.dp.directive(*id).as_ref(),
            Some(c),
            "seed {seed:#x}: directive of flow {id}"
        );
    }
    let mut ids = HashSet::new();
    for (k, st) in z.dp.flows() {
        assert!(
            st.client_wscale <= 14 && st.server_wscale <= 14,
            "seed {seed:#x}: {k:?} {st:?}"
        );
        if st.phase == FlowPhase::Established {
            assert!(
                ids.insert(st.flow_id),
                "seed {seed:#x}: flow id {} twice",
                st.flow_id
            );
        } else {
            assert_eq!(st.flow_id, 0, "seed {seed:#x}: {k:?} {st:?}");
        }
    }

    // The counters add up.
    let s = z.dp.stats();
    let t = &z.t;
    println!("{t:?}");
    println!("{s:?}");
    for f in &z.fuzzed {
        println!("  {}: {} incarnations", f.name, f.incarnations);
    }
    println!(
        "{} frames run ({} refused by the kernel) in {:.2} s",
        t.runs,
        t.refused,
        elapsed.as_secs_f64()
    );
    let ctx = format!("seed {seed:#x}: {t:?} {s:?}");
    assert_eq!(s.packets, t.setup_packets + t.runs, "{ctx}");
    assert_eq!(s.malformed, t.malformed, "{ctx}");
    assert_eq!(s.dupacks_hidden, t.drops, "{ctx}");
    assert_eq!(t.hidden_records, t.drops, "{ctx}");
    assert_eq!(s.acks_rewritten, t.rewritten, "{ctx}");
    assert_eq!((s.ring_drops, s.unbuffered, s.slab_full), (0, 0, 0), "{ctx}");
    // Every slot the ingress program took was handed over in exactly one segment record
    // (and given back by `drain`): none leaked, whatever the frames.
    assert_eq!((z.dp.slab_in_use(), z.clean.slab_in_use()), (0, 0), "{ctx}");
    assert_eq!(z.dp.records_malformed(), 0, "{ctx}");
    assert!(t.runs >= target, "{ctx}");
    if target >= DEFAULT_FRAMES {
        // The fuzz reached what it is for.
        assert!(
            t.rewritten > 1000 && t.drops > 10 && t.malformed > 1000 && t.not_tcp > 100,
            "{ctx}"
        );
        assert!(
            s.sack_stripped > 100 && s.ece_cleared > 100 && s.wscale_capped > 100,
            "{ctx}"
        );
        assert!(
            s.established > 12 && s.closed > 0 && s.out_of_window > 100,
            "{ctx}"
        );
    }
}
