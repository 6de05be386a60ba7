//! What the ccswitch selector decides on, in one implementation for the agent and for
//! training: a flow's [`features`](features::Features), computed report by report by a
//! [`FeatureTracker`](features::FeatureTracker); when the selector first decides
//! ([`decision_due`], [`first_decision`]); and learned [`models`](model::Model) over the
//! features, scikit-learn tree ensembles evaluated with scikit-learn's semantics; and the
//! operator [`objectives`](objective::Objective) a model is trained for and a policy asks for.
//!
//! The agent's selector calls this crate when it decides; the Python package calls the same
//! code through its native module (`ccswitch._native`) when it builds a dataset, so the
//! features a model is trained on and the features it is served cannot drift apart.

pub mod features;
pub mod model;
pub mod objective;

use std::borrow::Borrow;

use ccswitch_algorithms::{Instance, Measurement};

use crate::features::{FeatureTracker, FeatureWindow, Features};

/// Whether the selector decides at the report just observed: its window holds `min_samples`
/// RTT samples. The first report for which this holds is the flow's first decision (spatial,
/// or the first temporal one); with temporal decisions every later report decides too.
pub fn decision_due(tracker: &FeatureTracker, min_samples: usize) -> bool {
    tracker.samples() >= min_samples
}

/// The features the selector decides on at its first decision over a flow's reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FirstDecision {
    /// At the first decision; after the last report if the flow ended before it.
    pub features: Features,
    /// Position of the report that triggered the decision; `None` if there was none.
    pub report_index: Option<usize>,
    /// That report's datapath clock, µs.
    pub now_us: Option<u64>,
}

/// Replay a flow's reports as the agent's selector sees them (window `window`, first decision
/// once the window holds `min_samples` samples) and return the features of its first decision.
pub fn first_decision<I>(reports: I, mss_bytes: u64, window: FeatureWindow, min_samples: usize) -> FirstDecision
where
    I: IntoIterator,
    I::Item: Borrow<Measurement>,
{
    let mut tracker = FeatureTracker::new(window);
    for (i, m) in reports.into_iter().enumerate() {
        let m = m.borrow();
        tracker.observe(m, mss_bytes);
        if decision_due(&tracker, min_samples) {
            return FirstDecision { features: tracker.features(), report_index: Some(i), now_us: Some(m.now_us) };
        }
    }
    FirstDecision { features: tracker.features(), report_index: None, now_us: None }
}

/// Whether `spec` names an algorithm a selector may choose: a simple-API one (a flow's
/// algorithm can only be handed over between those). Python specs (`py:MODULE:CLASS`) are checked
/// when a flow first uses them, not here: that needs the agent's interpreter.
pub fn check_algorithm(spec: &str) -> Result<(), String> {
    if let Some(target) = spec.strip_prefix("py:") {
        return if target.is_empty() { Err("expected py:MODULE:CLASS".to_string()) } else { Ok(()) };
    }
    match ccswitch_algorithms::instantiate(spec) {
        Ok(Instance::Simple(_)) => Ok(()),
        Ok(Instance::Full(a)) => Err(format!(
            "{} brings its own datapath program; a selector can only choose simple-API algorithms",
            a.name()
        )),
        Err(e) => Err(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1_000;

    fn report(now_ms: u64, rtt_ms: u64) -> Measurement {
        Measurement { now_us: now_ms * 1_000, rtt_us: rtt_ms * 1_000, acked_bytes: 10 * MSS, ..Measurement::default() }
    }

    #[test]
    fn the_first_decision_comes_at_the_report_that_brings_min_samples() {
        // The third report has no RTT sample, so the fourth brings the third sample.
        let reports = [report(0, 10), report(100, 20), Measurement { now_us: 150_000, lost_packets: 1, ..Default::default() }, report(200, 30), report(300, 90)];
        let d = first_decision(reports, MSS, FeatureWindow::Sliding(5), 3);
        assert_eq!((d.report_index, d.now_us), (Some(3), Some(200_000)));
        assert_eq!(d.features.samples, 3);
        assert_eq!(d.features.max_rtt_ms, 30.0);
        assert_eq!(d.features.loss_rate, 1.0 / 31.0);
    }

    #[test]
    fn a_flow_that_ends_first_gives_the_features_after_its_last_report() {
        let d = first_decision([report(0, 10), report(100, 20)], MSS, FeatureWindow::FirstSamples(8), 8);
        assert_eq!((d.report_index, d.now_us), (None, None));
        assert_eq!(d.features.samples, 2);
        assert_eq!(d.features.elapsed_s, 0.1);
    }

    #[test]
    fn selectors_choose_simple_algorithms_only() {
        assert_eq!(check_algorithm("cubic:beta=0.8"), Ok(()));
        assert_eq!(check_algorithm("py:mymod:Mine"), Ok(()));
        assert!(check_algorithm("py:").unwrap_err().contains("py:MODULE:CLASS"));
        assert!(check_algorithm("renoo").unwrap_err().contains("unknown algorithm"));
        assert!(check_algorithm("reno-datapath").unwrap_err().contains("own datapath program"));
    }
}
