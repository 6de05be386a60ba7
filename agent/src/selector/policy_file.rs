//! The file format of the selector's policies: TOML, read into a [`Policy`] and checked.
//!
//! ```toml
//! name = "mystique"
//! description = "..."
//! initial = "cubic"         # what a flow runs before the first decision
//! default = "bbr"           # when no rule matches (optional if the last rule has no `when`)
//! objective = "tct"         # what the policy optimises (ccswitch_selector::objective; default
//!                           # tct, or the model's); with a model it must be the model's
//!
//! [window]                  # which RTT samples the features cover
//! kind = "sliding"          # "first": the flow's first N samples; "sliding": the last N
//! samples = 30
//!
//! [decide]
//! spatial = true            # decide once, at once, when the flow has `min_samples` (default true)
//! temporal = true           # decide again on every later report (default false)
//! min_samples = 8           # samples before the first decision (default: window.samples)
//! gain_gate = true          # model with costs only: hand over only when the expected gain
//!                           # exceeds the handover cost (default: whether the model has costs)
//!
//! [hysteresis]              # temporal decisions only (required with temporal = true)
//! min_dwell_ms = 3000       # at least this long on an algorithm (datapath clock)
//! agreeing = 3              # this many equal decisions in a row before a handover
//!
//! [params]                  # named numbers for the rules, overridable from the spec
//! rtt_threshold_ms = 50
//!
//! [[rule]]
//! when = "min_rtt_ms < rtt_threshold_ms and loss_rate > 0"
//! use = "illinois"          # any simple-API algorithm spec, e.g. "cubic:beta=0.8", or py:...
//!
//! [memory]                  # optional: per-destination memory, read by crate::memory
//! enabled = true            # (also prefix_v4, prefix_v6, half_life_s, min_score, capacity)
//! ```
//!
//! Instead of rules and a default, a policy may name a learned model (`model = "PATH"`, relative
//! to the policy file; see `ccswitch_selector::model`): the model's classes are then the
//! algorithms it chooses from, and the policy must use the window the model was trained on
//! (its `decide.min_samples` defaults to the model's and may not differ from it either). A
//! policy that names an objective must name the model's (a model trained for completion time
//! does not serve a policy that asks for power); one that names none takes the model's.
//!
//! A `when` is written in the rule language of [`super::rules`].
//!
//! Everything is checked at load time (unknown keys, names, numbers and algorithms; rules that
//! can never be reached), and every error names the file and the rule. Conditions are resolved
//! to feature and param positions then, so a decision reads numbers and allocates nothing.
//!
//! A policy spec ([`Policy::load`]) is a built-in name or a file path (it contains '/' or ends
//! in `.toml`), optionally followed by `:KEY=VALUE,...`. A key is a param of `[params]` or one
//! of [`Policy::SETTINGS`] (e.g. `window.samples=30`, `decide.temporal=false`, `default=cubic`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Result};
use ccswitch_selector::check_algorithm;
use ccswitch_selector::model::Model;
use ccswitch_selector::objective::Objective;
use toml::{Table, Value};

use super::features::{FeatureWindow, MAX_WINDOW_SAMPLES};
use super::policy::{Hysteresis, Policy};
use super::rules::{Condition, PolicyParam, Rule};
use crate::memory::MemorySettings;

/// The policy that `text` describes, with `overrides` (`KEY=VALUE,...`, from a spec) applied.
/// `origin` (a path, or a description) starts every error; `dir` is the policy file's
/// directory, where a relative `model` path starts (none: the current directory).
pub(super) fn read(text: &str, origin: &str, overrides: Option<&str>, dir: Option<&Path>) -> Result<Policy> {
    let mut file = parse_file(text, origin)?;
    if let Some(overrides) = overrides {
        apply_overrides(&mut file, overrides).map_err(|e| anyhow!("policy {origin}: {e}"))?;
    }
    check(file, origin, dir).map_err(|e| anyhow!("policy {origin}: {e}"))
}

// ---- The file as written -------------------------------------------------------------------

/// A policy file's fields, read by [`read_file`]. What was missing or malformed is `None`
/// and described in `problems`; [`check`] adds what else is wrong, so one error lists every
/// problem of the file rather than the first one only.
#[derive(Debug)]
struct PolicyFile {
    name: Option<String>,
    description: String,
    initial: Option<String>,
    default: Option<String>,
    /// The model file, as written (relative to the policy file).
    model: Option<String>,
    /// The objective spec, as written.
    objective: Option<String>,
    window: Option<PolicyWindow>,
    decide: PolicyDecide,
    hysteresis: Option<HysteresisFile>,
    params: BTreeMap<String, f64>,
    rule: Vec<RuleFile>,
    /// `[memory]`: per-destination memory (crate::memory).
    memory: MemorySettings,
    /// Missing, mistyped and unknown fields.
    problems: Vec<String>,
}

#[derive(Debug)]
struct PolicyWindow {
    kind: WindowKind,
    samples: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WindowKind {
    First,
    Sliding,
}

#[derive(Debug)]
struct PolicyDecide {
    spatial: bool,
    temporal: bool,
    min_samples: Option<usize>,
    /// `None`: on when the model has costs.
    gain_gate: Option<bool>,
}

impl Default for PolicyDecide {
    fn default() -> Self {
        Self { spatial: true, temporal: false, min_samples: None, gain_gate: None }
    }
}

#[derive(Debug, Default)]
struct HysteresisFile {
    min_dwell_ms: u64,
    agreeing: u32,
}

#[derive(Debug)]
struct RuleFile {
    when: Option<String>,
    algorithm: String,
}

// ---- Loading -------------------------------------------------------------------------------

/// Split `BASE:KEY=VALUE,...`: the ':' is looked for after the last '/', so directories may
/// contain ':'.
pub(super) fn split_spec(spec: &str) -> (&str, Option<&str>) {
    let file_start = spec.rfind('/').map_or(0, |i| i + 1);
    match spec[file_start..].find(':') {
        Some(i) => (&spec[..file_start + i], Some(&spec[file_start + i + 1..])),
        None => (spec, None),
    }
}

fn parse_file(text: &str, origin: &str) -> Result<PolicyFile> {
    let table: Table = toml::from_str(text).map_err(|e| anyhow!("policy {origin}: {}", e.to_string().trim_end()))?;
    Ok(read_file(&table))
}

/// One problem as is, several as a list (each on a line of its own).
fn problems(errors: &[String]) -> String {
    match errors {
        [one] => one.clone(),
        many => {
            let mut text = format!("{} problems:", many.len());
            for e in many {
                text.push_str("\n  - ");
                text.push_str(e);
            }
            text
        }
    }
}

/// The keys each table of a policy file may have (README.md, "Policy files", documents each).
const TOP_FIELDS: &[&str] = &["name", "description", "initial", "default", "model", "objective", "window", "decide", "hysteresis", "params", "rule", "memory"];
const WINDOW_FIELDS: &[&str] = &["kind", "samples"];
const DECIDE_FIELDS: &[&str] = &["spatial", "temporal", "min_samples", "gain_gate"];
const HYSTERESIS_FIELDS: &[&str] = &["min_dwell_ms", "agreeing"];
const RULE_FIELDS: &[&str] = &["when", "use"];

/// The fields of one table of the file, each looked up once; what is wrong is added to
/// `errors` and reading goes on, so that one error lists every problem.
struct Fields<'a, 'e> {
    table: &'a Table,
    /// "" for the top level, else e.g. "[window] " or "rule 2: ".
    section: String,
    errors: &'e mut Vec<String>,
}

impl<'a> Fields<'a, '_> {
    fn get(&mut self, key: &str, required: Option<&str>) -> Option<&'a Value> {
        let value = self.table.get(key);
        if let (None, Some(what)) = (value, required) {
            self.errors.push(format!("{}missing `{key}` ({what})", self.section));
        }
        value
    }

    fn wrong(&mut self, key: &str, expected: &str, found: &Value) {
        self.errors.push(format!("{}`{key}` must be {expected}, found {} {found}", self.section, found.type_str()));
    }

    fn string(&mut self, key: &str, required: Option<&str>) -> Option<String> {
        match self.get(key, required)? {
            Value::String(s) => Some(s.clone()),
            other => {
                self.wrong(key, "a string", other);
                None
            }
        }
    }

    fn boolean(&mut self, key: &str) -> Option<bool> {
        match self.get(key, None)? {
            Value::Boolean(b) => Some(*b),
            other => {
                self.wrong(key, "true or false", other);
                None
            }
        }
    }

    fn whole<T: TryFrom<i64>>(&mut self, key: &str, required: Option<&str>) -> Option<T> {
        match self.get(key, required)? {
            Value::Integer(i) => match T::try_from(*i) {
                Ok(v) => Some(v),
                Err(_) => {
                    self.errors.push(format!("{}`{key}` = {i}: out of range", self.section));
                    None
                }
            },
            other => {
                self.wrong(key, "a whole number", other);
                None
            }
        }
    }

    fn table(&mut self, key: &str, required: Option<&str>) -> Option<&'a Table> {
        match self.get(key, required)? {
            Value::Table(t) => Some(t),
            other => {
                self.wrong(key, "a table", other);
                None
            }
        }
    }

    fn unknown(&mut self, allowed: &[&str]) {
        for key in self.table.keys().filter(|k| !allowed.contains(&k.as_str())) {
            self.errors.push(format!("{}unknown field `{key}` (allowed: {})", self.section, allowed.join(", ")));
        }
    }

    fn nested<'b>(&'b mut self, table: &'a Table, section: String) -> Fields<'a, 'b> {
        Fields { table, section, errors: self.errors }
    }
}

/// The file's fields; what is missing or wrong is `None` and listed in `problems`.
fn read_file(table: &Table) -> PolicyFile {
    let mut problems = Vec::new();
    let mut top = Fields { table, section: String::new(), errors: &mut problems };
    top.unknown(TOP_FIELDS);
    let name = top.string("name", Some("the policy's name, a string"));
    let description = top.string("description", None).unwrap_or_default();
    let initial = top.string("initial", Some("the algorithm a flow runs before the first decision, e.g. \"cubic\""));
    let default = top.string("default", None);
    let model = top.string("model", None);
    let objective = top.string("objective", None);

    let window = match top.table("window", Some("a [window] section with kind = \"first\" or \"sliding\" and samples = N")) {
        Some(t) => {
            let mut f = top.nested(t, "[window] ".into());
            f.unknown(WINDOW_FIELDS);
            let kind = match f.string("kind", Some("\"first\" or \"sliding\"")).as_deref() {
                Some("first") => Some(WindowKind::First),
                Some("sliding") => Some(WindowKind::Sliding),
                Some(other) => {
                    f.errors.push(format!("[window] kind = {other:?}: must be \"first\" or \"sliding\""));
                    None
                }
                None => None,
            };
            let samples = f.whole::<usize>("samples", Some("how many RTT samples the features cover, a whole number"));
            kind.zip(samples).map(|(kind, samples)| PolicyWindow { kind, samples })
        }
        None => None,
    };

    let mut decide = PolicyDecide::default();
    if let Some(t) = top.table("decide", None) {
        let mut f = top.nested(t, "[decide] ".into());
        f.unknown(DECIDE_FIELDS);
        decide.spatial = f.boolean("spatial").unwrap_or(decide.spatial);
        decide.temporal = f.boolean("temporal").unwrap_or(decide.temporal);
        decide.min_samples = f.whole("min_samples", None);
        decide.gain_gate = f.boolean("gain_gate");
    }

    let hysteresis = top.table("hysteresis", None).map(|t| {
        let mut f = top.nested(t, "[hysteresis] ".into());
        f.unknown(HYSTERESIS_FIELDS);
        HysteresisFile {
            min_dwell_ms: f.whole("min_dwell_ms", Some("least time on an algorithm, ms")).unwrap_or_default(),
            agreeing: f.whole("agreeing", Some("equal decisions in a row before a handover")).unwrap_or_default(),
        }
    });

    let mut params = BTreeMap::new();
    if let Some(t) = top.table("params", None) {
        for (key, value) in t {
            match value {
                Value::Integer(i) => {
                    params.insert(key.clone(), *i as f64);
                }
                Value::Float(x) => {
                    params.insert(key.clone(), *x);
                }
                other => top.errors.push(format!("[params] {key} = {other}: must be a number")),
            }
        }
    }

    let mut rules = Vec::new();
    match top.get("rule", None) {
        None => {}
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let n = i + 1;
                let Value::Table(t) = item else {
                    top.errors.push(format!("rule {n}: must be a table ([[rule]] with `use` and `when`)"));
                    continue;
                };
                let mut f = top.nested(t, format!("rule {n}: "));
                f.unknown(RULE_FIELDS);
                let when = f.string("when", None);
                if let Some(algorithm) = f.string("use", Some("the algorithm the rule chooses")) {
                    rules.push(RuleFile { when, algorithm });
                }
            }
        }
        Some(other) => top.wrong("rule", "an array of tables ([[rule]])", other),
    }

    let memory = MemorySettings::read(top.get("memory", None), top.errors);
    PolicyFile { name, description, initial, default, model, objective, window, decide, hysteresis, params, rule: rules, memory, problems }
}

fn apply_overrides(file: &mut PolicyFile, overrides: &str) -> Result<(), String> {
    for assignment in overrides.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let (key, value) = assignment
            .split_once('=')
            .ok_or_else(|| format!("override {assignment:?}: expected KEY=VALUE"))?;
        set(file, key.trim(), value.trim()).map_err(|e| format!("override {assignment:?}: {e}"))?;
    }
    Ok(())
}

fn window(file: &mut PolicyFile) -> Result<&mut PolicyWindow, String> {
    file.window.as_mut().ok_or_else(|| "the policy has no valid [window] to override".to_string())
}

fn number<T: std::str::FromStr>(value: &str, what: &str) -> Result<T, String> {
    value.parse().map_err(|_| format!("{value:?} is not {what}"))
}

fn boolean(value: &str) -> Result<bool, String> {
    match value {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{value:?} is not true or false")),
    }
}

fn set(file: &mut PolicyFile, key: &str, value: &str) -> Result<(), String> {
    let whole = "a whole number";
    match key {
        "initial" => file.initial = Some(value.to_string()),
        "default" => file.default = Some(value.to_string()),
        "window.kind" => {
            window(file)?.kind = match value {
                "first" => WindowKind::First,
                "sliding" => WindowKind::Sliding,
                _ => return Err(format!("{value:?} is not first or sliding")),
            }
        }
        "window.samples" => window(file)?.samples = number(value, whole)?,
        "decide.spatial" => file.decide.spatial = boolean(value)?,
        "decide.temporal" => file.decide.temporal = boolean(value)?,
        "decide.min_samples" => file.decide.min_samples = Some(number(value, whole)?),
        "decide.gain_gate" => file.decide.gain_gate = Some(boolean(value)?),
        "hysteresis.min_dwell_ms" => {
            file.hysteresis.get_or_insert_with(Default::default).min_dwell_ms = number(value, whole)?
        }
        "hysteresis.agreeing" => {
            file.hysteresis.get_or_insert_with(Default::default).agreeing = number(value, whole)?
        }
        memory if memory.starts_with("memory.") => file.memory.set(&memory["memory.".len()..], value)?,
        param => {
            let known = file.params.keys().map(String::as_str).collect::<Vec<_>>().join(", ");
            let slot = file.params.get_mut(param).ok_or_else(|| {
                format!(
                    "{:?} has no parameter {param:?}; params: {}; settings: {}",
                    file.name.as_deref().unwrap_or_default(),
                    if known.is_empty() { "none" } else { &known },
                    Policy::SETTINGS.join(", ")
                )
            })?;
            *slot = number::<f64>(value, "a number")?;
        }
    }
    Ok(())
}

/// Check everything and resolve names. Every problem found is reported, in one error; a check
/// that depends on a broken part (the decision threshold on a bad window) is skipped.
fn check(file: PolicyFile, origin: &str, dir: Option<&Path>) -> Result<Policy> {
    let mut errors: Vec<String> = file.problems;
    if file.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
        errors.push("name is empty".to_string());
    }
    let model = file.model.as_deref().and_then(|m| load_model(m, dir).map_err(|e| errors.push(e)).ok());
    if file.model.is_some() {
        if !file.rule.is_empty() {
            errors.push("`model` and [[rule]]s: a policy decides by its model or by its rules, not both".to_string());
        }
        if file.default.is_some() {
            errors.push("`default` and `model`: the model always chooses, a default would never be used".to_string());
        }
        if !file.params.is_empty() {
            errors.push("[params] and `model`: params are for rules, the model uses none".to_string());
        }
    }
    let window = file.window.as_ref().and_then(|w| check_window(w).map_err(|e| errors.push(e)).ok());
    let mut min_samples = 0;
    if let Some(w) = window {
        min_samples = file.decide.min_samples.unwrap_or(model.as_ref().map_or(w.samples(), |m| m.min_samples()));
        if !(1..=w.samples()).contains(&min_samples) {
            errors.push(format!(
                "[decide] min_samples = {min_samples}: must be between 1 and window.samples ({})",
                w.samples()
            ));
        }
    }
    if let (Some(m), Some(w)) = (&model, window) {
        if w != m.window() {
            errors.push(format!(
                "[window] kind = {:?}, samples = {} differs from the window of model {} (kind = {:?}, samples = {}): a model decides on the window it was trained on",
                w.kind(),
                w.samples(),
                m.origin(),
                m.window().kind(),
                m.window().samples()
            ));
        } else if min_samples != m.min_samples() {
            errors.push(format!(
                "[decide] min_samples = {min_samples} differs from model {}'s (min_samples = {}): it was trained on the features of that decision",
                m.origin(),
                m.min_samples()
            ));
        }
    }
    if !file.decide.spatial && !file.decide.temporal {
        errors.push("[decide] spatial and temporal are both false: the policy would never decide".to_string());
    }
    let objective = check_objective(file.objective.as_deref(), model.as_ref()).map_err(|e| errors.push(e)).unwrap_or_default();
    let gain_gate = match (file.decide.gain_gate, &model) {
        (Some(false), _) => false,
        (_, Some(m)) if m.has_costs() => true,
        (None, _) => false,
        (Some(true), Some(m)) => {
            errors.push(format!(
                "[decide] gain_gate = true: model {} has no costs to gate by (export it with per-class costs, or leave gain_gate out)",
                m.origin()
            ));
            false
        }
        (Some(true), None) => {
            // A model that failed to load has its own error already.
            if file.model.is_none() {
                errors.push("[decide] gain_gate = true: the gate compares a model's expected costs; a rules policy has none".to_string());
            }
            false
        }
    };
    let hysteresis = check_hysteresis(file.hysteresis.as_ref(), file.decide.temporal).map_err(|e| errors.push(e)).ok();
    // Every declared param, valid or not, so that rules naming a broken one are not blamed too.
    let params: Vec<PolicyParam> = file.params.iter().map(|(name, &value)| PolicyParam { name: name.clone(), value }).collect();
    errors.extend(params.iter().filter_map(PolicyParam::check));
    errors.extend(file.memory.check());
    if let Some(Err(e)) = file.initial.as_deref().map(check_algorithm) {
        errors.push(format!("initial = {:?}: {e}", file.initial.as_deref().unwrap_or_default()));
    }
    if file.rule.is_empty() && file.model.is_none() {
        errors.push("no rules: add at least one [[rule]] with `use` (and usually `when`)".to_string());
    }

    let mut algorithms: Vec<String> = Vec::new();
    let mut intern = |spec: &str| match algorithms.iter().position(|a| a == spec) {
        Some(i) => i,
        None => {
            algorithms.push(spec.to_string());
            algorithms.len() - 1
        }
    };
    let mut rules = Vec::with_capacity(file.rule.len());
    let mut always: Option<usize> = None;
    for (i, r) in file.rule.iter().enumerate() {
        let n = i + 1;
        if let Some(a) = always {
            errors.push(format!("rule {n} can never match: rule {a} has no `when` and always matches"));
        }
        if let Err(e) = check_algorithm(&r.algorithm) {
            errors.push(format!("rule {n}: use = {:?}: {e}", r.algorithm));
        }
        let when = match &r.when {
            None => {
                always.get_or_insert(n);
                None
            }
            Some(text) => match Condition::parse(text, &params) {
                Ok(c) => Some(c),
                Err(e) => {
                    errors.push(format!("rule {n}: when = {text:?}: {e}"));
                    None
                }
            },
        };
        rules.push(Rule { when, algorithm: intern(&r.algorithm) });
    }
    let default = match (&file.default, always) {
        (Some(d), _) => {
            if let Err(e) = check_algorithm(d) {
                errors.push(format!("default = {d:?}: {e}"));
            }
            Some(intern(d))
        }
        (None, Some(_)) => None,
        (None, None) if file.model.is_some() => None,
        (None, None) => {
            errors.push("no `default` and every rule has a `when`: add default = \"ALGORITHM\" or a last rule without `when`".to_string());
            None
        }
    };
    if let Some(m) = &model {
        algorithms = m.classes().to_vec();
    }
    let (Some(name), Some(initial), Some(window), Some(hysteresis), true) =
        (file.name, file.initial, window, hysteresis, errors.is_empty())
    else {
        bail!("{}", problems(&errors));
    };
    Ok(Policy {
        name,
        description: file.description,
        origin: origin.to_string(),
        initial,
        default,
        window,
        min_samples,
        spatial: file.decide.spatial,
        temporal: file.decide.temporal,
        hysteresis,
        params,
        rules,
        model: model.map(Arc::new),
        objective,
        gain_gate,
        algorithms,
        memory: file.memory,
    })
}

/// Load the model a policy names; `dir` is the policy file's directory.
fn load_model(path: &str, dir: Option<&Path>) -> Result<Model, String> {
    let full: PathBuf = match dir {
        Some(d) if Path::new(path).is_relative() => d.join(path),
        _ => PathBuf::from(path),
    };
    Model::load(&full).map_err(|e| format!("model = {path:?}: {e}"))
}

/// The policy's objective: as named (checked), else the model's, else `tct`. A named one must be
/// the model's: a model chooses what is best for the objective it was trained for.
fn check_objective(spec: Option<&str>, model: Option<&Model>) -> Result<Objective, String> {
    let named = match spec {
        Some(spec) => Some(Objective::parse(spec).map_err(|e| format!("objective = {spec:?}: {e}"))?),
        None => None,
    };
    match (named, model) {
        (Some(o), Some(m)) if o != *m.objective() => Err(format!(
            "objective {o}, but model {} was trained for {}; retrain for {o} or name {}",
            m.origin(),
            m.objective(),
            m.objective()
        )),
        (Some(o), _) => Ok(o),
        (None, Some(m)) => Ok(m.objective().clone()),
        (None, None) => Ok(Objective::default()),
    }
}

fn check_window(w: &PolicyWindow) -> Result<FeatureWindow, String> {
    if !(1..=MAX_WINDOW_SAMPLES).contains(&w.samples) {
        return Err(format!("[window] samples = {}: must be between 1 and {MAX_WINDOW_SAMPLES}", w.samples));
    }
    Ok(match w.kind {
        WindowKind::First => FeatureWindow::FirstSamples(w.samples),
        WindowKind::Sliding => FeatureWindow::Sliding(w.samples),
    })
}

fn check_hysteresis(h: Option<&HysteresisFile>, temporal: bool) -> Result<Hysteresis, String> {
    const US_PER_MS: u64 = 1_000;
    match h {
        None if temporal => Err(
            "[decide] temporal = true needs a [hysteresis] section (min_dwell_ms, agreeing) so flows do not flap".to_string()
        ),
        None => Ok(Hysteresis { min_dwell_us: 0, agreeing: 1 }),
        Some(h) if h.agreeing == 0 => Err("[hysteresis] agreeing = 0: must be at least 1".to_string()),
        Some(h) => Ok(Hysteresis { min_dwell_us: h.min_dwell_ms.saturating_mul(US_PER_MS), agreeing: h.agreeing }),
    }
}

/// Policy and model files for the tests of the policy and of its file format.
#[cfg(test)]
pub(super) mod fixtures {
    use std::path::PathBuf;

    use crate::selector::features::Features;

    pub(crate) fn features(min_rtt_ms: f64, loss_rate: f64) -> Features {
        Features { min_rtt_ms, mean_rtt_ms: min_rtt_ms * 1.2, max_rtt_ms: min_rtt_ms * 1.5, loss_rate, samples: 30, ..Features::default() }
    }

    pub(crate) const MINIMAL: &str = r#"
        name = "t"
        initial = "cubic"
        default = "bbr"
        [window]
        kind = "sliding"
        samples = 4
        [params]
        limit_ms = 40
        [[rule]]
        when = "mean_rtt_ms < limit_ms"
        use = "reno"
    "#;

    /// One tree over min_rtt_ms: up to 50 ms hybla, above bbr (0.8) or cubic (0.2).
    pub(crate) const MODEL: &str = r#"{
        "format": "ccswitch-model", "version": 1, "kind": "forest", "name": "rtt-split",
        "features": ["min_rtt_ms"], "classes": ["bbr", "cubic", "hybla"],
        "window": {"kind": "first", "samples": 20}, "decide": {"min_samples": 8},
        "trees": [{"children_left": [1, -1, -1], "children_right": [2, -1, -1], "feature": [0, -2, -2],
                   "threshold": [50.0, -2.0, -2.0], "value": [[0.4, 0.1, 0.5], [0, 0, 1], [0.8, 0.2, 0]]}]
    }"#;

    pub(crate) const POLICY: &str = r#"
        name = "learned"
        initial = "cubic"
        model = "models/m.json"
        [window]
        kind = "first"
        samples = 20
    "#;

    /// A directory with `models/m.json` (MODEL with `from` replaced by `to`) and `p.toml`
    /// (POLICY likewise); returns the policy's path.
    pub(crate) struct Files {
        pub(crate) dir: PathBuf,
    }

    impl Files {
        pub(crate) fn new(test: &str, model: &str, policy: &str) -> Files {
            let dir = std::env::temp_dir().join(format!("ccswitch-model-policy-{}-{test}", std::process::id()));
            std::fs::create_dir_all(dir.join("models")).unwrap();
            std::fs::write(dir.join("models/m.json"), model).unwrap();
            std::fs::write(dir.join("p.toml"), policy).unwrap();
            Files { dir }
        }

        pub(crate) fn policy(&self) -> String {
            self.dir.join("p.toml").display().to_string()
        }

        pub(crate) fn model(&self) -> String {
            self.dir.join("models/m.json").display().to_string()
        }
    }

    impl Drop for Files {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    /// MODEL with a cost per node and class.
    pub(crate) fn model_with_costs() -> String {
        MODEL.replacen("[0.8, 0.2, 0]]", "[0.8, 0.2, 0]], \"cost\": [[0, 0, 0], [0.3, 0.2, 0], [0, 0.1, 0.4]]", 1)
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{features, MINIMAL};
    use super::*;
    use crate::selector::features::Features;

    /// The error of parsing MINIMAL with `from` replaced by `to`.
    fn error_of(from: &str, to: &str) -> String {
        let text = MINIMAL.replacen(from, to, 1);
        assert_ne!(text, MINIMAL, "{from:?} not in MINIMAL");
        match Policy::parse(&text, "test.toml") {
            Ok(p) => panic!("parsed:\n{p}"),
            Err(e) => format!("{e:#}"),
        }
    }

    fn assert_error(from: &str, to: &str, expected: &[&str]) {
        let e = error_of(from, to);
        assert!(e.starts_with("policy test.toml: "), "{e}");
        for part in expected {
            assert!(e.contains(part), "{e:?} lacks {part:?}");
        }
    }

    #[test]
    fn errors_name_the_file_the_rule_and_the_fault() {
        assert_error("mean_rtt_ms < limit_ms", "mean_rtt < limit_ms", &["rule 1", "unknown name \"mean_rtt\"", "features: min_rtt_ms", "params: limit_ms"]);
        assert_error("mean_rtt_ms < limit_ms", "", &["rule 1", "empty condition"]);
        assert_error("use = \"reno\"", "use = \"renoo\"", &["rule 1: use = \"renoo\"", "unknown algorithm"]);
        assert_error("use = \"reno\"", "use = \"cubic:bogus=1\"", &["rule 1", "no parameter \"bogus\""]);
        assert_error("use = \"reno\"", "use = \"reno-datapath\"", &["rule 1", "own datapath program"]);
        assert_error("initial = \"cubic\"", "initial = \"nope\"", &["initial = \"nope\""]);
        assert_error("default = \"bbr\"", "default = \"nope\"", &["default = \"nope\""]);
        assert_error("default = \"bbr\"", "", &["no `default`"]);
        assert_error("samples = 4", "samples = 4\nsize = 3", &["unknown field `size`"]);
        assert_error("kind = \"sliding\"", "kind = \"rolling\"", &["rolling"]);
        assert_error("samples = 4", "samples = 0", &["samples = 0"]);
        assert_error("limit_ms = 40", "limit_ms = \"forty\"", &["limit_ms"]);
        assert_error("limit_ms = 40", "loss_rate = 0.1", &["\"loss_rate\" is the name of a feature"]);
        assert_error("[[rule]]", "[[rules]]", &["unknown field `rules`"]);
        assert_error("[params]", "[decide]\nspatial = false\n[params]", &["would never decide"]);
        assert_error("[params]", "[decide]\ntemporal = true\n[params]", &["needs a [hysteresis] section"]);
        assert_error("[params]", "[decide]\nmin_samples = 5\n[params]", &["min_samples = 5"]);
        assert_error("[params]", "[decide]\ntemporal = true\n[hysteresis]\nmin_dwell_ms = 1\nagreeing = 0\n[params]", &["agreeing = 0"]);
    }

    #[test]
    fn every_missing_required_field_is_reported_in_one_error() {
        let e = format!("{:#}", Policy::parse("[[rule]]\nuse = \"bbr\"\n", "empty.toml").unwrap_err());
        assert!(e.starts_with("policy empty.toml: 3 problems:\n"), "{e}");
        for missing in ["missing `name`", "missing `initial`", "missing `window` (a [window] section"] {
            assert!(e.contains(missing), "{e:?} lacks {missing:?}");
        }
        let e = format!("{:#}", Policy::parse(&MINIMAL.replace("kind = \"sliding\"\n        samples = 4", ""), "w.toml").unwrap_err());
        assert!(e.contains("[window] missing `kind`") && e.contains("[window] missing `samples`"), "{e}");
        let e = format!("{:#}", Policy::parse(&MINIMAL.replace("use = \"reno\"", "usee = \"reno\""), "r.toml").unwrap_err());
        assert!(e.contains("rule 1: unknown field `usee`") && e.contains("rule 1: missing `use`"), "{e}");
    }

    #[test]
    fn mistyped_unknown_and_invalid_fields_are_reported_together() {
        let text = MINIMAL
            .replace("name = \"t\"", "name = 3\ncolour = \"red\"")
            .replace("initial = \"cubic\"", "initial = \"nope\"")
            .replace("samples = 4", "samples = 0")
            .replace("limit_ms = 40", "limit_ms = 40\nloss_rate = 1")
            .replace("use = \"reno\"", "use = \"renoo\"");
        let e = format!("{:#}", Policy::parse(&text, "bad.toml").unwrap_err());
        assert!(e.starts_with("policy bad.toml: 6 problems:\n  - "), "{e}");
        for part in [
            "`name` must be a string, found integer 3",
            "unknown field `colour`",
            "[window] samples = 0: must be between 1 and",
            "\"loss_rate\" is the name of a feature",
            "initial = \"nope\": unknown algorithm",
            "rule 1: use = \"renoo\": unknown algorithm",
        ] {
            assert!(e.contains(part), "{e:?} lacks {part:?}");
        }
        // One problem reads as one sentence, without a list.
        let e = format!("{:#}", Policy::parse(&MINIMAL.replace("samples = 4", "samples = -1"), "one.toml").unwrap_err());
        assert_eq!(e, "policy one.toml: [window] `samples` = -1: out of range");
    }

    #[test]
    fn a_rules_policy_names_an_objective_for_the_record() {
        let p = Policy::parse(MINIMAL, "x").unwrap();
        assert_eq!(p.objective().to_string(), "tct");
        let p = Policy::parse(&MINIMAL.replace("default = \"bbr\"", "default = \"bbr\"\nobjective = \"tct_delay_budget\""), "x").unwrap();
        assert_eq!(p.objective().to_string(), "tct_delay_budget:budget_ms=100");
        assert_eq!(p.to_json()["objective"], "tct_delay_budget:budget_ms=100");
        assert!(p.to_string().contains("\n  objective: tct_delay_budget:budget_ms=100\n"), "{p}");
        assert!(!p.gain_gate());
        assert_error("default = \"bbr\"", "default = \"bbr\"\nobjective = \"foo\"", &["objective = \"foo\": unknown objective 'foo': the built-ins are tct, power, tct_delay_budget, harm, weighted"]);
        assert_error("default = \"bbr\"", "default = \"bbr\"\nobjective = \"weighted:power=-1\"", &["objective = \"weighted:power=-1\": weighted: weight power = -1 is negative; weights must be >= 0"]);
        assert_error("default = \"bbr\"", "default = \"bbr\"\nobjective = \"weighted\"", &["weighted: every weight is 0; give at least one weight > 0"]);
        assert_error("default = \"bbr\"", "default = \"bbr\"\nobjective = 1", &["`objective` must be a string, found integer 1"]);
        assert_error("[params]", "[decide]\ngain_gate = true\n[params]", &["[decide] gain_gate = true: the gate compares a model's expected costs; a rules policy has none"]);
        // Off is always allowed (it changes nothing here).
        assert!(!Policy::parse(&MINIMAL.replace("[params]", "[decide]\ngain_gate = false\n[params]"), "x").unwrap().gain_gate());
    }

    #[test]
    fn the_readme_documents_every_field_setting_and_feature() {
        let readme = include_str!("../../../README.md");
        let start = readme.find("### Policy files").expect("README.md has a \"### Policy files\" section");
        let section = &readme[start..];
        let section = &section[..section[4..].find("\n### ").map_or(section.len(), |i| i + 4)];
        let tables = [("", TOP_FIELDS), ("[window]", WINDOW_FIELDS), ("[decide]", DECIDE_FIELDS), ("[hysteresis]", HYSTERESIS_FIELDS), ("[[rule]]", RULE_FIELDS)];
        for (table, fields) in tables {
            assert!(section.contains(table), "README's policy section lacks {table}");
            for field in fields.iter().filter(|f| !["window", "decide", "hysteresis", "params", "rule", "memory"].contains(f)) {
                assert!(section.contains(&format!("\n{field} = ")), "README's policy section does not document {table} {field}");
            }
        }
        assert!(section.contains("[params]"), "README's policy section lacks [params]");
        for setting in Policy::SETTINGS {
            assert!(section.contains(&format!("`{setting}`")), "README's policy section does not list the setting {setting}");
        }
        for feature in Features::NAMES {
            assert!(section.contains(&format!("`{feature}`")), "README's policy section does not list the feature {feature}");
        }
    }

    #[test]
    fn a_policy_needs_rules_and_reachable_ones() {
        let no_rules = MINIMAL.split("[[rule]]").next().unwrap();
        let e = format!("{:#}", Policy::parse(no_rules, "x.toml").unwrap_err());
        assert!(e.contains("policy x.toml: no rules"), "{e}");
        let shadowed = format!("{MINIMAL}\n[[rule]]\nuse = \"cubic\"\n[[rule]]\nwhen = \"loss_rate > 0\"\nuse = \"bbr\"\n");
        let e = format!("{:#}", Policy::parse(&shadowed, "x.toml").unwrap_err());
        assert!(e.contains("rule 3 can never match: rule 2 has no `when`"), "{e}");
    }

    #[test]
    fn params_are_overridden_from_the_spec() {
        let p = Policy::load("mystique:rtt_threshold_ms=120").unwrap();
        assert_eq!(p.param("rtt_threshold_ms"), Some(120.0));
        let (alg, reason) = p.decide(&features(100.0, 0.01));
        assert_eq!(alg, "illinois");
        assert!(reason.contains("rtt_threshold_ms (120)"), "{reason}");
        let p = Policy::load("mystique:loss_threshold=0.02, rtt_threshold_ms=10").unwrap();
        assert_eq!(p.decide(&features(5.0, 0.01)).0, "hybla");
    }

    #[test]
    fn settings_are_overridden_from_the_spec() {
        let p = Policy::load("mcc-wifi:window.samples=30,window.kind=sliding,default=cubic,decide.temporal=true,hysteresis.min_dwell_ms=500,hysteresis.agreeing=2").unwrap();
        assert_eq!(p.window(), FeatureWindow::Sliding(30));
        assert_eq!(p.min_samples(), 30);
        assert_eq!(p.default_algorithm(), Some("cubic"));
        assert!(p.temporal());
        assert_eq!(p.hysteresis(), Hysteresis { min_dwell_us: 500_000, agreeing: 2 });
        // Overrides go through the same checks as the file.
        let e = format!("{:#}", Policy::load("mystique:decide.min_samples=31").unwrap_err());
        assert!(e.contains("min_samples = 31"), "{e}");
        let e = format!("{:#}", Policy::load("mcc-wifi:decide.temporal=true").unwrap_err());
        assert!(e.contains("needs a [hysteresis] section"), "{e}");
        let e = format!("{:#}", Policy::load("mcc-wifi:decide.temporal=true,hysteresis.min_dwell_ms=5").unwrap_err());
        assert!(e.contains("agreeing = 0"), "{e}");
    }

    #[test]
    fn bad_specs_are_explained() {
        let err = |spec: &str| format!("{:#}", Policy::load(spec).unwrap_err());
        let e = err("mystic");
        assert!(e.contains("no built-in policy \"mystic\"") && e.contains("mystique, mcc-wifi"), "{e}");
        let e = err("mystique:rtt=5");
        assert!(e.contains("no parameter \"rtt\"") && e.contains("loss_threshold, rtt_threshold_ms") && e.contains("window.samples"), "{e}");
        let e = err("mystique:rtt_threshold_ms=fast");
        assert!(e.contains("\"fast\" is not a number"), "{e}");
        let e = err("mystique:rtt_threshold_ms");
        assert!(e.contains("expected KEY=VALUE"), "{e}");
        let e = err("mystique:decide.temporal=yes");
        assert!(e.contains("not true or false"), "{e}");
        let e = err("/nonexistent/p.toml:x=1");
        assert!(e.contains("cannot read policy file /nonexistent/p.toml"), "{e}");
    }

    #[test]
    fn policy_files_load_by_path_with_overrides() {
        let dir = std::env::temp_dir().join(format!("ccswitch-policy-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mine.toml");
        std::fs::write(&path, MINIMAL).unwrap();
        let spec = format!("{}:limit_ms=5", path.display());
        let p = Policy::load(&spec).unwrap();
        assert_eq!(p.origin(), path.display().to_string());
        assert_eq!(p.param("limit_ms"), Some(5.0));
        std::fs::write(&path, MINIMAL.replace("reno", "nope")).unwrap();
        let e = format!("{:#}", Policy::load(&path.display().to_string()).unwrap_err());
        assert!(e.starts_with(&format!("policy {}: rule 1", path.display())), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn spec_splitting() {
        assert_eq!(split_spec("mystique"), ("mystique", None));
        assert_eq!(split_spec("mystique:a=1,b=2"), ("mystique", Some("a=1,b=2")));
        assert_eq!(split_spec("/a:b/p.toml"), ("/a:b/p.toml", None));
        assert_eq!(split_spec("/a:b/p.toml:x=1"), ("/a:b/p.toml", Some("x=1")));
        assert_eq!(split_spec("p.toml"), ("p.toml", None));
    }

    #[test]
    fn python_algorithms_are_accepted_unchecked() {
        let p = Policy::parse(&MINIMAL.replace("\"reno\"", "\"py:mymod:Mine\""), "x").unwrap();
        assert_eq!(p.algorithms()[0], "py:mymod:Mine");
        assert!(Policy::parse(&MINIMAL.replace("\"reno\"", "\"py:\""), "x").is_err());
    }
}

#[cfg(test)]
mod model_policy_tests {
    use super::fixtures::{Files, MODEL, POLICY};
    use super::*;

    fn error(test: &str, model: &str, policy: &str) -> (String, Files) {
        let files = Files::new(test, model, policy);
        let e = format!("{:#}", Policy::load(&files.policy()).unwrap_err());
        assert!(e.starts_with(&format!("policy {}: ", files.policy())), "{e}");
        (e, files)
    }

    #[test]
    fn a_policy_whose_window_or_first_decision_differs_from_the_models_is_refused() {
        let (e, files) = error("window", MODEL, &POLICY.replace("samples = 20", "samples = 30"));
        assert!(e.contains(&format!("[window] kind = \"first\", samples = 30 differs from the window of model {} (kind = \"first\", samples = 20)", files.model())), "{e}");
        let (e, _) = error("kind", MODEL, &POLICY.replace("\"first\"", "\"sliding\""));
        assert!(e.contains("kind = \"sliding\", samples = 20 differs"), "{e}");
        let (e, _) = error("min", MODEL, &format!("{POLICY}\n[decide]\nmin_samples = 10\n"));
        assert!(e.contains("[decide] min_samples = 10 differs from model") && e.contains("(min_samples = 8)"), "{e}");
    }

    #[test]
    fn a_policy_with_a_model_and_rules_default_or_params_is_refused() {
        let rules = format!("{POLICY}\n[[rule]]\nwhen = \"loss_rate > 0\"\nuse = \"bbr\"\n");
        let (e, _) = error("rules", MODEL, &rules);
        assert!(e.contains("`model` and [[rule]]s: a policy decides by its model or by its rules, not both"), "{e}");
        let (e, _) = error("default", MODEL, &POLICY.replace("initial = \"cubic\"", "initial = \"cubic\"\ndefault = \"bbr\""));
        assert!(e.contains("`default` and `model`"), "{e}");
        let (e, _) = error("params", MODEL, &format!("{POLICY}\n[params]\nx = 1\n"));
        assert!(e.contains("[params] and `model`"), "{e}");
    }

    #[test]
    fn a_policy_naming_a_bad_model_names_both_files_and_the_fault() {
        let (e, files) = error("version", &MODEL.replace("\"version\": 1", "\"version\": 2"), POLICY);
        assert_eq!(e, format!("policy {}: model = \"models/m.json\": model {}: format version 2 is not supported: this agent reads version 1 (export the model again, or use an agent that reads version 2)", files.policy(), files.model()));
        let (e, _) = error("truncated", &MODEL[..MODEL.len() - 40], POLICY);
        assert!(e.contains("not valid JSON (EOF while parsing") && e.contains("truncated or corrupt"), "{e}");
        let (e, _) = error("feature", &MODEL.replace("[\"min_rtt_ms\"]", "[\"min_rtt\"]"), POLICY);
        assert!(e.contains("features[0] = \"min_rtt\": unknown feature"), "{e}");
        let (e, _) = error("class", &MODEL.replace("\"hybla\"]", "\"reno-datapath\"]"), POLICY);
        assert!(e.contains("classes[2] = \"reno-datapath\": reno-datapath brings its own datapath program"), "{e}");
        let (e, _) = error("unknown-class", &MODEL.replace("\"hybla\"]", "\"hyblaa\"]"), POLICY);
        assert!(e.contains("classes[2] = \"hyblaa\": unknown algorithm"), "{e}");
        let (e, files) = error("missing", MODEL, &POLICY.replace("models/m.json", "models/none.json"));
        assert!(e.contains(&format!("model = \"models/none.json\": model {}: cannot read it: ", files.dir.join("models/none.json").display())), "{e}");
    }

    /// MODEL with an objective.
    fn model_for(objective: &str) -> String {
        MODEL.replacen("\"kind\": \"forest\"", &format!("\"kind\": \"forest\", \"objective\": \"{objective}\""), 1)
    }

    #[test]
    fn a_policy_naming_another_objective_than_its_models_is_refused_naming_both() {
        let (e, files) = error("objective-differs", MODEL, &POLICY.replace("model = ", "objective = \"power\"\nmodel = "));
        assert_eq!(
            e,
            format!("policy {}: objective power, but model {} was trained for tct; retrain for power or name tct", files.policy(), files.model())
        );
        let (e, files) = error("objective-budget", &model_for("tct_delay_budget"), &POLICY.replace("model = ", "objective = \"tct_delay_budget:budget_ms=50\"\nmodel = "));
        assert!(e.ends_with(&format!("objective tct_delay_budget:budget_ms=50, but model {} was trained for tct_delay_budget:budget_ms=100; retrain for tct_delay_budget:budget_ms=50 or name tct_delay_budget:budget_ms=100", files.model())), "{e}");
        // The same objective written another way is the same objective.
        let files = Files::new("objective-same", &model_for("weighted:tct=1,harm=1"), &POLICY.replace("model = ", "objective = \"weighted:harm=1.0,tct=1,power=0\"\nmodel = "));
        assert_eq!(Policy::load(&files.policy()).unwrap().objective().to_string(), "weighted:harm=1,tct=1");
    }

    #[test]
    fn a_policy_without_an_objective_takes_its_models() {
        let files = Files::new("objective-inherited", &model_for("power"), POLICY);
        let p = Policy::load(&files.policy()).unwrap();
        assert_eq!(p.objective().to_string(), "power");
        assert_eq!(p.to_json()["objective"], "power");
        assert_eq!(p.to_json()["model"]["objective"], "power");
        assert!(p.to_string().contains("\n  objective: power\n"), "{p}");
        assert!(p.to_string().contains("chooses bbr, cubic, hybla; trained for power\n"), "{p}");
        // A model file from before objectives: tct.
        let files = Files::new("objective-old", MODEL, POLICY);
        let p = Policy::load(&files.policy()).unwrap();
        assert_eq!((p.objective().to_string(), p.model().unwrap().objective().to_string()), ("tct".to_string(), "tct".to_string()));
        assert!(p.to_string().contains("\n  objective: tct\n"), "{p}");
    }

    #[test]
    fn a_model_with_a_bad_objective_is_refused_through_its_policy() {
        let (e, files) = error("objective-bad", &model_for("speed"), POLICY);
        assert!(e.ends_with(&format!("model {}: objective = \"speed\": unknown objective 'speed': the built-ins are tct, power, tct_delay_budget, harm, weighted", files.model())), "{e}");
    }

    #[test]
    fn a_policy_sent_as_text_takes_its_model_path_as_given() {
        let files = Files::new("text", MODEL, POLICY);
        let text = POLICY.replace("models/m.json", &files.model());
        let p = Policy::parse(&text, "sent through the operator interface").unwrap();
        assert_eq!(p.model().map(Model::origin), Some(files.model().as_str()));
        let e = format!("{:#}", Policy::parse(&text.replace("\"first\"", "\"sliding\""), "sent through the operator interface").unwrap_err());
        assert!(e.starts_with("policy sent through the operator interface: [window]"), "{e}");
    }
}
