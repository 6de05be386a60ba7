//! Congestion-control algorithms run by the ccswitch agent, out of the datapath.
//!
//! The model (after quiche's `recovery/congestion/`): every algorithm works over one shared
//! [`FlowState`] (window, threshold, RTT and rate estimates that any algorithm may read) and
//! implements the small table of operations in [`Algorithm`]. The agent feeds each flow one
//! [`Measurement`] per report of the datapath program (about once per RTT, at once on loss or
//! timeout), and writes back the window and pacing rate the algorithm left in the state.
//!
//! One file per algorithm. Each carries deterministic tests driven by [`testing::FakeSender`].

mod cubic;
mod reno;
mod state;
pub mod testing;

pub use cubic::Cubic;
pub use reno::Reno;
pub use state::{FlowState, Measurement, WindowEvent};

/// The operations every algorithm provides.
pub trait Algorithm: Send {
    /// Short name, as used on the command line and in scheme names (`ccswitch:NAME`).
    fn name(&self) -> &'static str;

    /// React to one report. `state` has already absorbed the measurement's RTT and rate
    /// samples (see [`FlowState::observe`]); the algorithm updates `state.cwnd_bytes` and,
    /// if it paces, `state.pacing_rate_bytes_per_s`.
    fn on_measurement(&mut self, state: &mut FlowState, m: &Measurement);
}

/// Description of an algorithm for listings (`ccswitch-agent --list-algorithms`).
pub struct AlgorithmInfo {
    pub name: &'static str,
    pub summary: &'static str,
    pub make: fn() -> Box<dyn Algorithm>,
}

/// Every algorithm the agent can run, by name.
pub const ALGORITHMS: &[AlgorithmInfo] = &[
    AlgorithmInfo {
        name: "reno",
        summary: "NewReno (RFC 5681/6582): slow start, +1 MSS per RTT, halve on loss",
        make: || Box::new(Reno::default()),
    },
    AlgorithmInfo {
        name: "cubic",
        summary: "CUBIC (RFC 9438, Linux defaults: beta 0.7, C 0.4, fast convergence)",
        make: || Box::new(Cubic::default()),
    },
];

/// Instantiate an algorithm by name.
pub fn by_name(name: &str) -> Option<Box<dyn Algorithm>> {
    ALGORITHMS.iter().find(|a| a.name == name).map(|a| (a.make)())
}
