//! The selector's policies: ordered rules over a flow's [`Features`] that name the algorithm the
//! flow should run, read from TOML files.
//!
//! A policy is a built-in or a policy file: [`super::policy_file`] has the format, the checks
//! made at load time and the spec syntax of [`Policy::load`] (a name or a path, then
//! `:KEY=VALUE,...`). A rule's `when` is in the rule language of [`super::rules`]. Rules are
//! tried in order; the first that matches decides, and when none does, the default. A policy
//! that names a learned model decides by the model instead.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use ccswitch_selector::model::{Model, MAX_CLASSES};
use ccswitch_selector::objective::Objective;

use super::features::{FeatureWindow, Features};
use super::policy_file::{self, split_spec};
use super::rules::{PolicyParam, Rule};
use crate::memory::MemorySettings;

const MYSTIQUE: &str = include_str!("../../policies/mystique.toml");
const MCC_WIFI: &str = include_str!("../../policies/mcc-wifi.toml");

/// How a temporal decision is held back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hysteresis {
    /// Least time on an algorithm before the next handover, µs of the datapath clock.
    pub min_dwell_us: u64,
    /// Equal decisions in a row needed for a handover.
    pub agreeing: u32,
}

/// Whether a temporal handover pays for itself, by the model's expected costs (relative regret
/// under its objective) of the flow's algorithm and of the chosen one.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gain {
    /// Expected cost of staying on the flow's algorithm.
    pub from_cost: f64,
    /// Expected cost of the chosen algorithm.
    pub to_cost: f64,
    /// The measured cost of the handover itself.
    pub handover_cost: f64,
}

impl Gain {
    /// What the handover is expected to save.
    pub fn gain(&self) -> f64 {
        self.from_cost - self.to_cost
    }

    /// Whether the saving exceeds the handover's cost (strictly: an even trade is not made).
    pub fn pays(&self) -> bool {
        self.gain() > self.handover_cost
    }
}

/// What a policy chose for one set of features.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Choice {
    /// Position in [`Policy::algorithms`].
    pub algorithm: usize,
    pub by: ChosenBy,
}

/// What made a [`Choice`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChosenBy {
    /// The rule at this position (0-based) matched.
    Rule(usize),
    /// No rule matched.
    Default,
    /// The policy's model, with this probability for the chosen algorithm.
    Model { probability: f64 },
}

/// A loaded, checked policy. Its fields are filled by [`policy_file`], which checks them.
#[derive(Clone, Debug)]
pub struct Policy {
    pub(super) name: String,
    pub(super) description: String,
    pub(super) origin: String,
    pub(super) initial: String,
    pub(super) default: Option<usize>,
    pub(super) window: FeatureWindow,
    pub(super) min_samples: usize,
    pub(super) spatial: bool,
    pub(super) temporal: bool,
    pub(super) hysteresis: Hysteresis,
    pub(super) params: Vec<PolicyParam>,
    pub(super) rules: Vec<Rule>,
    /// Decides in place of the rules when present.
    pub(super) model: Option<Arc<Model>>,
    /// What the policy optimises: as named, else the model's, else `tct`.
    pub(super) objective: Objective,
    /// Temporal handovers must pay for themselves by the model's costs.
    pub(super) gain_gate: bool,
    /// Every algorithm the rules and the default may choose, without repeats, in order; with a
    /// model, its classes in order.
    pub(super) algorithms: Vec<String>,
    pub(super) memory: MemorySettings,
}

impl Policy {
    /// The policies built into the agent.
    pub const BUILTIN_NAMES: &'static [&'static str] = &["mystique", "mcc-wifi"];

    /// The settings a spec may override besides the params.
    pub const SETTINGS: &'static [&'static str] = &[
        "initial",
        "default",
        "window.kind",
        "window.samples",
        "decide.spatial",
        "decide.temporal",
        "decide.min_samples",
        "decide.gain_gate",
        "hysteresis.min_dwell_ms",
        "hysteresis.agreeing",
        "memory.enabled",
        "memory.prefix_v4",
        "memory.prefix_v6",
        "memory.half_life_s",
        "memory.min_score",
        "memory.capacity",
    ];

    fn builtin_text(name: &str) -> Option<&'static str> {
        match name {
            "mystique" => Some(MYSTIQUE),
            "mcc-wifi" => Some(MCC_WIFI),
            _ => None,
        }
    }

    /// A built-in policy by name.
    #[cfg(test)]
    pub fn builtin(name: &str) -> Result<Policy> {
        Self::load_overridden(name, None)
    }

    /// Load a policy from a spec: `NAME`, `NAME:KEY=VALUE,...`, `PATH` or `PATH:KEY=VALUE,...`
    /// (a path contains '/' or ends in `.toml`).
    pub fn load(spec: &str) -> Result<Policy> {
        let (base, overrides) = split_spec(spec);
        Self::load_overridden(base, overrides)
    }

    fn load_overridden(base: &str, overrides: Option<&str>) -> Result<Policy> {
        let (text, origin, dir) = if base.contains('/') || base.ends_with(".toml") {
            let text = std::fs::read_to_string(base)
                .with_context(|| format!("cannot read policy file {base}"))?;
            (text, base.to_string(), Path::new(base).parent().map(Path::to_path_buf))
        } else {
            let text = Self::builtin_text(base).ok_or_else(|| {
                anyhow!(
                    "no built-in policy {base:?}; built-in: {} (a policy file's path contains '/' or ends in .toml)",
                    Self::BUILTIN_NAMES.join(", ")
                )
            })?;
            (text.to_string(), format!("built-in {base}"), None)
        };
        policy_file::read(&text, &origin, overrides, dir.as_deref())
    }

    /// Parse a policy from TOML text; `origin` (a path, or a description) prefixes errors. A
    /// relative `model` path is taken from the current directory.
    pub fn parse(text: &str, origin: &str) -> Result<Policy> {
        policy_file::read(text, origin, None, None)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn description(&self) -> &str {
        &self.description
    }

    /// Where the policy came from: its file, or `built-in NAME`.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The algorithm a flow runs before the first decision.
    pub fn initial(&self) -> &str {
        &self.initial
    }

    /// The algorithm chosen when no rule matches, if the policy has one.
    #[cfg(test)]
    pub fn default_algorithm(&self) -> Option<&str> {
        self.default.map(|i| self.algorithms[i].as_str())
    }

    pub fn window(&self) -> FeatureWindow {
        self.window
    }

    /// Samples in the window before the first decision.
    pub fn min_samples(&self) -> usize {
        self.min_samples
    }

    pub fn spatial(&self) -> bool {
        self.spatial
    }

    pub fn temporal(&self) -> bool {
        self.temporal
    }

    pub fn hysteresis(&self) -> Hysteresis {
        self.hysteresis
    }

    #[cfg(test)]
    pub fn param(&self, name: &str) -> Option<f64> {
        self.params.iter().find(|p| p.name == name).map(|p| p.value)
    }

    /// Every algorithm the policy may choose (rules, then the default), without repeats.
    pub fn algorithms(&self) -> &[String] {
        &self.algorithms
    }

    /// The `[memory]` settings: per-destination memory of the algorithms flows ended on.
    pub fn memory(&self) -> &MemorySettings {
        &self.memory
    }

    /// Apply the rules: the algorithm and why (`rule 2: ...` or `default: no rule matched`).
    #[cfg(test)]
    pub fn decide(&self, features: &Features) -> (String, String) {
        let choice = self.choose(features);
        (self.algorithms[choice.algorithm].clone(), self.reason(choice))
    }

    /// The model that decides in place of rules, if the policy names one.
    pub fn model(&self) -> Option<&Model> {
        self.model.as_deref()
    }

    /// What the policy optimises (as named, else its model's, else `tct`).
    #[cfg(test)]
    pub fn objective(&self) -> &Objective {
        &self.objective
    }

    /// Whether temporal handovers are gated by the model's expected costs.
    #[cfg(test)]
    pub fn gain_gate(&self) -> bool {
        self.gain_gate
    }

    /// With the gain gate on: the expected costs of algorithms `from` and `to` (positions in
    /// [`algorithms`](Self::algorithms), the model's classes) for these features, and the
    /// cost of handing over between them; `None` when the gate is off. Allocates nothing.
    pub fn handover_gain(&self, features: &Features, from: usize, to: usize) -> Option<Gain> {
        let model = self.model.as_deref().filter(|_| self.gain_gate)?;
        let mut costs = [0f64; MAX_CLASSES];
        let costs = &mut costs[..model.classes().len()];
        if !model.expected_costs(features, costs) {
            return None;
        }
        Some(Gain { from_cost: costs[from], to_cost: costs[to], handover_cost: model.handover_cost(from, to) })
    }

    /// Apply the rules (or the model) without allocating.
    pub fn choose(&self, features: &Features) -> Choice {
        if let Some(model) = &self.model {
            let (algorithm, probability) = model.choose(features);
            return Choice { algorithm, by: ChosenBy::Model { probability } };
        }
        for (i, rule) in self.rules.iter().enumerate() {
            if rule.when.as_ref().is_none_or(|c| c.holds(&self.params, features)) {
                return Choice { algorithm: rule.algorithm, by: ChosenBy::Rule(i) };
            }
        }
        let algorithm = self.default.expect("checked at load: a policy without default ends in a rule that always matches");
        Choice { algorithm, by: ChosenBy::Default }
    }

    /// Why `choice` was made: the rule's number and text, params shown with their values; or
    /// the model's name and the probability it gave the algorithm.
    pub fn reason(&self, choice: Choice) -> String {
        match choice.by {
            ChosenBy::Default => "default: no rule matched".to_string(),
            ChosenBy::Rule(i) => match &self.rules[i].when {
                None => format!("rule {}: always", i + 1),
                Some(c) => format!("rule {}: {}", i + 1, c.render(&self.params)),
            },
            ChosenBy::Model { probability } => format!(
                "model {}: {} with probability {probability:.3}",
                self.model.as_ref().map_or("?", |m| m.name()),
                self.algorithms[choice.algorithm]
            ),
        }
    }

    /// The policy as JSON (`ccswitch-agent --list-policies --json`): its fields, its rules
    /// (`when` with params shown as `name (value)`, null for a rule that always matches) and
    /// `summary`, the text of [`Display`](fmt::Display).
    pub fn to_json(&self) -> serde_json::Value {
        let (kind, samples) = match self.window {
            FeatureWindow::FirstSamples(n) => ("first", n),
            FeatureWindow::Sliding(n) => ("sliding", n),
        };
        let rules: Vec<_> = self
            .rules
            .iter()
            .map(|r| serde_json::json!({"when": r.when.as_ref().map(|c| c.render(&self.params)), "use": self.algorithms[r.algorithm]}))
            .collect();
        let params: serde_json::Map<String, serde_json::Value> =
            self.params.iter().map(|p| (p.name.clone(), serde_json::json!(p.value))).collect();
        serde_json::json!({
            "name": self.name,
            "description": self.description,
            "origin": self.origin,
            "initial": self.initial,
            "default": self.default.map(|i| &self.algorithms[i]),
            "objective": self.objective.to_string(),
            "window": {"kind": kind, "samples": samples},
            "min_samples": self.min_samples,
            "spatial": self.spatial,
            "temporal": self.temporal,
            "hysteresis": self.temporal.then(|| serde_json::json!({
                "min_dwell_ms": self.hysteresis.min_dwell_us / 1_000,
                "agreeing": self.hysteresis.agreeing,
            })),
            "gain_gate": self.gain_gate,
            "params": params,
            "rules": rules,
            "model": self.model.as_ref().map(|m| serde_json::json!({
                "name": m.name(),
                "file": m.origin(),
                "features": m.feature_names().collect::<Vec<_>>(),
                "classes": m.classes(),
                "trees": m.trees(),
                "nodes": m.nodes(),
                "max_depth": m.max_depth(),
                "objective": m.objective().to_string(),
                "costs": m.has_costs(),
                "handover_cost": self.handover_costs_json(m),
            })),
            "memory": self.memory.to_json(),
            "summary": self.to_string(),
        })
    }

    /// Every ordered pair of the model's classes, `"FROM>TO": cost`.
    fn handover_costs_json(&self, m: &Model) -> serde_json::Value {
        let classes = m.classes();
        let mut pairs = serde_json::Map::new();
        for (f, from) in classes.iter().enumerate() {
            for (t, to) in classes.iter().enumerate().filter(|&(t, _)| t != f) {
                pairs.insert(format!("{from}>{to}"), serde_json::json!(m.handover_cost(f, t)));
            }
        }
        serde_json::Value::Object(pairs)
    }
}

impl fmt::Display for Policy {
    /// A summary: name, origin, window, decisions, then the rules.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} ({}): {}", self.name, self.origin, self.description)?;
        write!(f, "  window: {}; first decision after {} samples; ", self.window, self.min_samples)?;
        match (self.spatial, self.temporal) {
            (true, false) => writeln!(f, "decides once")?,
            (s, _) => writeln!(
                f,
                "{}on every report past its hysteresis (dwell {} ms, {} agreeing{})",
                if s { "decides at once, then " } else { "decides " },
                self.hysteresis.min_dwell_us / 1_000,
                self.hysteresis.agreeing,
                if self.gain_gate { ", each gaining more than the handover costs" } else { "" }
            )?,
        }
        writeln!(f, "  initial: {}", self.initial)?;
        writeln!(f, "  objective: {}", self.objective)?;
        if let Some(m) = &self.model {
            writeln!(
                f,
                "  model: {} ({}): {} trees, max depth {}, over {}; chooses {}; trained for {}{}",
                m.name(),
                m.origin(),
                m.trees(),
                m.max_depth(),
                m.feature_names().collect::<Vec<_>>().join(", "),
                m.classes().join(", "),
                m.objective(),
                if m.has_costs() { ", with expected costs" } else { "" }
            )?;
        }
        writeln!(f, "  memory: {}", self.memory)?;
        for (i, rule) in self.rules.iter().enumerate() {
            let when = rule.when.as_ref().map_or_else(|| "always".to_string(), |c| c.render(&self.params));
            writeln!(f, "  rule {}: {when} -> {}", i + 1, self.algorithms[rule.algorithm])?;
        }
        if let Some(d) = self.default {
            writeln!(f, "  default: {}", self.algorithms[d])?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::policy_file::fixtures::{features, model_with_costs, Files, MINIMAL, MODEL, POLICY};
    use super::*;

    #[test]
    fn the_minimal_policy_loads() {
        let p = Policy::parse(MINIMAL, "test.toml").unwrap();
        assert_eq!((p.name(), p.initial(), p.default_algorithm()), ("t", "cubic", Some("bbr")));
        assert_eq!(p.window(), FeatureWindow::Sliding(4));
        assert_eq!(p.min_samples(), 4);
        assert!(p.spatial() && !p.temporal());
        assert_eq!(p.algorithms(), ["reno", "bbr"]);
        let f = Features { mean_rtt_ms: 10.0, ..Features::default() };
        assert_eq!(p.decide(&f), ("reno".to_string(), "rule 1: mean_rtt_ms < limit_ms (40)".to_string()));
        let f = Features { mean_rtt_ms: 40.0, ..Features::default() };
        assert_eq!(p.decide(&f), ("bbr".to_string(), "default: no rule matched".to_string()));
    }

    #[test]
    fn a_last_rule_without_when_replaces_the_default() {
        let text = MINIMAL.replace("default = \"bbr\"", "") + "\n[[rule]]\nuse = \"westwood\"\n";
        let p = Policy::parse(&text, "x").unwrap();
        assert_eq!(p.default_algorithm(), None);
        let f = Features { mean_rtt_ms: 90.0, ..Features::default() };
        assert_eq!(p.decide(&f), ("westwood".to_string(), "rule 2: always".to_string()));
    }

    #[test]
    fn mystique_follows_table_one() {
        let p = Policy::builtin("mystique").unwrap();
        assert_eq!(p.initial(), "cubic");
        assert!(matches!(p.window(), FeatureWindow::Sliding(_)) && p.spatial() && p.temporal());
        assert_eq!(p.decide(&features(20.0, 0.0)).0, "hybla");
        assert_eq!(p.decide(&features(200.0, 0.0)).0, "hybla");
        let (alg, reason) = p.decide(&features(20.0, 0.01));
        assert_eq!(alg, "illinois");
        assert_eq!(reason, "rule 2: min_rtt_ms < rtt_threshold_ms (50) and loss_rate > loss_threshold (0)");
        assert_eq!(p.decide(&features(100.0, 0.01)), ("bbr".to_string(), "default: no rule matched".to_string()));
        let mut algorithms = p.algorithms().to_vec();
        algorithms.sort();
        assert_eq!(algorithms, ["bbr", "hybla", "illinois"]);
    }

    #[test]
    fn every_builtin_loads_and_describes_itself() {
        for name in Policy::BUILTIN_NAMES {
            let p = Policy::builtin(name).unwrap();
            assert_eq!(p.name(), *name);
            assert!(!p.description().is_empty());
            let text = p.to_string();
            assert!(text.contains("rule 1:") && text.contains(p.initial()), "{text}");
        }
    }

    #[test]
    fn a_policy_decides_by_its_model_relative_to_the_policy_file() {
        let files = Files::new("loads", MODEL, POLICY);
        let p = Policy::load(&files.policy()).unwrap();
        assert_eq!(p.algorithms(), ["bbr", "cubic", "hybla"]);
        assert_eq!(p.min_samples(), 8, "min_samples comes from the model");
        assert_eq!(p.model().map(Model::name), Some("rtt-split"));
        let near = Features { min_rtt_ms: 20.0, ..Features::default() };
        assert_eq!(p.decide(&near), ("hybla".to_string(), "model rtt-split: hybla with probability 1.000".to_string()));
        let far = Features { min_rtt_ms: 50.5, ..Features::default() };
        assert_eq!(p.decide(&far), ("bbr".to_string(), "model rtt-split: bbr with probability 0.800".to_string()));
        let json = p.to_json();
        assert_eq!(json["model"]["name"], "rtt-split");
        assert_eq!(json["model"]["file"], files.model());
        assert_eq!(json["model"]["trees"], 1);
        assert!(p.to_string().contains(&format!("model: rtt-split ({}): 1 trees, max depth 1, over min_rtt_ms; chooses bbr, cubic, hybla", files.model())), "{p}");
        // Overrides work as for any policy, within the model's bounds.
        assert!(Policy::load(&format!("{}:decide.temporal=true,hysteresis.min_dwell_ms=1000,hysteresis.agreeing=2", files.policy())).unwrap().temporal());
    }

    #[test]
    fn the_gain_gate_is_on_with_a_model_that_has_costs_unless_turned_off() {
        let temporal = "\n[decide]\ntemporal = true\n[hysteresis]\nmin_dwell_ms = 0\nagreeing = 2\n";
        let files = Files::new("gate", &model_with_costs(), &format!("{POLICY}{temporal}"));
        let p = Policy::load(&files.policy()).unwrap();
        assert!(p.gain_gate() && p.model().unwrap().has_costs());
        assert_eq!(p.to_json()["gain_gate"], true);
        assert_eq!(p.to_json()["model"]["costs"], true);
        assert_eq!(p.to_json()["model"]["handover_cost"]["bbr>cubic"], 0.0);
        assert!(p.to_string().contains("2 agreeing, each gaining more than the handover costs)"), "{p}");
        // Far (min_rtt_ms above 50): bbr 0, cubic 0.1, hybla 0.4; no handover costs.
        let far = Features { min_rtt_ms: 80.0, ..Features::default() };
        let g = p.handover_gain(&far, 2, 0).unwrap();
        assert_eq!((g.from_cost, g.to_cost, g.handover_cost, g.pays()), (0.4, 0.0, 0.0, true));
        assert!(!p.handover_gain(&far, 0, 1).unwrap().pays());
        // Off from the spec, for an experiment measuring what the gate does.
        let p = Policy::load(&format!("{}:decide.gain_gate=false", files.policy())).unwrap();
        assert!(!p.gain_gate());
        assert_eq!(p.handover_gain(&far, 2, 0), None);
        assert!(!p.to_string().contains("handover costs"), "{p}");
        // Without costs there is nothing to gate by.
        let files = Files::new("gate-no-costs", MODEL, &format!("{POLICY}{temporal}"));
        let p = Policy::load(&files.policy()).unwrap();
        assert!(!p.gain_gate());
        assert_eq!(p.handover_gain(&far, 2, 0), None);
        let e = format!("{:#}", Policy::load(&format!("{}:decide.gain_gate=true", files.policy())).unwrap_err());
        assert!(e.ends_with(&format!("[decide] gain_gate = true: model {} has no costs to gate by (export it with per-class costs, or leave gain_gate out)", files.model())), "{e}");
    }
}
