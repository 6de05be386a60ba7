//! The datapath program that carries the simple algorithm API.
//!
//! Every "simple" algorithm (one that reacts to per-RTT measurements and sets a window or a
//! rate) runs over this one program: the datapath folds each ACK into the report registers
//! and reports once per RTT, or at once when a loss or a timeout is seen, so the algorithm
//! answers congestion within one report rather than one RTT. It is compiled once with
//! portus's compiler and installed on every datapath that connects.

use anyhow::{anyhow, Context, Result};
use portus::lang::{self, Reg, Scope};

/// Initial value of the per-report minimum RTT: larger than any sample (µs); the compiler
/// accepts immediates below 2^31 only.
const NO_RTT_SAMPLE_US: u64 = (1 << 31) - 1;

fn source() -> String {
    format!(
        "(def (Report
            (volatile acked 0)
            (volatile lost 0)
            (volatile timeout false)
            (volatile ecn 0)
            (volatile rtt 0)
            (volatile minrtt {NO_RTT_SAMPLE_US})
            (volatile inflight 0)
            (volatile rate 0)
            (volatile now 0)
        ))
        (when true
            (:= Report.acked (+ Report.acked Ack.bytes_acked))
            (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
            (:= Report.timeout Flow.was_timeout)
            (:= Report.ecn (+ Report.ecn Ack.ecn_packets))
            (:= Report.rtt Flow.rtt_sample_us)
            (:= Report.minrtt (min Report.minrtt Flow.rtt_sample_us))
            (:= Report.inflight Flow.bytes_in_flight)
            (:= Report.rate (max Report.rate Flow.rate_incoming))
            (:= Report.now Ack.now)
            (fallthrough)
        )
        (when (|| Report.timeout (> Report.lost 0))
            (report)
            (:= Micros 0)
        )
        (when (> Micros Flow.rtt_sample_us)
            (report)
            (:= Micros 0)
        )"
    )
}

/// Where each report field sits in a MEASURE message of this program.
#[derive(Clone, Copy, Debug)]
pub struct ReportLayout {
    pub acked: usize,
    pub lost: usize,
    pub timeout: usize,
    pub ecn: usize,
    pub rtt: usize,
    pub minrtt: usize,
    pub inflight: usize,
    pub rate: usize,
    pub now: usize,
}

/// The compiled program: what to install and how to read its reports.
pub struct SimpleProgram {
    pub uid: u32,
    /// INSTALL_EXPR message body for socket id 0 (programs belong to a datapath, not a flow).
    pub install_message: Vec<u8>,
    pub layout: ReportLayout,
    pub num_fields: usize,
}

fn report_index(scope: &Scope, name: &str) -> Result<usize> {
    match scope.get(name) {
        Some(Reg::Report(idx, _, _)) => Ok(usize::from(*idx)),
        other => Err(anyhow!("{name} is not a report register: {other:?}")),
    }
}

impl SimpleProgram {
    pub fn compile() -> Result<Self> {
        let (bin, scope) = lang::compile(source().as_bytes(), &[])
            .map_err(|e| anyhow!("compiling the simple-API datapath program: {e}"))?;
        let layout = ReportLayout {
            acked: report_index(&scope, "Report.acked")?,
            lost: report_index(&scope, "Report.lost")?,
            timeout: report_index(&scope, "Report.timeout")?,
            ecn: report_index(&scope, "Report.ecn")?,
            rtt: report_index(&scope, "Report.rtt")?,
            minrtt: report_index(&scope, "Report.minrtt")?,
            inflight: report_index(&scope, "Report.inflight")?,
            rate: report_index(&scope, "Report.rate")?,
            now: report_index(&scope, "Report.now")?,
        };
        let num_fields = 1 + [
            layout.acked, layout.lost, layout.timeout, layout.ecn, layout.rtt, layout.minrtt,
            layout.inflight, layout.rate, layout.now,
        ]
        .into_iter()
        .max()
        .unwrap_or(0);
        let msg = portus::serialize::install::Msg {
            sid: 0,
            program_uid: scope.program_uid,
            num_events: bin.events.len() as u32,
            num_instrs: bin.instrs.len() as u32,
            instrs: bin,
        };
        let install_message = portus::serialize::serialize(&msg)
            .map_err(|e| anyhow!("serializing the install message: {e:?}"))
            .context("simple-API program")?;
        Ok(Self { uid: scope.program_uid, install_message, layout, num_fields })
    }

    /// Decode a report of this program; `None` if it has too few fields.
    pub fn measurement(&self, fields: &[u64]) -> Option<ccswitch_algorithms::Measurement> {
        if fields.len() < self.num_fields {
            return None;
        }
        let l = &self.layout;
        let minrtt = fields[l.minrtt];
        Some(ccswitch_algorithms::Measurement {
            now_us: fields[l.now],
            acked_bytes: fields[l.acked],
            lost_packets: fields[l.lost],
            timeout: fields[l.timeout] != 0,
            ecn_packets: fields[l.ecn],
            rtt_us: fields[l.rtt],
            min_rtt_us: if minrtt >= NO_RTT_SAMPLE_US { 0 } else { minrtt },
            bytes_in_flight: fields[l.inflight],
            delivery_rate_bytes_per_s: fields[l.rate],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_and_lays_out_every_field() {
        let p = SimpleProgram::compile().unwrap();
        assert_eq!(p.num_fields, 9);
        let mut fields = vec![0u64; p.num_fields];
        fields[p.layout.acked] = 14480;
        fields[p.layout.lost] = 2;
        fields[p.layout.minrtt] = NO_RTT_SAMPLE_US;
        let m = p.measurement(&fields).unwrap();
        assert_eq!((m.acked_bytes, m.lost_packets, m.min_rtt_us), (14480, 2, 0));
        assert!(p.measurement(&fields[..3]).is_none());
    }
}
