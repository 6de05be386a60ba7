//! Frame builders and checkers shared by the port-program tests (bpf_prog.rs, fuzz_frames.rs).
//!
//! Checksums of output frames are verified here with an independent one's-complement sum, not
//! with the datapath's own helper.
#![allow(dead_code)] // each test file uses its own subset

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use ccswitch_ovs::loader::{
    monotonic_now_ns, AttachOptions, FlowPhase, OvsDatapath, Port, RET_NEXT,
};
use ccswitch_ovs::events::{FlowAddrs, OvsDirective, OvsEvent};

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const PSH: u8 = 0x08;
pub const ACK: u8 = 0x10;
pub const ECE: u8 = 0x40;

pub const SERVER_ISN: u32 = 0xfffff000; // wraps during the tests on purpose
pub const CLIENT_ISN: u32 = 1_000_000;

/// Slab slots of the tests' datapaths (6 MiB each, not the default 96 MiB).
pub const TEST_SLAB_SLOTS: u32 = 4096;

pub fn dp(max_flows: u32, ring_bytes: u32) -> OvsDatapath {
    dp_with_slab(max_flows, ring_bytes, TEST_SLAB_SLOTS)
}

pub fn dp_with_slab(max_flows: u32, ring_bytes: u32, slab_slots: u32) -> OvsDatapath {
    OvsDatapath::load_detached(&AttachOptions {
        ifname: String::new(),
        max_flows,
        ring_bytes,
        slab_slots,
    })
    .expect("load (run as root)")
}

pub fn far_future() -> u64 {
    monotonic_now_ns() + 3_600_000_000_000
}

#[derive(Clone, Copy)]
pub struct Ends {
    pub server: SocketAddr,
    pub client: SocketAddr,
}

impl Ends {
    pub fn v4() -> Self {
        Ends {
            server: "192.0.2.1:8080".parse().unwrap(),
            client: "198.51.100.7:40001".parse().unwrap(),
        }
    }
    pub fn v6() -> Self {
        Ends {
            server: "[2001:db8::1]:8080".parse().unwrap(),
            client: "[2001:db8:ffff::7]:40001".parse().unwrap(),
        }
    }
    pub fn key(&self) -> FlowAddrs {
        FlowAddrs {
            server: self.server,
            client: self.client,
        }
    }
}

/// One TCP segment to build.
#[derive(Clone)]
pub struct SegmentSpec {
    pub src: SocketAddr,
    pub dst: SocketAddr,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    pub opts: Vec<u8>,
    pub payload: Vec<u8>,
}

impl SegmentSpec {
    pub fn to_server(e: &Ends, flags: u8, seq: u32, ack: u32, window: u16) -> Self {
        SegmentSpec {
            src: e.client,
            dst: e.server,
            seq,
            ack,
            flags,
            window,
            opts: vec![],
            payload: vec![],
        }
    }
    pub fn from_server(e: &Ends, flags: u8, seq: u32, ack: u32) -> Self {
        SegmentSpec {
            src: e.server,
            dst: e.client,
            seq,
            ack,
            flags,
            window: 502,
            opts: vec![],
            payload: vec![],
        }
    }
    pub fn opts(mut self, o: &[u8]) -> Self {
        self.opts = o.to_vec();
        while !self.opts.len().is_multiple_of(4) {
            self.opts.push(1);
        }
        self
    }
    pub fn payload(mut self, n: usize) -> Self {
        self.payload = (0..n).map(|i| (i * 7 + 3) as u8).collect();
        self
    }

    pub fn build(&self) -> Vec<u8> {
        let mut tcp = Vec::new();
        tcp.extend_from_slice(&self.src.port().to_be_bytes());
        tcp.extend_from_slice(&self.dst.port().to_be_bytes());
        tcp.extend_from_slice(&self.seq.to_be_bytes());
        tcp.extend_from_slice(&self.ack.to_be_bytes());
        tcp.push((((20 + self.opts.len()) / 4) as u8) << 4);
        tcp.push(self.flags);
        tcp.extend_from_slice(&self.window.to_be_bytes());
        tcp.extend_from_slice(&[0, 0, 0, 0]);
        tcp.extend_from_slice(&self.opts);
        tcp.extend_from_slice(&self.payload);
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        match (self.src.ip(), self.dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&[0x08, 0x00]);
                let tot = (20 + tcp.len()) as u16;
                let mut ip = vec![0x45, 0];
                ip.extend_from_slice(&tot.to_be_bytes());
                ip.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, 6, 0, 0]);
                ip.extend_from_slice(&s.octets());
                ip.extend_from_slice(&d.octets());
                f.extend_from_slice(&ip);
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&[0x86, 0xdd]);
                f.extend_from_slice(&[0x60, 0, 0, 0]);
                f.extend_from_slice(&(tcp.len() as u16).to_be_bytes());
                f.extend_from_slice(&[6, 64]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
            }
            _ => unreachable!(),
        }
        f.extend_from_slice(&tcp);
        fix_checksums(&mut f);
        f
    }
}

pub fn sum16(b: &[u8]) -> u64 {
    b.chunks(2)
        .map(|c| ((c[0] as u64) << 8) | *c.get(1).unwrap_or(&0) as u64)
        .sum()
}

pub fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

pub fn l4_off(f: &[u8]) -> usize {
    if f[12] == 0x08 {
        14 + (f[14] & 0xf) as usize * 4
    } else {
        54
    }
}

/// End of the TCP segment as the IP header declares it; bytes after it are link padding.
pub fn l4_end(f: &[u8]) -> usize {
    if f[12] == 0x08 {
        14 + u16::from_be_bytes([f[16], f[17]]) as usize
    } else {
        54 + u16::from_be_bytes([f[18], f[19]]) as usize
    }
}

pub fn pseudo_sum(f: &[u8]) -> u64 {
    let tcp_len = (l4_end(f) - l4_off(f)) as u64;
    if f[12] == 0x08 {
        sum16(&f[26..34]) + 6 + tcp_len
    } else {
        sum16(&f[22..54]) + 6 + tcp_len
    }
}

/// Folded one's-complement sums of the IPv4 header (0xffff for IPv6) and of the TCP segment
/// with its pseudo-header: 0xffff each when the checksum verifies. A rewrite that updates a
/// checksum correctly leaves its residual as it was. The frame's headers must lie within it.
pub fn residuals(f: &[u8]) -> (u16, u16) {
    let (l4, end) = (l4_off(f), l4_end(f));
    let ip = if f[12] == 0x08 {
        fold(sum16(&f[14..l4]))
    } else {
        0xffff
    };
    (ip, fold(pseudo_sum(f) + sum16(&f[l4..end])))
}

/// The TCP checksum of `f` verifies (and so does the IPv4 header checksum).
pub fn checksums_ok(f: &[u8]) -> bool {
    residuals(f) == (0xffff, 0xffff)
}

/// Recomputes both checksums of a frame whose headers lie within it.
pub fn fix_checksums(f: &mut [u8]) {
    let (l4, end) = (l4_off(f), l4_end(f));
    if f[12] == 0x08 {
        f[24..26].fill(0);
        let c = !fold(sum16(&f[14..l4]));
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
    f[l4 + 16..l4 + 18].fill(0);
    let c = !fold(pseudo_sum(f) + sum16(&f[l4..end]));
    f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
}

pub fn window_of(f: &[u8]) -> u16 {
    let l4 = l4_off(f);
    u16::from_be_bytes([f[l4 + 14], f[l4 + 15]])
}

pub fn flags_of(f: &[u8]) -> u8 {
    f[l4_off(f) + 13]
}

pub fn opts_of(f: &[u8]) -> Vec<u8> {
    let l4 = l4_off(f);
    let doff = (f[l4 + 12] >> 4) as usize * 4;
    f[l4 + 20..l4 + doff].to_vec()
}

/// Pending records; the slab slots of their segments are given back at once (as the shim
/// would once acknowledged), so their frames must not be read: see `drain_keeping_frames`.
pub fn drain(dp: &mut OvsDatapath) -> Vec<OvsEvent> {
    let v = drain_keeping_frames(dp);
    free_frames(dp, &v);
    v
}

/// Pending records; the caller owns the slab slots of their segments.
pub fn drain_keeping_frames(dp: &mut OvsDatapath) -> Vec<OvsEvent> {
    let mut v = Vec::new();
    dp.poll(Duration::ZERO, |e| v.push(e)).unwrap();
    v
}

/// Gives back the slab slots of the segments among `evs`.
pub fn free_frames(dp: &OvsDatapath, evs: &[OvsEvent]) {
    let slots: Vec<u32> = evs
        .iter()
        .filter_map(|e| match e {
            OvsEvent::Segment(s) => Some(s.frame.index),
            _ => None,
        })
        .collect();
    dp.free_frames(&slots);
}

/// The frame of a segment record, copied out of the slab (the caller owns the slot).
pub fn frame_of(dp: &OvsDatapath, e: &OvsEvent) -> Option<Vec<u8>> {
    match e {
        OvsEvent::Segment(s) => dp.frame(&s.frame).map(<[u8]>::to_vec),
        _ => None,
    }
}

pub fn acks(evs: &[OvsEvent]) -> Vec<ccswitch_ovs::events::Ack> {
    evs.iter()
        .filter_map(|e| match e {
            OvsEvent::Ack(a) => Some(a.clone()),
            _ => None,
        })
        .collect()
}

pub fn run(dp: &OvsDatapath, port: Port, seg: &SegmentSpec) -> (i32, Vec<u8>) {
    let r = dp.test_run(port, &seg.build(), 0).unwrap();
    (r.ret, r.frame)
}

pub fn mss(v: u16) -> Vec<u8> {
    let b = v.to_be_bytes();
    vec![2, 4, b[0], b[1]]
}
pub const SACK_PERM: [u8; 2] = [4, 2];
pub const TS: [u8; 10] = [8, 10, 0, 0, 0, 1, 0, 0, 0, 0];
pub fn ws(s: u8) -> Vec<u8> {
    vec![3, 3, s]
}

/// SYN, SYN-ACK, ACK through the programs; returns the flow id.
pub fn handshake(dp: &mut OvsDatapath, e: &Ends, client_opts: &[u8], server_opts: &[u8]) -> u32 {
    let syn = SegmentSpec::to_server(e, SYN, CLIENT_ISN, 0, 64240).opts(client_opts);
    assert_eq!(run(dp, Port::Egress, &syn).0, RET_NEXT);
    let st = dp.flow(&e.key()).expect("SYN creates the entry");
    assert_eq!(st.phase, FlowPhase::SynSeen);
    let synack = SegmentSpec::from_server(e, SYN | ACK, SERVER_ISN, CLIENT_ISN + 1).opts(server_opts);
    assert_eq!(run(dp, Port::Ingress, &synack).0, RET_NEXT);
    assert_eq!(dp.flow(&e.key()).unwrap().phase, FlowPhase::SynAckSeen);
    let ack = SegmentSpec::to_server(e, ACK, CLIENT_ISN + 1, SERVER_ISN.wrapping_add(1), 1000);
    let (ret, out) = run(dp, Port::Egress, &ack);
    assert_eq!(ret, RET_NEXT);
    assert_eq!(
        out,
        ack.build(),
        "handshake ACK passes unchanged (no directive yet)"
    );
    let evs = drain(dp);
    let est = evs
        .iter()
        .find_map(|e| match e {
            OvsEvent::Established(x) => Some(x.clone()),
            _ => None,
        })
        .expect("ESTABLISHED record");
    assert_eq!(est.key, e.key());
    assert_eq!(dp.flow(&e.key()).unwrap().phase, FlowPhase::Established);
    est.flow_id
}

pub fn full_opts(wscale: u8) -> Vec<u8> {
    [mss(1460), ws(wscale), SACK_PERM.to_vec(), TS.to_vec()].concat()
}

/// Server sends `n` bytes of new data starting right after the handshake, so ACKs up to
/// SERVER_ISN+1+n are in window.
pub fn server_sends(dp: &mut OvsDatapath, e: &Ends, n: usize) {
    for off in (0..n).step_by(1000) {
        let seq = SERVER_ISN.wrapping_add(1 + off as u32);
        let d = SegmentSpec::from_server(e, ACK | PSH, seq, CLIENT_ISN + 1).payload((n - off).min(1000));
        assert_eq!(run(dp, Port::Ingress, &d).0, RET_NEXT);
    }
}

pub fn give_directive(dp: &OvsDatapath, id: u32, cwnd: u32) {
    dp.set_directive(
        id,
        &OvsDirective {
            cwnd_bytes: cwnd,
            sacked_bytes: 0,
            sacked_una: 0,
            active: true,
            fold: None,
        },
    )
    .unwrap();
    dp.set_valid_until(far_future()).unwrap();
}
