//! Reno with its per-ACK growth folded into the datapath: the example of the full API.
//!
//! CCP's own first example (Narayan et al., SIGCOMM 2018, §4): the datapath program grows the
//! window on every ACK (slow start below `Control.ssthresh`, one MSS per window acknowledged
//! above it) and reports once per RTT or at once on loss or timeout; the agent only answers
//! congestion, halving the window and setting `ssthresh`, and stops growth while the flow
//! recovers (`Control.hold`). Recovery ends, as NewReno's (RFC 6582), once the data in flight
//! at the loss is acknowledged, which [`FlowState::classify`] tracks.

use crate::{
    FlowControl, FlowState, Make, Measurement, Params, ProgramAlgorithm, Report, WindowEvent,
};

/// Immediates in CCP programs must stay below 2^31: "no threshold yet".
const NO_SSTHRESH_BYTES: u64 = (1 << 31) - 1;
const PROGRAM: &str = "reno";

pub const INFO: crate::AlgorithmInfo = crate::AlgorithmInfo {
    name: "reno-datapath",
    summary: "Reno with per-ACK growth in the datapath program (full-API example)",
    source: "CCP (Narayan et al., SIGCOMM 2018) §4; RFC 5681/6582",
    params: &[],
    make: Make::Full(|_: &Params| Box::new(RenoDatapath::default())),
};

#[derive(Default)]
pub struct RenoDatapath {
    state: Option<FlowState>,
}

fn program() -> String {
    format!(
        "(def (Report
            (volatile acked 0)
            (volatile lost 0)
            (volatile timeout false)
            (volatile rtt 0)
            (volatile inflight 0)
            (volatile now 0)
            (cwnd 0)
         )
         (Control.ssthresh {NO_SSTHRESH_BYTES})
         (Control.mss 1448)
         (Control.hold 0)
        )
        (when true
            (:= Report.acked (+ Report.acked Ack.bytes_acked))
            (:= Report.lost (+ Report.lost Ack.lost_pkts_sample))
            (:= Report.timeout Flow.was_timeout)
            (:= Report.rtt Flow.rtt_sample_us)
            (:= Report.inflight Flow.bytes_in_flight)
            (:= Report.now Ack.now)
            (fallthrough)
        )
        (when (&& (== Control.hold 0) (< Cwnd Control.ssthresh))
            (:= Cwnd (+ Cwnd Ack.bytes_acked))
            (fallthrough)
        )
        (when (&& (== Control.hold 0) (> (+ Cwnd 1) Control.ssthresh))
            (:= Cwnd (+ Cwnd (/ (* Control.mss Ack.bytes_acked) Cwnd)))
            (fallthrough)
        )
        (when true
            (:= Report.cwnd Cwnd)
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

impl ProgramAlgorithm for RenoDatapath {
    fn name(&self) -> &str {
        INFO.name
    }

    fn programs(&self) -> Vec<(String, String)> {
        vec![(PROGRAM.to_string(), program())]
    }

    fn on_create(&mut self, flow: &mut dyn FlowControl) {
        let state = FlowState::new(flow.mss_bytes(), 10 * flow.mss_bytes());
        flow.set_control("mss", state.mss_bytes);
        flow.set_cwnd(state.cwnd_bytes as u32);
        self.state = Some(state);
    }

    fn on_report(&mut self, flow: &mut dyn FlowControl, report: &Report) {
        let Some(state) = self.state.as_mut() else { return };
        let field = |name| report.get(name).unwrap_or(0);
        let m = Measurement {
            now_us: field("now"),
            acked_bytes: field("acked"),
            lost_packets: field("lost"),
            timeout: field("timeout") != 0,
            rtt_us: field("rtt"),
            bytes_in_flight: field("inflight"),
            ..Default::default()
        };
        state.cwnd_bytes = field("cwnd").max(state.min_cwnd_bytes());
        let was_recovering = state.in_recovery();
        state.observe(&m);
        // Only the congestion part: the datapath grows the window itself and the report's
        // `cwnd` already holds that growth (classify would add the report's bytes again).
        match state.congestion(&m).unwrap_or(WindowEvent::Hold) {
            WindowEvent::Timeout => {
                state.ssthresh_bytes = (state.cwnd_bytes / 2).max(state.min_cwnd_bytes());
                state.cwnd_bytes = state.mss_bytes;
            }
            WindowEvent::CongestionEvent { .. } => {
                state.ssthresh_bytes = (state.cwnd_bytes / 2).max(state.min_cwnd_bytes());
                state.cwnd_bytes = state.ssthresh_bytes;
            }
            // The datapath grows the window itself; the agent only steps in on congestion.
            WindowEvent::Hold | WindowEvent::Avoidance { .. } => {
                if was_recovering && !state.in_recovery() {
                    flow.set_control("hold", 0);
                }
                return;
            }
        }
        flow.set_control("ssthresh", state.ssthresh_bytes.min(NO_SSTHRESH_BYTES));
        flow.set_control("hold", u64::from(state.in_recovery()));
        flow.set_cwnd(state.cwnd_bytes.min(u64::from(u32::MAX)) as u32);
    }
}
