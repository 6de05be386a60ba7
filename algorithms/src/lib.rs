//! Congestion-control algorithms run by the ccswitch agent, out of the datapath.
//!
//! Two authoring levels:
//!
//! - **Simple** ([`Algorithm`]), after quiche's `recovery/congestion/`: every algorithm works
//!   over one shared [`FlowState`] (window, threshold, RTT and rate estimates that any
//!   algorithm may read) and is fed one [`Measurement`] per report of the agent's standard
//!   datapath program: once per RTT by default, per ACK or every fixed period if the algorithm
//!   asks ([`Reporting`]), and at once on loss or timeout. It sets the window and, if it paces,
//!   the pacing rate. This covers Mystique's API (current and minimum RTT, current and maximum
//!   bandwidth, loss signal, set the window, set the period).
//! - **Full** ([`ProgramAlgorithm`]): the algorithm brings its own CCP datapath programs
//!   (folds over ACKs and report conditions, in CCP's language), reads its own report
//!   registers and drives its control registers, window, rate and program changes.
//!
//! One file per algorithm. Simple algorithms carry deterministic tests driven by
//! [`testing::FakeSender`].

mod bbr;
mod copa;
mod cubic;
mod hybla;
mod illinois;
mod mystique_bbr;
mod params;
mod program_api;
mod reno;
mod reno_datapath;
mod state;
pub mod testing;
pub mod xorshift;
mod vegas;
mod westwood;

pub use params::{Param, Params, SpecError};
pub use program_api::{FlowControl, DatapathInfo, ProgramAlgorithm, Report};
pub use state::{FlowState, Measurement, SenderReductions, WindowEvent};

/// How often the standard datapath program reports to a simple algorithm. Losses and
/// timeouts are reported at once in every mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reporting {
    /// Once per RTT (the latest RTT sample).
    #[default]
    PerRtt,
    /// After every ACK (costly: one message per ACK).
    PerAck,
    /// Every fixed period, µs (Mystique's `setPeriod`).
    EveryMicros(u64),
}

/// A step of growth pre-set in the datapath ([`Algorithm::growth_step`]): once more than
/// `after_bytes` have been acknowledged since the latest report, the window becomes
/// `cwnd_bytes`; past it, a byte more per `acked_per_byte` bytes acknowledged (Linux's
/// `cnt`, segments acknowledged per segment of growth), until the agent's next answer; 0: the
/// step only. With `not_before_us` (a report's `now_us`; 0: none), only an ACK later than
/// that applies the step, however much has been acknowledged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GrowthStep {
    pub after_bytes: u64,
    pub cwnd_bytes: u64,
    pub acked_per_byte: u64,
    pub not_before_us: u64,
}

/// Slow start pre-set in the datapath ([`Algorithm::slow_start`]): on every ACK after the
/// latest report, the window is `cwnd_bytes` plus the bytes acknowledged since that report, at
/// most `until_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowStart {
    pub cwnd_bytes: u64,
    pub until_bytes: u64,
}

/// The operations every simple algorithm provides.
pub trait Algorithm: Send {
    /// Short name, as used on the command line and in scheme names (`kernel:NAME`).
    fn name(&self) -> &str;

    /// How often this algorithm wants reports. Read after every report, so an algorithm may
    /// change it as it goes.
    fn reporting(&self) -> Reporting {
        Reporting::PerRtt
    }

    /// React to one report. `state` has already absorbed the measurement's RTT and rate
    /// samples (see [`FlowState::observe`]); the algorithm updates `state.cwnd_bytes` and,
    /// if it paces, `state.pacing_rate_bytes_per_s`. A Python algorithm's callback has the
    /// same name and moment (`on_report(self, flow)`, `ccswitch.authoring`).
    fn on_report(&mut self, state: &mut FlowState, m: &Measurement);

    /// The window this algorithm would set if its next report said "a packet was lost"
    /// (and acknowledged nothing), from `state` after the latest report; `None` if such a
    /// report would not lower the window (the flow is already recovering, or the algorithm
    /// does not answer loss with a cut). The agent sends it with every answer, so the datapath
    /// applies it on the very ACK that reveals a loss instead of a round trip later; the
    /// report of that loss then reaches the algorithm as usual and its answer refines the
    /// window (a loss in slow start, for one, is answered from the window grown by the bytes
    /// its report acknowledges).
    fn window_on_loss(&self, state: &FlowState) -> Option<u64> {
        let _ = state;
        None
    }

    /// The next step of growth this algorithm would take if its next report acknowledged
    /// enough and nothing else, from `state` after the latest report; `None` if it would not
    /// step by a fixed window once a byte count is acknowledged (slow start, recovery, a
    /// window that follows the clock or the RTT). The agent sends it with every answer, so the
    /// datapath grows the window on the ACK that earns the step, as the kernel's own
    /// congestion avoidance does, instead of on the ACK after the next report; that report
    /// then reaches the algorithm as usual and its answer carries the same window.
    fn growth_step(&self, state: &FlowState) -> Option<GrowthStep> {
        let _ = state;
        None
    }

    /// Slow start as this algorithm's next reports would grow the window (by every byte
    /// acknowledged, up to a threshold), from `state` after the latest report; `None` if the
    /// window does not grow so. The agent sends it with every answer, so the datapath grows
    /// the window on each ACK, as Linux's slow start does, and the algorithm needs no report
    /// per ACK to keep up; its next report then carries the same window. An algorithm
    /// pre-sets a step of growth or slow start, not both (slow start wins).
    fn slow_start(&self, state: &FlowState) -> Option<SlowStart> {
        let _ = state;
        None
    }

    /// The rate (bytes/s) against which the datapath measures ACK aggregation for this
    /// algorithm's next reports (`Measurement::extra_acked_bytes`), from `state` after the
    /// latest report; `None` (the default) measures none. ACK by ACK, an epoch restarts once it
    /// has acknowledged no more than this rate delivers over it, and a report carries the
    /// most any epoch acknowledged beyond it: the bursts an ACK-clocked window must allow
    /// for, which per-RTT sums do not show (Linux's BBR measures it so).
    fn aggregation_rate(&self, state: &FlowState) -> Option<u64> {
        let _ = state;
        None
    }
    /// Take over a running flow from another algorithm (MCC §3.1.1). The agent has already
    /// called [`FlowState::prepare_handover`]: `state.cwnd_bytes` is the window the previous
    /// algorithm left, slow start will not restart, pacing is unset and the shared RTT and
    /// rate estimates are kept. The algorithm starts its own observed variables fresh; a
    /// rate-based one paces at window / recent RTT ([`FlowState::handover_rate_bytes_per_s`]).
    fn take_over(&mut self, state: &mut FlowState) {
        let _ = state;
    }

    /// Called on the outgoing algorithm just before [`FlowState::prepare_handover`]: undo a
    /// transient reduction of the window that belongs to its own probing (e.g. BBR's ProbeRTT),
    /// so the successor inherits the window the flow really runs at.
    fn hand_over(&mut self, state: &mut FlowState) {
        let _ = state;
    }
}

/// A ready-to-run algorithm of either authoring level.
pub enum Instance {
    Simple(Box<dyn Algorithm>),
    Full(Box<dyn ProgramAlgorithm>),
}

impl Instance {
    pub fn name(&self) -> &str {
        match self {
            Instance::Simple(a) => a.name(),
            Instance::Full(a) => a.name(),
        }
    }
}

/// How a registered algorithm is built from its parameters.
pub enum Make {
    Simple(fn(&Params) -> Box<dyn Algorithm>),
    Full(fn(&Params) -> Box<dyn ProgramAlgorithm>),
}

/// A registered algorithm, for listings and instantiation by name.
pub struct AlgorithmInfo {
    pub name: &'static str,
    pub summary: &'static str,
    /// Where the model comes from (paper, RFC or kernel file).
    pub source: &'static str,
    pub params: &'static [Param],
    pub make: Make,
}

impl AlgorithmInfo {
    pub fn instantiate(&self, params: &Params) -> Instance {
        match self.make {
            Make::Simple(make) => Instance::Simple(make(params)),
            Make::Full(make) => Instance::Full(make(params)),
        }
    }
}

/// Every algorithm the agent can run, by name.
pub const ALGORITHMS: &[AlgorithmInfo] = &[
    reno::INFO,
    cubic::INFO,
    bbr::INFO,
    mystique_bbr::INFO,
    hybla::INFO,
    illinois::INFO,
    vegas::INFO,
    westwood::INFO,
    copa::INFO,
    reno_datapath::INFO,
];

pub fn info(name: &str) -> Option<&'static AlgorithmInfo> {
    ALGORITHMS.iter().find(|a| a.name == name)
}

/// Instantiate an algorithm from a spec `NAME` or `NAME:PARAM=VALUE,PARAM=VALUE`, e.g.
/// `cubic:beta=0.8`. Unknown names and parameters and unparsable values are errors.
pub fn instantiate(spec: &str) -> Result<Instance, SpecError> {
    let (name, assignments) = spec.split_once(':').unwrap_or((spec, ""));
    let info = info(name).ok_or_else(|| SpecError::UnknownAlgorithm {
        name: name.to_string(),
        known: ALGORITHMS.iter().map(|a| a.name).collect::<Vec<_>>().join(", "),
    })?;
    let params = Params::parse(info, assignments)?;
    Ok(info.instantiate(&params))
}

/// Instantiate a simple algorithm by spec (for tests and benchmarks).
pub fn simple(spec: &str) -> Result<Box<dyn Algorithm>, SpecError> {
    match instantiate(spec)? {
        Instance::Simple(a) => Ok(a),
        Instance::Full(a) => Err(SpecError::NotSimple(a.name().to_string())),
    }
}
