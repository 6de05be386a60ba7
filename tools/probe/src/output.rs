//! OUT.flows.json: the per-flow summary of one probe run (issue 19's data contract).

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::abi::{self, tcp_state_name};
use crate::loader::ProbeProgStats;

/// Version of the file's layout.
pub const FLOWS_FILE_VERSION: u32 = 1;

#[derive(Debug, Serialize)]
pub struct FlowsFile {
    pub version: u32,
    /// The clock of every `*_ns` field and of the packet records.
    pub clock: &'static str,
    /// When the programs were attached (the probe printed `ready`).
    pub started_ns: u64,
    /// When the probe was told to stop (before it detached and drained).
    pub stopped_ns: u64,
    /// Records written to OUT.packets.bin.
    pub ring_records: u64,
    /// Records lost to a full ring buffer.
    pub ring_dropped: u64,
    /// Segments sent whose stamp could not be stored (beyond 64 segments of one GSO packet,
    /// or a failed map update): they arrive unmatched.
    pub stamps_lost: u64,
    /// Data segments of flows the full flow map had no room for (not counted anywhere).
    pub flows_lost: u64,
    pub flows: Vec<FlowSummary>,
    /// Kernel run-time statistics of the programs, with `--bpf-stats`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub programs: Option<Vec<ProbeProgStats>>,
}

#[derive(Debug, Serialize)]
pub struct FlowSummary {
    pub flow: u32,
    pub server_ip: String,
    pub server_port: u16,
    pub client_port: u16,
    pub segments_sent: u64,
    pub bytes_sent: u64,
    pub segments_received: u64,
    pub bytes_received: u64,
    pub unmatched: u64,
    pub first_sent_ns: u64,
    pub last_received_ns: u64,
    pub tcp_info: Option<TcpInfoSummary>,
}

#[derive(Debug, Serialize)]
pub struct TcpInfoSummary {
    pub state: &'static str,
    pub total_retrans: u32,
    pub bytes_retrans: u64,
    pub srtt_us: u32,
    pub min_rtt_us: u32,
    pub data_segs_out: u32,
    pub bytes_acked: u64,
    pub delivered: u32,
}

impl FlowSummary {
    pub fn new(key: &abi::ProbeFlowKey, f: &abi::ProbeFlow, info: Option<abi::ProbeTcpInfo>) -> Self {
        FlowSummary {
            flow: f.flow,
            server_ip: Ipv4Addr::from(u32::from_be(key.server_ip)).to_string(),
            server_port: u16::from_be(key.server_port),
            client_port: u16::from_be(key.client_port),
            segments_sent: f.segments_sent,
            bytes_sent: f.bytes_sent,
            segments_received: f.segments_received,
            bytes_received: f.bytes_received,
            unmatched: f.unmatched,
            first_sent_ns: f.first_sent_ns,
            last_received_ns: f.last_received_ns,
            tcp_info: info.map(|i| TcpInfoSummary {
                state: tcp_state_name(i.state),
                total_retrans: i.total_retrans,
                bytes_retrans: i.bytes_retrans,
                srtt_us: i.srtt_us,
                min_rtt_us: i.min_rtt_us,
                data_segs_out: i.data_segs_out,
                bytes_acked: i.bytes_acked,
                delivered: i.delivered,
            }),
        }
    }
}

impl FlowsFile {
    /// Writes the file whole under a temporary name, then renames it into place, so that a
    /// reader never sees half of it (a path that is not a regular file, e.g. /dev/null, is
    /// written directly).
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut text = serde_json::to_vec(self).context("encoding the flows file")?;
        text.push(b'\n');
        let special = std::fs::metadata(path).map(|m| !m.is_file()).unwrap_or(false);
        if special {
            return std::fs::write(path, &text).with_context(|| format!("cannot write {}", path.display()));
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(&text).with_context(|| format!("cannot write {}", tmp.display()))?;
        drop(f);
        std::fs::rename(&tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
    }
}
