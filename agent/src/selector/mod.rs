//! The selector: picks each flow's algorithm from its measurements, by a [`Policy`].
//!
//! One [`Selector`] per flow. It feeds every report to a [`FeatureTracker`] over the policy's
//! window and, once the window holds the policy's `min_samples`, asks the policy's rules:
//!
//! - **Spatial** decision (Mystique's per-flow choice at flow start): the first time there are
//!   enough samples, decide once; a decision for another algorithm than the flow's is acted on
//!   at once, without hysteresis.
//! - **Temporal** decisions (the path changed): on every later report, decide again; hand over
//!   only when the same other algorithm was chosen `agreeing` times in a row and the flow has
//!   been on its algorithm for `min_dwell` (datapath clock; since the flow's first report if it
//!   never handed over). A policy without temporal decisions never hands a flow over twice.
//! - **Gain gate** (a model with expected costs per class, `[decide] gain_gate`, on by default
//!   then): a temporal decision for algorithm `n` on a flow running `c` counts towards the
//!   streak only if the model's expected cost of `c` exceeds that of `n` by more than the
//!   measured cost of handing over from `c` to `n`; one that does not ends the streak, as a
//!   decision for `c` does. A flow on an algorithm that is not one of the model's classes (a
//!   pin, another policy's choice) is not gated. The handover's `reason` says the gain and the
//!   cost.
//!
//! The selector does not assume its decisions are carried out: the flow controller reports
//! every handover it makes, whatever its cause (a decision, a pin), with
//! [`Selector::note_handover`], and the selector compares its decisions with that. A decision
//! that is not acted on (a pinned flow) is made again later: a temporal one after another
//! `agreeing` reports. A flow that starts on another algorithm than the policy's initial one
//! says so with `note_handover(spec, 0)`.
//!
//! Cost per report: O(1) to absorb it; with temporal decisions, O(window + rules) to decide
//! (a model instead of rules: O(trees × depth), twice with the gain gate).
//! Nothing is allocated unless a decision is returned.

pub mod policy;
mod policy_file;
mod rules;

/// Features live in the `ccswitch-selector` crate, shared with the Python package.
pub use ccswitch_selector::features;

use std::cell::Cell;
use std::sync::Arc;

use ccswitch_algorithms::Measurement;
use serde::Serialize;

use self::features::{FeatureTracker, Features};
use self::policy::{Gain, Policy};

/// Which kind of decision asks for a handover.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionKind {
    /// The first decision of the policy for this flow (at flow start, or after a new policy
    /// was loaded).
    Spatial,
    /// A later decision, past the policy's hysteresis.
    Temporal,
}

/// The flow should be handed over to `algorithm` now.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Decision {
    /// Algorithm spec, as the policy names it.
    pub algorithm: String,
    pub kind: DecisionKind,
    /// The rule that decided, with its text (`rule 2: min_rtt_ms < ...`).
    pub reason: String,
    /// The features the rule saw.
    pub features: Features,
}

/// Consecutive decisions for the same algorithm other than the flow's.
#[derive(Clone, Copy, Debug)]
struct Streak {
    /// Position in the policy's algorithms.
    algorithm: usize,
    count: u32,
}

/// Chooses one flow's algorithm.
#[derive(Clone, Debug)]
pub struct Selector {
    policy: Arc<Policy>,
    tracker: FeatureTracker,
    /// The algorithm spec the flow runs, as last told (initially the policy's initial one).
    current: String,
    /// Its position in the policy's algorithms, if it is one of them.
    current_index: Option<usize>,
    first_report_us: Option<u64>,
    last_handover_us: u64,
    /// Whether the policy has made its first decision for this flow.
    decided: bool,
    streak: Option<Streak>,
    /// The features of the window as it stands, computed at most once per report: the
    /// decision and the registry's copy for the operator interface read the same value.
    features: Cell<Option<Features>>,
}

impl Selector {
    pub fn new(policy: Arc<Policy>) -> Self {
        Self {
            tracker: FeatureTracker::new(policy.window()),
            current: policy.initial().to_string(),
            current_index: position(&policy, policy.initial()),
            policy,
            first_report_us: None,
            last_handover_us: 0,
            decided: false,
            streak: None,
            features: Cell::new(None),
        }
    }

    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// The algorithm the flow runs before the first decision.
    #[cfg(test)]
    pub fn initial_algorithm(&self) -> &str {
        self.policy.initial()
    }

    /// The algorithm the selector believes the flow runs.
    pub fn current_algorithm(&self) -> &str {
        &self.current
    }

    /// Whether the current policy has made its first decision for this flow.
    pub fn decided(&self) -> bool {
        self.decided
    }

    pub fn features(&self) -> Features {
        if let Some(f) = self.features.get() {
            return f;
        }
        let f = self.tracker.features();
        self.features.set(Some(f));
        f
    }

    /// Absorb one report; `Some` when the flow should be handed over now. The caller confirms the
    /// handover with [`note_handover`](Self::note_handover).
    pub fn on_report(&mut self, m: &Measurement, mss_bytes: u64) -> Option<Decision> {
        self.tracker.observe(m, mss_bytes);
        self.features.set(None);
        self.first_report_us.get_or_insert(m.now_us);
        if !ccswitch_selector::decision_due(&self.tracker, self.policy.min_samples()) {
            return None;
        }
        if !self.decided {
            self.decided = true;
            if self.policy.spatial() {
                return self.spatial();
            }
        }
        if !self.policy.temporal() {
            return None;
        }
        self.temporal(m.now_us)
    }

    fn spatial(&self) -> Option<Decision> {
        let features = self.features();
        let choice = self.policy.choose(&features);
        let algorithm = &self.policy.algorithms()[choice.algorithm];
        (*algorithm != self.current).then(|| Decision {
            algorithm: algorithm.clone(),
            kind: DecisionKind::Spatial,
            reason: self.policy.reason(choice),
            features,
        })
    }

    fn temporal(&mut self, now_us: u64) -> Option<Decision> {
        let features = self.features();
        let choice = self.policy.choose(&features);
        let algorithm = &self.policy.algorithms()[choice.algorithm];
        if *algorithm == self.current {
            self.streak = None;
            return None;
        }
        let gain = self.current_index.and_then(|from| self.policy.handover_gain(&features, from, choice.algorithm));
        if gain.is_some_and(|g| !g.pays()) {
            self.streak = None;
            return None;
        }
        let count = match self.streak {
            Some(s) if s.algorithm == choice.algorithm => s.count + 1,
            _ => 1,
        };
        self.streak = Some(Streak { algorithm: choice.algorithm, count });
        let hysteresis = self.policy.hysteresis();
        if count < hysteresis.agreeing || !self.dwelt(now_us, hysteresis.min_dwell_us) {
            return None;
        }
        self.streak = None;
        let mut reason = self.policy.reason(choice);
        if let Some(g) = gain {
            reason.push_str(&gain_text(&g, &self.current, algorithm));
        }
        Some(Decision { algorithm: algorithm.clone(), kind: DecisionKind::Temporal, reason, features })
    }

    /// Whether the flow has been on its algorithm for `min_dwell_us`.
    fn dwelt(&self, now_us: u64, min_dwell_us: u64) -> bool {
        let since = self.last_handover_us.max(self.first_report_us.unwrap_or(0));
        now_us.saturating_sub(since) >= min_dwell_us
    }

    /// The flow now runs `algorithm` (spec), since `now_us` (datapath clock): after a handover
    /// the selector asked for, a pin, or any other change.
    pub fn note_handover(&mut self, algorithm: &str, now_us: u64) {
        self.current.clear();
        self.current.push_str(algorithm);
        self.current_index = position(&self.policy, algorithm);
        self.last_handover_us = now_us;
        self.streak = None;
    }

    /// Follow another policy from now on. Its first decision comes as a spatial one (if it
    /// decides spatially) as soon as the window has its samples. The samples gathered so far
    /// are kept if the new policy's window has the same shape; otherwise the window restarts.
    pub fn set_policy(&mut self, policy: Arc<Policy>) {
        if policy.window() != self.tracker.window() {
            self.tracker.restart_window(policy.window());
            self.features.set(None);
        }
        self.current_index = position(&policy, &self.current);
        self.policy = policy;
        self.decided = false;
        self.streak = None;
    }
}

/// Where `algorithm` is among the policy's algorithms.
fn position(policy: &Policy, algorithm: &str) -> Option<usize> {
    policy.algorithms().iter().position(|a| a == algorithm)
}

/// What a gated handover adds to its `reason`: `; gain 0.200 (expected cost 0.250 on cubic,
/// 0.050 on bbr) > handover cost 0.100`.
fn gain_text(g: &Gain, from: &str, to: &str) -> String {
    format!(
        "; gain {:.3} (expected cost {:.3} on {from}, {:.3} on {to}) > handover cost {:.3}",
        g.gain(),
        g.from_cost,
        g.to_cost,
        g.handover_cost
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::features::FeatureWindow;

    const MSS: u64 = 1_000;
    const MS: u64 = 1_000;

    /// Every report is one RTT sample; the window's last sample decides: below 50 ms cubic,
    /// else bbr.
    fn policy(temporal: bool, dwell_ms: u64, agreeing: u32) -> Arc<Policy> {
        let text = format!(
            r#"
            name = "test"
            initial = "reno"
            default = "bbr"
            [window]
            kind = "sliding"
            samples = 1
            [decide]
            spatial = true
            temporal = {temporal}
            [hysteresis]
            min_dwell_ms = {dwell_ms}
            agreeing = {agreeing}
            [[rule]]
            when = "mean_rtt_ms < 50"
            use = "cubic"
            "#
        );
        Arc::new(Policy::parse(&text, "test").unwrap())
    }

    fn report(now_ms: u64, rtt_ms: u64) -> Measurement {
        Measurement { now_us: now_ms * MS, rtt_us: rtt_ms * MS, acked_bytes: 10 * MSS, ..Measurement::default() }
    }

    /// Feed `rtts_ms` one report every 100 ms from `start_ms`, carrying out every decision;
    /// returns the handovers as (time ms, algorithm, kind).
    fn drive(sel: &mut Selector, start_ms: u64, rtts_ms: &[u64]) -> Vec<(u64, String, DecisionKind)> {
        let mut handovers = Vec::new();
        for (i, &rtt) in rtts_ms.iter().enumerate() {
            let now = start_ms + 100 * i as u64;
            if let Some(d) = sel.on_report(&report(now, rtt), MSS) {
                sel.note_handover(&d.algorithm, now * MS);
                handovers.push((now, d.algorithm, d.kind));
            }
        }
        handovers
    }

    fn at(now_ms: u64, algorithm: &str, kind: DecisionKind) -> (u64, String, DecisionKind) {
        (now_ms, algorithm.to_string(), kind)
    }

    #[test]
    fn no_decision_until_the_window_has_its_samples() {
        let text = r#"
            name = "n"
            initial = "reno"
            default = "bbr"
            [window]
            kind = "first"
            samples = 3
        "#;
        let p = Arc::new(Policy::parse(&format!("{text}\n[[rule]]\nwhen = \"mean_rtt_ms < 50\"\nuse = \"cubic\"\n"), "n").unwrap());
        let mut sel = Selector::new(p);
        assert_eq!(sel.initial_algorithm(), "reno");
        assert_eq!(sel.on_report(&report(0, 10), MSS), None);
        assert_eq!(sel.on_report(&report(10, 10), MSS), None);
        // A report without an RTT sample does not fill the window, nor does one within the
        // round trip of the last sample.
        assert_eq!(sel.on_report(&Measurement { now_us: 20 * MS, ..Default::default() }, MSS), None);
        assert_eq!(sel.on_report(&report(15, 10), MSS), None);
        let d = sel.on_report(&report(20, 10), MSS).expect("the third sample decides");
        assert_eq!((d.algorithm.as_str(), d.kind), ("cubic", DecisionKind::Spatial));
        assert_eq!(d.reason, "rule 1: mean_rtt_ms < 50");
        assert_eq!(d.features.samples, 3);
    }

    #[test]
    fn the_spatial_decision_is_immediate_and_skips_a_decision_for_the_current_algorithm() {
        let mut sel = Selector::new(policy(false, 1_000_000, 1_000));
        assert_eq!(drive(&mut sel, 0, &[10]), [at(0, "cubic", DecisionKind::Spatial)]);
        let mut sel = Selector::new(policy(false, 0, 1));
        sel.note_handover("bbr", 0);
        assert!(drive(&mut sel, 0, &[100]).is_empty());
        assert!(sel.decided());
    }

    #[test]
    fn spatial_only_policies_never_hand_over_again() {
        let mut sel = Selector::new(policy(false, 0, 1));
        let handovers = drive(&mut sel, 0, &[10, 100, 100, 100, 100, 10, 100, 100]);
        assert_eq!(handovers, [at(0, "cubic", DecisionKind::Spatial)]);
        assert_eq!(sel.current_algorithm(), "cubic");
    }

    #[test]
    fn mcc_wifi_moves_a_jittery_flow_to_westwood_and_leaves_a_steady_one() {
        let p = Arc::new(Policy::builtin("mcc-wifi").unwrap());
        let n = match p.window() {
            FeatureWindow::FirstSamples(n) => n,
            w => panic!("mcc-wifi should look at the first samples, has {w:?}"),
        };
        // Jitter: samples over [20, 60] ms, cov about 0.35, range about 1.
        let jitter: Vec<u64> = (0..n as u64).map(|i| 20 + (i * 37) % 41).collect();
        let mut sel = Selector::new(Arc::clone(&p));
        let handovers = drive(&mut sel, 0, &jitter);
        assert_eq!(handovers.len(), 1, "{handovers:?}");
        assert_eq!((handovers[0].1.as_str(), handovers[0].2), ("westwood", DecisionKind::Spatial));
        // Later steadiness changes nothing: the decision is made once.
        assert!(drive(&mut sel, 10_000, &[30; 40]).is_empty());
        // Steady with a slow rise (the flow's own queue): 30 to 40 ms.
        let steady: Vec<u64> = (0..n as u64).map(|i| 30 + i / 2).collect();
        let mut sel = Selector::new(p);
        assert!(drive(&mut sel, 0, &steady).is_empty(), "{:?}", sel.features());
        assert_eq!(sel.current_algorithm(), "bbr");
    }

    #[test]
    fn temporal_decisions_need_agreeing_decisions_in_a_row() {
        let mut sel = Selector::new(policy(true, 0, 3));
        let handovers = drive(&mut sel, 0, &[10, 100, 100, 10, 100, 100, 100, 100]);
        // Spatial at 0 ms; the first run of two 100 ms samples is too short; the second run
        // hands over at its third sample.
        assert_eq!(handovers, [at(0, "cubic", DecisionKind::Spatial), at(600, "bbr", DecisionKind::Temporal)]);
    }

    #[test]
    fn an_alternating_series_does_not_flap() {
        let mut sel = Selector::new(policy(true, 0, 2));
        let series: Vec<u64> = (0..50).map(|i| if i % 2 == 0 { 10 } else { 100 }).collect();
        let handovers = drive(&mut sel, 0, &series);
        assert_eq!(handovers, [at(0, "cubic", DecisionKind::Spatial)]);
    }

    #[test]
    fn the_dwell_time_is_respected() {
        let mut sel = Selector::new(policy(true, 1_000, 1));
        // Spatial handover to cubic at 0 ms; bbr is asked for from 100 ms on, allowed at 1 000 ms;
        // then cubic again from 1 100 ms, allowed at 2 000 ms.
        let series: Vec<u64> = [10].into_iter().chain([100; 10]).chain([10; 12]).collect();
        let handovers = drive(&mut sel, 0, &series);
        assert_eq!(
            handovers,
            [
                at(0, "cubic", DecisionKind::Spatial),
                at(1_000, "bbr", DecisionKind::Temporal),
                at(2_000, "cubic", DecisionKind::Temporal)
            ]
        );
    }

    #[test]
    fn the_dwell_counts_from_the_first_report_without_a_handover() {
        let mut sel = Selector::new(policy(true, 1_000, 1));
        sel.note_handover("cubic", 0);
        // The clock starts at 5 s: the flow has been on cubic since its first report.
        let handovers = drive(&mut sel, 5_000, &[10, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100]);
        assert_eq!(handovers, [at(6_000, "bbr", DecisionKind::Temporal)]);
    }

    #[test]
    fn a_decision_not_acted_on_comes_again() {
        let mut sel = Selector::new(policy(true, 0, 2));
        sel.note_handover("westwood", 0); // pinned, say
        let mut kinds = Vec::new();
        for i in 0..5 {
            if let Some(d) = sel.on_report(&report(i * 100, 100), MSS) {
                kinds.push((i, d.kind));
            }
        }
        // Spatial at once, then every 2 agreeing reports.
        assert_eq!(kinds, [(0, DecisionKind::Spatial), (2, DecisionKind::Temporal), (4, DecisionKind::Temporal)]);
    }

    #[test]
    fn mystique_hands_over_with_its_hysteresis() {
        let p = Arc::new(Policy::builtin("mystique").unwrap());
        let h = p.hysteresis();
        let mut sel = Selector::new(Arc::clone(&p));
        let mut handovers = Vec::new();
        let mut now_us = 0;
        let mut step = |sel: &mut Selector, lost: u64, handovers: &mut Vec<(u64, String)>| {
            now_us += 20 * MS;
            let m = Measurement { now_us, rtt_us: 20 * MS, acked_bytes: 20 * MSS, lost_packets: lost, ..Default::default() };
            if let Some(d) = sel.on_report(&m, MSS) {
                sel.note_handover(&d.algorithm, now_us);
                handovers.push((now_us, d.algorithm));
            }
        };
        // Clean path: hybla after min_samples reports.
        for _ in 0..p.min_samples() {
            step(&mut sel, 0, &mut handovers);
        }
        assert_eq!(handovers, [(p.min_samples() as u64 * 20 * MS, "hybla".to_string())]);
        // One loss per report from now: illinois, but not before the dwell time is over.
        let hybla_at = handovers[0].0;
        while handovers.len() < 2 {
            step(&mut sel, 1, &mut handovers);
        }
        assert_eq!(handovers[1].1, "illinois");
        assert!(handovers[1].0 >= hybla_at + h.min_dwell_us, "{handovers:?}");
        assert!(handovers[1].0 < hybla_at + h.min_dwell_us + 20 * MS * u64::from(h.agreeing), "{handovers:?}");
    }

    #[test]
    fn a_new_policy_decides_afresh() {
        let mut sel = Selector::new(policy(false, 0, 1));
        assert_eq!(drive(&mut sel, 0, &[10, 100]).len(), 1);
        // Same window: the samples stay and the next report decides under the new policy.
        sel.set_policy(policy(false, 0, 1));
        assert!(!sel.decided());
        assert_eq!(drive(&mut sel, 1_000, &[100]), [at(1_000, "bbr", DecisionKind::Spatial)]);
        // Another window: it restarts, so the mystique policy waits for its own samples.
        let mystique = Arc::new(Policy::builtin("mystique").unwrap());
        let min = mystique.min_samples();
        sel.set_policy(mystique);
        assert_eq!(sel.features().samples, 0);
        assert!(sel.features().bytes > 0.0, "whole-flow totals survive");
        let handovers = drive(&mut sel, 2_000, &vec![30; min]);
        assert_eq!(handovers, [at(2_000 + 100 * (min as u64 - 1), "hybla", DecisionKind::Spatial)]);
    }
}

#[cfg(test)]
mod first_decision_tests {
    use super::*;
    use super::features::FeatureWindow;

    const MSS: u64 = 1_448;

    /// A flow's reports, irregular on purpose: RTTs of 20-220 ms, some reports without an RTT
    /// sample, losses, partial segments, rates that come and go.
    fn reports(seed: u64, n: usize) -> Vec<Measurement> {
        let mut rng = ccswitch_algorithms::xorshift::XorShift64::new(seed);
        let mut next = |bound: u64| rng.below(bound);
        let mut now_us = 5_000_000;
        (0..n)
            .map(|_| {
                now_us += 1_000 + next(80_000);
                Measurement {
                    now_us,
                    rtt_us: if next(5) == 0 { 0 } else { 20_000 + next(200_000) },
                    acked_bytes: next(40) * 1_000 + next(1_000),
                    lost_packets: if next(8) == 0 { 1 + next(4) } else { 0 },
                    delivery_rate_bytes_per_s: if next(3) == 0 { 0 } else { next(10_000_000) },
                    timeout: next(100) == 0,
                    ..Measurement::default()
                }
            })
            .collect()
    }

    fn always_bbr(window: &str, samples: usize, min_samples: usize) -> Arc<Policy> {
        let text = format!(
            "name = \"p\"\ninitial = \"reno\"\n[window]\nkind = \"{window}\"\nsamples = {samples}\n[decide]\nmin_samples = {min_samples}\n[[rule]]\nuse = \"bbr\"\n"
        );
        Arc::new(Policy::parse(&text, "p").unwrap())
    }

    #[test]
    fn the_selector_decides_on_the_features_the_dataset_computes_for_the_same_reports() {
        for (kind, samples, min_samples) in [("first", 20, 8), ("first", 5, 5), ("sliding", 10, 10), ("sliding", 30, 3)] {
            let policy = always_bbr(kind, samples, min_samples);
            for seed in 1..40 {
                let reports = reports(seed, 60);
                let mut sel = Selector::new(Arc::clone(&policy));
                let decided = reports.iter().enumerate().find_map(|(i, m)| sel.on_report(m, MSS).map(|d| (i, d)));
                let (i, d) = decided.expect("60 reports hold enough RTT samples");
                let replay = ccswitch_selector::first_decision(&reports, MSS, policy.window(), min_samples);
                assert_eq!(replay.report_index, Some(i), "{kind} {samples} seed {seed}");
                assert_eq!(replay.now_us, Some(reports[i].now_us));
                assert_eq!(replay.features, d.features, "{kind} {samples} seed {seed}");
            }
        }
        // A flow too short for a decision: the selector never decides, the replay says so.
        let policy = always_bbr("first", 20, 20);
        let mut sel = Selector::new(Arc::clone(&policy));
        let short = reports(7, 10);
        assert!(short.iter().all(|m| sel.on_report(m, MSS).is_none()));
        let replay = ccswitch_selector::first_decision(&short, MSS, FeatureWindow::FirstSamples(20), 20);
        assert_eq!((replay.report_index, replay.features), (None, sel.features()));
    }

    #[test]
    fn a_model_policy_hands_over_when_its_model_chooses_another_algorithm() {
        let dir = std::env::temp_dir().join(format!("ccswitch-selector-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // One split on mean_rtt_ms at 100 ms: below, cubic; above, bbr.
        let model = r#"{"format": "ccswitch-model", "version": 1, "kind": "forest", "name": "m",
            "features": ["mean_rtt_ms"], "classes": ["cubic", "bbr"],
            "window": {"kind": "sliding", "samples": 4}, "decide": {"min_samples": 4},
            "trees": [{"children_left": [1, -1, -1], "children_right": [2, -1, -1], "feature": [0, -2, -2],
                       "threshold": [100.0, -2.0, -2.0], "value": [[0.5, 0.5], [1, 0], [0.1, 0.9]]}]}"#;
        std::fs::write(dir.join("m.json"), model).unwrap();
        let policy = "name = \"learned\"\ninitial = \"cubic\"\nmodel = \"m.json\"\n[window]\nkind = \"sliding\"\nsamples = 4\n[decide]\ntemporal = true\n[hysteresis]\nmin_dwell_ms = 0\nagreeing = 2\n";
        std::fs::write(dir.join("p.toml"), policy).unwrap();
        let p = Arc::new(Policy::load(&dir.join("p.toml").display().to_string()).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
        let mut sel = Selector::new(p);
        let m = |now_ms: u64, rtt_ms: u64| Measurement { now_us: now_ms * 1_000, rtt_us: rtt_ms * 1_000, acked_bytes: 10 * MSS, ..Default::default() };
        // Four short RTTs: the model keeps cubic, the flow's initial algorithm.
        for i in 0..4 {
            assert_eq!(sel.on_report(&m(i * 100, 40), MSS), None);
        }
        // A long RTT lifts the mean above 100 ms (40, 40, 40, 300: 105): a first decision for
        // bbr; the second agreeing one (40, 40, 300, 300: 170), a round trip later, hands it over.
        assert_eq!(sel.on_report(&m(600, 300), MSS), None, "first decision for bbr");
        let d = sel.on_report(&m(900, 300), MSS).expect("second agreeing decision");
        assert_eq!((d.algorithm.as_str(), d.kind), ("bbr", DecisionKind::Temporal));
        assert_eq!(d.reason, "model m: bbr with probability 0.900");
        assert_eq!(d.features.mean_rtt_ms, 170.0);
    }
}

#[cfg(test)]
mod gain_gate_tests {
    use super::*;

    const MSS: u64 = 1_000;

    /// One tree over mean_rtt_ms choosing between cubic and bbr: up to 100 ms cubic; above,
    /// bbr, with cubic expected to cost `mid` (100-200 ms) or `high` (above 200 ms) more than
    /// bbr. Handing over from cubic to bbr costs 0.1; from bbr to cubic, the default 0.5.
    fn model(mid: f64, high: f64) -> String {
        format!(
            r#"{{"format": "ccswitch-model", "version": 1, "kind": "forest", "name": "gated",
            "features": ["mean_rtt_ms"], "classes": ["cubic", "bbr"],
            "window": {{"kind": "sliding", "samples": 1}}, "decide": {{"min_samples": 1}},
            "trees": [{{"children_left": [1, -1, 3, -1, -1], "children_right": [2, -1, 4, -1, -1],
                        "feature": [0, -2, 0, -2, -2], "threshold": [100.0, -2.0, 200.0, -2.0, -2.0],
                        "value": [[0.5, 0.5], [1, 0], [0.2, 0.8], [0.2, 0.8], [0.1, 0.9]],
                        "cost": [[0, 0], [0, 0.3], [0, 0], [{mid}, 0], [{high}, 0]]}}],
            "handover_cost": {{"default": 0.5, "pairs": {{"cubic>bbr": 0.1}}}}}}"#
        )
    }

    /// A temporal policy on `model` (written to a file of its own), with `agreeing` and no
    /// dwell; `extra` lines go into [decide].
    fn policy(test: &str, model: &str, agreeing: u32, extra: &str) -> Arc<Policy> {
        let path = std::env::temp_dir().join(format!("ccswitch-gain-gate-{}-{test}.json", std::process::id()));
        std::fs::write(&path, model).unwrap();
        let text = format!(
            "name = \"gated\"\ninitial = \"cubic\"\nmodel = \"{}\"\n[window]\nkind = \"sliding\"\nsamples = 1\n[decide]\ntemporal = true\n{extra}\n[hysteresis]\nmin_dwell_ms = 0\nagreeing = {agreeing}\n",
            path.display()
        );
        let p = Policy::parse(&text, test);
        std::fs::remove_file(&path).unwrap();
        Arc::new(p.unwrap())
    }

    /// One report a second (each a new RTT sample, the window's only one); returns the
    /// decisions as (report index, algorithm, reason), carrying each out.
    fn drive(sel: &mut Selector, rtts_ms: &[u64]) -> Vec<(usize, String, String)> {
        let mut decisions = Vec::new();
        for (i, &rtt) in rtts_ms.iter().enumerate() {
            let now_us = 1_000_000 * i as u64;
            let m = Measurement { now_us, rtt_us: rtt * 1_000, acked_bytes: 10 * MSS, ..Default::default() };
            if let Some(d) = sel.on_report(&m, MSS) {
                sel.note_handover(&d.algorithm, now_us);
                decisions.push((i, d.algorithm, d.reason));
            }
        }
        decisions
    }

    #[test]
    fn a_gain_below_the_handover_cost_never_hands_over() {
        // bbr is chosen at every report after the first, but gains only 0.05 over cubic.
        let p = policy("below", &model(0.05, 0.05), 2, "");
        assert!(p.gain_gate());
        let mut sel = Selector::new(p);
        assert!(drive(&mut sel, &[50, 150, 150, 150, 150, 150, 300, 300, 300, 300, 300, 300]).is_empty());
        assert_eq!(sel.current_algorithm(), "cubic");
    }

    #[test]
    fn a_gain_equal_to_the_handover_cost_does_not_pay() {
        let mut sel = Selector::new(policy("equal", &model(0.1, 0.1), 1, ""));
        assert!(drive(&mut sel, &[50, 150, 150, 150, 300, 300]).is_empty());
    }

    #[test]
    fn a_gain_above_the_handover_cost_hands_over_after_agreeing_decisions() {
        let mut sel = Selector::new(policy("above", &model(0.05, 0.25), 3, ""));
        // 150 ms: bbr chosen but gains 0.05, below the 0.1 the handover costs; 300 ms: gains
        // 0.25. Reports 1-3 do not count; 4 and 5 do, then 6 (150 ms) ends the streak; 7, 8
        // and 9 agree and hand over at 9.
        let decisions = drive(&mut sel, &[50, 150, 150, 150, 300, 300, 150, 300, 300, 300, 300]);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        let (at, algorithm, reason) = &decisions[0];
        assert_eq!((*at, algorithm.as_str()), (9, "bbr"));
        assert_eq!(
            reason,
            "model gated: bbr with probability 0.900; gain 0.250 (expected cost 0.250 on cubic, 0.000 on bbr) > handover cost 0.100"
        );
        // Back to cubic would gain 0.3 on short RTTs, less than the default 0.5 it costs.
        assert!(drive(&mut sel, &[50; 10]).is_empty());
        assert_eq!(sel.current_algorithm(), "bbr");
    }

    #[test]
    fn without_the_gate_the_hysteresis_alone_decides() {
        // The same model and series as above with the gate off: the third report hands over.
        let p = policy("off", &model(0.05, 0.05), 3, "gain_gate = false");
        assert!(!p.gain_gate());
        let mut sel = Selector::new(p);
        let decisions = drive(&mut sel, &[50, 150, 150, 150, 300]);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!((decisions[0].0, decisions[0].2.as_str()), (3, "model gated: bbr with probability 0.800"));
        // A model without costs: likewise.
        let plain = model(0.05, 0.05).replace(",\n                        \"cost\": [[0, 0], [0, 0.3], [0, 0], [0.05, 0], [0.05, 0]]", "").replace(
            ",\n            \"handover_cost\": {\"default\": 0.5, \"pairs\": {\"cubic>bbr\": 0.1}}",
            "",
        );
        let p = policy("plain", &plain, 3, "");
        assert!(!p.model().unwrap().has_costs() && !p.gain_gate());
        let mut sel = Selector::new(p);
        assert_eq!(drive(&mut sel, &[50, 150, 150, 150, 300]).len(), 1);
    }

    #[test]
    fn a_flow_on_an_algorithm_the_model_does_not_know_is_not_gated() {
        let mut sel = Selector::new(policy("unknown", &model(0.05, 0.05), 2, ""));
        sel.note_handover("reno", 0); // pinned there, say, then unpinned
        let decisions = drive(&mut sel, &[150, 150, 150]);
        // A spatial decision is never gated: bbr at once.
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!((decisions[0].0, decisions[0].1.as_str()), (0, "bbr"));
        // Temporal decisions from reno: bbr gains only 0.05 over cubic, but reno has no
        // expected cost to compare, so the hysteresis alone decides.
        let mut sel = Selector::new(policy("unknown-temporal", &model(0.05, 0.05), 2, "spatial = false"));
        sel.note_handover("reno", 0);
        let decisions = drive(&mut sel, &[150, 150, 150]);
        assert_eq!(decisions.len(), 1, "{decisions:?}");
        assert_eq!((decisions[0].0, decisions[0].2.as_str()), (1, "model gated: bbr with probability 0.800"));
    }
}
