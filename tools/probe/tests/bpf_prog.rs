//! The probe's packet programs on hand-built frames (BPF_PROG_TEST_RUN against the real maps):
//! what is stamped, what is matched, what is ignored. Needs root (loading BPF programs); nothing
//! is attached.

use std::net::Ipv4Addr;
use std::thread::sleep;
use std::time::Duration;

use ccswitch_probe::abi::{from_bytes, ProbeRecord, PROBE_MATCHED};
use ccswitch_probe::{Hook, ProbeOptions, Probe, RET_NEXT};

const SERVER: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const CLIENT: Ipv4Addr = Ipv4Addr::new(100, 64, 0, 2);
const SERVER_PORT: u16 = 8080;
const CLIENT_PORT: u16 = 41234;

const TH_ACK: u8 = 0x10;
const TH_PSH: u8 = 0x08;

struct CraftedSegment {
    src: Ipv4Addr,
    dst: Ipv4Addr,
    sport: u16,
    dport: u16,
    seq: u32,
    flags: u8,
    payload: usize,
}

impl CraftedSegment {
    fn data(seq: u32, payload: usize) -> Self {
        CraftedSegment { src: SERVER, dst: CLIENT, sport: SERVER_PORT, dport: CLIENT_PORT, seq, flags: TH_ACK | TH_PSH, payload }
    }

    /// An Ethernet/IPv4/TCP frame (checksums are not checked by the programs).
    fn frame(&self) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20 + self.payload];
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((40 + self.payload) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&self.src.octets());
        ip[16..20].copy_from_slice(&self.dst.octets());
        let th = &mut f[34..54];
        th[0..2].copy_from_slice(&self.sport.to_be_bytes());
        th[2..4].copy_from_slice(&self.dport.to_be_bytes());
        th[4..8].copy_from_slice(&self.seq.to_be_bytes());
        th[8..12].copy_from_slice(&1u32.to_be_bytes());
        th[12] = 5 << 4;
        th[13] = self.flags;
        th[14..16].copy_from_slice(&65535u16.to_be_bytes());
        for (i, b) in f[54..].iter_mut().enumerate() {
            *b = i as u8;
        }
        f
    }
}

fn probe() -> Probe {
    let mut opts = ProbeOptions::new(vec![(SERVER, SERVER_PORT), (SERVER, 8081)]);
    opts.max_in_flight = 1024;
    opts.max_flows = 64;
    opts.ring_bytes = 1 << 16;
    Probe::load(&opts).expect("loading the probe (root needed)")
}

fn send(p: &Probe, seg: &CraftedSegment) {
    assert_eq!(p.test_run(Hook::Egress, &seg.frame(), 1, 0).unwrap(), RET_NEXT, "egress passes every frame on");
}

fn receive(p: &Probe, seg: &CraftedSegment) {
    assert_eq!(p.test_run(Hook::Ingress, &seg.frame(), 1, 0).unwrap(), RET_NEXT, "ingress passes every frame on");
}

fn records(p: &mut Probe) -> Vec<ProbeRecord> {
    let mut bytes = Vec::new();
    let n = p
        .drain(&mut |b| {
            bytes.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
    assert_eq!(bytes.len(), n as usize * 24);
    bytes.chunks(24).map(|c| from_bytes::<ProbeRecord>(c).unwrap()).collect()
}

#[test]
fn a_segment_sent_then_received_makes_one_matched_record_of_its_flow_and_size() {
    let mut p = probe();
    let seg = CraftedSegment::data(1000, 1448);
    send(&p, &seg);
    receive(&p, &seg);
    let recs = records(&mut p);
    assert_eq!(recs.len(), 1, "{recs:?}");
    let r = recs[0];
    assert_eq!((r.flow, r.bytes, r.flags), (1, 1448, PROBE_MATCHED));
    assert!(r.t_ns > 0 && r.owd_us < 1_000_000, "{r:?}");
    let flows = p.flows();
    assert_eq!(flows.len(), 1);
    let (key, f) = flows[0];
    assert_eq!(
        (u32::from_be(key.server_ip), u16::from_be(key.server_port), u16::from_be(key.client_port)),
        (u32::from(SERVER), SERVER_PORT, CLIENT_PORT)
    );
    assert_eq!(
        (f.flow, f.segments_sent, f.bytes_sent, f.segments_received, f.bytes_received, f.unmatched),
        (1, 1, 1448, 1, 1448, 0)
    );
    assert!(f.first_sent_ns > 0 && f.last_received_ns >= f.first_sent_ns);
    // The stamp was used up: the same segment again is unmatched (a duplicate delivery).
    receive(&p, &seg);
    let again = records(&mut p);
    assert_eq!((again.len(), again[0].flags, again[0].owd_us), (1, 0, 0));
    assert_eq!(p.flows()[0].1.unmatched, 1);
}

#[test]
fn segments_of_another_port_or_address_and_pure_acks_are_ignored() {
    let mut p = probe();
    let other_port = CraftedSegment { sport: 9090, ..CraftedSegment::data(1, 100) };
    let other_addr = CraftedSegment { src: Ipv4Addr::new(198, 18, 0, 6), ..CraftedSegment::data(1, 100) };
    let pure_ack = CraftedSegment::data(1, 0);
    let client_data = CraftedSegment { src: CLIENT, dst: SERVER, sport: CLIENT_PORT, dport: SERVER_PORT, ..CraftedSegment::data(1, 100) };
    for seg in [&other_port, &other_addr, &pure_ack, &client_data] {
        send(&p, seg);
        receive(&p, seg);
    }
    assert!(records(&mut p).is_empty());
    assert!(p.flows().is_empty());
    // The second configured port is measured, as its own flow.
    let second = CraftedSegment { sport: 8081, ..CraftedSegment::data(1, 100) };
    send(&p, &second);
    receive(&p, &second);
    assert_eq!(records(&mut p).len(), 1);
    assert_eq!(p.flows().len(), 1);
}

#[test]
fn each_segment_of_a_gso_packet_is_stamped_and_matched_on_its_own() {
    let mut p = probe();
    // A super-packet of 250 payload bytes cut into 100 + 100 + 50 by the device.
    let seq = u32::MAX - 120; // and the sequence numbers wrap inside it
    assert_eq!(p.test_run(Hook::Egress, &CraftedSegment::data(seq, 250).frame(), 3, 100).unwrap(), RET_NEXT);
    for (off, len) in [(0u32, 100usize), (100, 100), (200, 50)] {
        receive(&p, &CraftedSegment::data(seq.wrapping_add(off), len));
    }
    let recs = records(&mut p);
    assert_eq!(recs.iter().map(|r| (r.bytes, r.flags)).collect::<Vec<_>>(), [(100, 1), (100, 1), (50, 1)]);
    let f = p.flows()[0].1;
    assert_eq!((f.segments_sent, f.bytes_sent, f.segments_received, f.unmatched), (3, 250, 3, 0));
}

#[test]
fn a_gro_packet_at_the_receiver_makes_one_record_per_segment() {
    let mut p = probe();
    for off in [0u32, 100] {
        send(&p, &CraftedSegment::data(5000 + off, 100));
    }
    assert_eq!(p.test_run(Hook::Ingress, &CraftedSegment::data(5000, 200).frame(), 2, 100).unwrap(), RET_NEXT);
    let recs = records(&mut p);
    assert_eq!(recs.iter().map(|r| (r.bytes, r.flags)).collect::<Vec<_>>(), [(100, 1), (100, 1)]);
}

#[test]
fn a_retransmission_restamps_its_segment_so_the_delay_is_the_delivered_copys() {
    let mut p = probe();
    let seg = CraftedSegment::data(77, 500);
    send(&p, &seg);
    // The first copy is lost on the path; the second leaves 50 ms later and arrives at once.
    sleep(Duration::from_millis(50));
    send(&p, &seg);
    receive(&p, &seg);
    let r = records(&mut p)[0];
    assert_eq!(r.flags, PROBE_MATCHED);
    assert!(r.owd_us < 50_000, "delay {} us counts from the first copy", r.owd_us);
    let f = p.flows()[0].1;
    assert_eq!((f.segments_sent, f.bytes_sent, f.segments_received), (2, 1000, 1));
}

#[test]
fn flows_are_numbered_in_order_of_first_sight() {
    let mut p = probe();
    for port in [50000u16, 50001, 50002] {
        send(&p, &CraftedSegment { dport: port, ..CraftedSegment::data(1, 10) });
    }
    receive(&p, &CraftedSegment { dport: 50001, ..CraftedSegment::data(1, 10) });
    let flows = p.flows();
    let numbered: Vec<(u32, u16)> = flows.iter().map(|(k, f)| (f.flow, u16::from_be(k.client_port))).collect();
    assert_eq!(numbered, [(1, 50000), (2, 50001), (3, 50002)]);
    assert_eq!(records(&mut p)[0].flow, 2);
}
