//! The ring-buffer records of `src/bpf/kernel.h`, decoded: what the BPF program tells the
//! shim about each flow (created, per-ACK primitives, folded reports, closed), in either lane.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ccswitch_protocol::standard::report;

use crate::abi;

/// A flow that started using the congestion control (CREATE).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowInfo {
    pub flow_id: u32,
    /// CLOCK_MONOTONIC nanoseconds.
    pub ts_ns: u64,
    /// Local (sending) address and port. IPv4-mapped IPv6 is shown as IPv4.
    pub src: SocketAddr,
    /// Remote address and port.
    pub dst: SocketAddr,
    /// Bytes.
    pub mss: u32,
    /// Initial congestion window, bytes.
    pub init_cwnd_bytes: u32,
    /// The kernel's least RTT when the flow began (`tcp_min_rtt`: the handshake's sample),
    /// µs; 0 if it had none.
    pub handshake_rtt_us: u32,
}

/// Per-ACK measurement primitives (ACK). Units in the field docs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AckSample {
    pub flow_id: u32,
    /// CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns).
    pub ts_ns: u64,
    /// Newly delivered by this ACK (cumulatively ACKed or SACKed), bytes
    /// (= packets_acked × mss).
    pub bytes_acked: u32,
    /// Newly delivered packets (`rate_sample.acked_sacked`).
    pub packets_acked: u32,
    /// Bytes SACKed but not yet cumulatively ACKed (= packets_misordered × mss).
    pub bytes_misordered: u32,
    /// Packets currently SACKed but not cumulatively ACKed (`tp->sacked_out`):
    /// a level, not a per-ACK delta; non-zero while the receiver holds
    /// out-of-order data (reordering or loss).
    pub packets_misordered: u32,
    /// Bytes newly delivered by an ACK carrying ECE.
    pub ecn_bytes: u32,
    /// Packets newly delivered by an ACK carrying ECE.
    pub ecn_packets: u32,
    /// Packets newly marked lost while processing this ACK (`rs->losses`).
    pub lost_pkts_sample: u32,
    /// The flow entered TCP_CA_Loss (retransmission timeout) since the last ACK event.
    pub was_timeout: bool,
    /// RTT sample of this ACK, microseconds (`rs->rtt_us`), if any.
    pub rtt_sample_us: Option<u32>,
    /// Smoothed RTT, microseconds.
    pub srtt_us: u32,
    /// Delivery rate seen at the receiver over the sample interval,
    /// bytes/s (delivered × mss / rcv_interval); 0 = no sample.
    pub rate_incoming: u64,
    /// Send rate over the sample interval, bytes/s
    /// (delivered × mss / snd_interval); 0 = no sample.
    pub rate_outgoing: u64,
    /// Bytes in flight (= packets_in_flight × mss).
    pub bytes_in_flight: u32,
    /// packets_out − sacked_out − lost_out + retrans_out.
    pub packets_in_flight: u32,
    /// Bytes written by the application but not yet sent (write_seq − snd_nxt).
    pub bytes_pending: u32,
    /// Congestion window after this ACK was processed, bytes.
    pub snd_cwnd_bytes: u32,
    /// Bytes.
    pub mss: u32,
    /// TCP CA state (0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss).
    pub ca_state: u8,
    /// Slow-start threshold, packets.
    pub ssthresh_pkts: u32,
    /// The rate sample was application-limited.
    pub app_limited: bool,
    /// The ACK carried ECE.
    pub ece: bool,
    /// cwnd was set by the fallback algorithm (no live directive).
    pub fallback: bool,
}

/// A report of the standard program, folded in the kernel (see [`KernelDatapath::set_fold`](crate::KernelDatapath::set_fold)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FoldedReport {
    pub flow_id: u32,
    /// CLOCK_MONOTONIC nanoseconds of the ACK that reported.
    pub ts_ns: u64,
    /// The fold start (µs) the report was folded under.
    pub start_us: u64,
    /// The report registers, in MEASURE order.
    pub fields: [u64; report::COUNT],
    /// Congestion window after the reporting ACK, bytes.
    pub snd_cwnd_bytes: u32,
    /// Window reductions the sender's TCP entered since the flow began
    /// ([`report::SENDER_REDUCTIONS`]) and whether it was in one after the reporting ACK.
    pub reductions: (u32, bool),
}

/// A report of a program the kernel interprets (see
/// [`KernelDatapath::run_program`](crate::KernelDatapath::run_program)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramReport {
    pub flow_id: u32,
    /// CLOCK_MONOTONIC nanoseconds of the ACK that reported.
    pub ts_ns: u64,
    /// The program start (µs) whose registers reported.
    pub start_us: u64,
    pub program_uid: u32,
    /// The report registers, in MEASURE order.
    pub fields: Vec<u64>,
    /// Congestion window after the reporting ACK, bytes.
    pub snd_cwnd_bytes: u32,
}

/// A ring-buffer record, decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KernelEvent {
    Created(FlowInfo),
    Ack(AckSample),
    Report(FoldedReport),
    ProgramReport(ProgramReport),
    /// `ts_ns`: CLOCK_MONOTONIC nanoseconds.
    Closed { flow_id: u32, ts_ns: u64 },
}

impl KernelEvent {
    pub fn flow_id(&self) -> u32 {
        match self {
            KernelEvent::Created(f) => f.flow_id,
            KernelEvent::Ack(a) => a.flow_id,
            KernelEvent::Report(r) => r.flow_id,
            KernelEvent::ProgramReport(r) => r.flow_id,
            KernelEvent::Closed { flow_id, .. } => *flow_id,
        }
    }

    /// When the record was made (CLOCK_MONOTONIC ns): a flow's records are made one after
    /// the other, so this orders them across the two lanes.
    pub fn ts_ns(&self) -> u64 {
        match self {
            KernelEvent::Created(f) => f.ts_ns,
            KernelEvent::Ack(a) => a.ts_ns,
            KernelEvent::Report(r) => r.ts_ns,
            KernelEvent::ProgramReport(r) => r.ts_ns,
            KernelEvent::Closed { ts_ns, .. } => *ts_ns,
        }
    }
}

/// Decodes one ring-buffer record; `None` for an unknown kind or a record of the wrong size.
pub(crate) fn decode(data: &[u8]) -> Option<KernelEvent> {
    let kind = u32::from_ne_bytes(data.get(0..4)?.try_into().ok()?);
    match kind {
        abi::EV_ACK => {
            let a: abi::KernelAckEvent = abi::from_bytes(data)?;
            Some(KernelEvent::Ack(AckSample {
                flow_id: a.flow_id,
                ts_ns: a.ts_ns,
                bytes_acked: a.bytes_acked,
                packets_acked: a.packets_acked,
                bytes_misordered: a.bytes_misordered,
                packets_misordered: a.packets_misordered,
                ecn_bytes: a.ecn_bytes,
                ecn_packets: a.ecn_packets,
                lost_pkts_sample: a.lost_pkts_sample,
                was_timeout: a.was_timeout != 0,
                rtt_sample_us: (a.flags & abi::ACK_F_RTT_VALID != 0).then_some(a.rtt_sample_us),
                srtt_us: a.srtt_us,
                rate_incoming: a.rate_incoming,
                rate_outgoing: a.rate_outgoing,
                bytes_in_flight: a.bytes_in_flight,
                packets_in_flight: a.packets_in_flight,
                bytes_pending: a.bytes_pending,
                snd_cwnd_bytes: a.snd_cwnd_bytes,
                mss: a.mss,
                ca_state: a.ca_state as u8,
                ssthresh_pkts: a.ssthresh,
                app_limited: a.flags & abi::ACK_F_APP_LIMITED != 0,
                ece: a.flags & abi::ACK_F_ECE != 0,
                fallback: a.flags & abi::ACK_F_FALLBACK != 0,
            }))
        }
        abi::EV_CREATE => {
            let c: abi::CreateEvent = abi::from_bytes(data)?;
            let (src, dst) = match c.family as i32 {
                libc::AF_INET => {
                    let s: [u8; 4] = c.src_addr[..4].try_into().ok()?;
                    let d: [u8; 4] = c.dst_addr[..4].try_into().ok()?;
                    (IpAddr::V4(Ipv4Addr::from(s)), IpAddr::V4(Ipv4Addr::from(d)))
                }
                libc::AF_INET6 => (
                    Ipv6Addr::from(c.src_addr).to_canonical(),
                    Ipv6Addr::from(c.dst_addr).to_canonical(),
                ),
                _ => return None,
            };
            Some(KernelEvent::Created(FlowInfo {
                flow_id: c.flow_id,
                ts_ns: c.ts_ns,
                src: SocketAddr::new(src, c.src_port),
                dst: SocketAddr::new(dst, c.dst_port),
                mss: c.mss,
                init_cwnd_bytes: c.init_cwnd_bytes,
                handshake_rtt_us: c.handshake_rtt_us,
            }))
        }
        abi::EV_REPORT => {
            let r: abi::ReportEvent = abi::from_bytes(data)?;
            Some(KernelEvent::Report(FoldedReport {
                flow_id: r.flow_id,
                ts_ns: r.ts_ns,
                start_us: r.start_us,
                fields: r.regs.report(&r.agg),
                snd_cwnd_bytes: r.snd_cwnd_bytes,
                reductions: (r.reductions >> 1, r.reductions & 1 != 0),
            }))
        }
        abi::EV_VM_REPORT => {
            let r: abi::VmReportEvent = abi::from_bytes(data)?;
            let n = (r.n_fields as usize).min(r.fields.len());
            Some(KernelEvent::ProgramReport(ProgramReport {
                flow_id: r.flow_id,
                ts_ns: r.ts_ns,
                start_us: r.start_us,
                program_uid: r.program_uid,
                fields: r.fields[..n].to_vec(),
                snd_cwnd_bytes: r.snd_cwnd_bytes,
            }))
        }
        abi::EV_CLOSE => {
            let c: abi::CloseEvent = abi::from_bytes(data)?;
            Some(KernelEvent::Closed { flow_id: c.flow_id, ts_ns: c.ts_ns })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_ack_and_rejects_bad_sizes() {
        let a = abi::KernelAckEvent {
            kind: abi::EV_ACK,
            flow_id: 7,
            ts_ns: 42,
            packets_acked: 2,
            bytes_acked: 2896,
            rtt_sample_us: 1234,
            flags: abi::ACK_F_RTT_VALID | abi::ACK_F_FALLBACK,
            ..Default::default()
        };
        let bytes = abi::as_bytes(&a);
        match decode(bytes) {
            Some(KernelEvent::Ack(s)) => {
                assert_eq!(s.flow_id, 7);
                assert_eq!(s.bytes_acked, 2896);
                assert_eq!(s.rtt_sample_us, Some(1234));
                assert!(s.fallback && !s.ece && !s.app_limited);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(decode(&bytes[..bytes.len() - 1]), None);
        let mut longer = bytes.to_vec();
        longer.push(0);
        assert_eq!(decode(&longer), None);
        assert_eq!(decode(&[9, 0, 0, 0]), None);
        assert_eq!(decode(&[]), None);
    }

    #[test]
    fn decodes_create_v4_and_mapped_v6() {
        let mut c = abi::CreateEvent {
            kind: abi::EV_CREATE,
            flow_id: 3,
            family: libc::AF_INET as u16,
            src_port: 8000,
            dst_port: 40000,
            mss: 1448,
            init_cwnd_bytes: 14480,
            handshake_rtt_us: 52_400,
            ..Default::default()
        };
        c.src_addr[..4].copy_from_slice(&[198, 18, 0, 1]);
        c.dst_addr[..4].copy_from_slice(&[198, 18, 0, 2]);
        let Some(KernelEvent::Created(f)) = decode(abi::as_bytes(&c)) else {
            panic!()
        };
        assert_eq!(f.src, "198.18.0.1:8000".parse().unwrap());
        assert_eq!(f.dst, "198.18.0.2:40000".parse().unwrap());
        assert_eq!(f.handshake_rtt_us, 52_400);

        c.family = libc::AF_INET6 as u16;
        c.src_addr = Ipv4Addr::new(198, 18, 0, 1).to_ipv6_mapped().octets();
        c.dst_addr = "2001:db8::2".parse::<Ipv6Addr>().unwrap().octets();
        let Some(KernelEvent::Created(f)) = decode(abi::as_bytes(&c)) else {
            panic!()
        };
        assert_eq!(f.src, "198.18.0.1:8000".parse().unwrap());
        assert_eq!(f.dst, "[2001:db8::2]:40000".parse().unwrap());
    }

    #[test]
    fn decodes_close() {
        let c = abi::CloseEvent {
            kind: abi::EV_CLOSE,
            flow_id: 9,
            ts_ns: 1,
        };
        assert_eq!(
            decode(abi::as_bytes(&c)),
            Some(KernelEvent::Closed { flow_id: 9, ts_ns: 1 })
        );
    }
}
