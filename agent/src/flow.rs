//! One flow under the agent's control: its algorithm instance and the shared flow state.

use ccswitch_algorithms::{Algorithm, FlowState, Measurement};

/// What the agent should tell the datapath after a report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Directive {
    pub cwnd_bytes: u32,
    pub pacing_rate_bytes_per_s: Option<u64>,
}

pub struct FlowController {
    pub algorithm: Box<dyn Algorithm>,
    pub state: FlowState,
    pub reports: u64,
}

impl FlowController {
    pub fn new(algorithm: Box<dyn Algorithm>, mss_bytes: u32, init_cwnd_bytes: u32) -> Self {
        Self { algorithm, state: FlowState::new(mss_bytes, init_cwnd_bytes), reports: 0 }
    }

    pub fn directive(&self) -> Directive {
        Directive {
            cwnd_bytes: self.state.cwnd_bytes.min(u64::from(u32::MAX)) as u32,
            pacing_rate_bytes_per_s: self.state.pacing_rate_bytes_per_s,
        }
    }

    pub fn on_report(&mut self, m: &Measurement) -> Directive {
        self.reports += 1;
        self.state.observe(m);
        self.algorithm.on_measurement(&mut self.state, m);
        self.directive()
    }
}
