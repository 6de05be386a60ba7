//! Operator objectives: what "a better algorithm" means for a model and for a policy.
//!
//! The agent does not measure objectives; it carries them as labels. A model is trained for one
//! objective (the learner scores candidates by it and writes it into the model file), and a
//! policy that runs the model must want the same thing, so the two are compared at load. The
//! Python package implements the same grammar and the same canonical form, and both sides write
//! and compare the canonical string.
//!
//! An objective spec has the shape of an algorithm spec, `NAME` or `NAME:KEY=VALUE,...`
//! (the name as written, assignments trimmed, empty ones skipped, a repeated key's last value
//! kept). The built-ins:
//!
//! | name               | keys (default)                            | lower is better unless noted |
//! |--------------------|-------------------------------------------|------------------------------|
//! | `tct`              | none                                      | transfer completion time |
//! | `power`            | none                                      | Kleinrock's power, throughput / delay_p95_ms (higher is better) |
//! | `tct_delay_budget` | `budget_ms` (100), > 0                    | completion time; a transfer whose p95 one-way delay exceeds the budget counts as a miss |
//! | `harm`             | none                                      | the harm the flow does to a competing flow, with its own completion time |
//! | `weighted`         | `tct`, `power`, `harm`, `delay_p95` (0), each >= 0, one > 0 | the weighted sum of those terms |
//!
//! The canonical form ([`Display`](fmt::Display)) is the name, then every key with its default
//! filled in, sorted by key, numbers as Python's `repr(float)` writes them without a trailing
//! `.0` (shortest round-trip digits; an exponent below 1e-4 and from 1e16 on, `1e-05`,
//! `1e+16`); `weighted` leaves out weights of 0: `tct`, `tct_delay_budget:budget_ms=100`, `weighted:harm=1,tct=1`. Two objectives
//! are equal when their canonical values are equal (`weighted:tct=1,power=0` is
//! `weighted:tct=1`).

use std::fmt;
use std::str::FromStr;

/// The built-in objectives' names, in the order error messages list them.
pub const BUILTINS: &[&str] = &["tct", "power", "tct_delay_budget", "harm", "weighted"];

/// `tct_delay_budget`'s `budget_ms` when the spec leaves it out.
pub const DEFAULT_BUDGET_MS: f64 = 100.0;

/// The weights `weighted` takes, sorted (the canonical order).
const WEIGHTS: &[&str] = &["delay_p95", "harm", "power", "tct"];

/// A parsed, checked objective: a built-in's name and its params in canonical form (defaults
/// filled in, sorted by key, `weighted`'s zero weights left out).
#[derive(Clone, Debug, PartialEq)]
pub struct Objective {
    name: &'static str,
    params: Vec<(&'static str, f64)>,
}

impl Default for Objective {
    /// `tct`: what models exported before objectives existed were trained for.
    fn default() -> Self {
        Self { name: "tct", params: Vec::new() }
    }
}

impl Objective {
    /// Parse and check a spec; the error says what is wrong in one sentence.
    pub fn parse(spec: &str) -> Result<Objective, String> {
        let (name, assignments) = spec.split_once(':').unwrap_or((spec, ""));
        let Some(&name) = BUILTINS.iter().find(|&&b| b == name) else {
            return Err(format!("unknown objective '{name}': the built-ins are {}", BUILTINS.join(", ")));
        };
        let keys: &'static [&'static str] = match name {
            "tct_delay_budget" => &["budget_ms"],
            "weighted" => WEIGHTS,
            _ => &[],
        };
        let mut params: Vec<(&'static str, f64)> = match name {
            "tct_delay_budget" => vec![("budget_ms", DEFAULT_BUDGET_MS)],
            "weighted" => WEIGHTS.iter().map(|&w| (w, 0.0)).collect(),
            _ => Vec::new(),
        };
        for assignment in assignments.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            let Some((key, text)) = assignment.split_once('=') else {
                return Err(format!("{name}: '{assignment}' is not KEY=VALUE"));
            };
            let (key, text) = (key.trim(), text.trim());
            let Some(slot) = params.iter_mut().find(|(k, _)| *k == key) else {
                let what = if name == "weighted" { "weight" } else { "parameter" };
                return Err(match keys {
                    [] => format!("{name}: unknown parameter '{key}' ({name} takes no parameters)"),
                    keys => format!("{name}: unknown {what} '{key}' (the {what}s are {})", keys.join(", ")),
                });
            };
            let value: f64 = text.parse().map_err(|_| format!("{name}: {key} = '{text}' is not a number"))?;
            if !value.is_finite() {
                return Err(format!("{name}: {key} = '{text}' is not a finite number"));
            }
            slot.1 = value;
        }
        // Checked once every value is in, as the Python side does: the last of a repeated key
        // counts, and the first bad weight in key order is named.
        if let Some(&(_, budget)) = params.iter().find(|&&(k, b)| k == "budget_ms" && b <= 0.0) {
            return Err(format!("{name}: budget_ms = {} must be > 0", format_number(budget)));
        }
        if name == "weighted" {
            if let Some(&(key, w)) = params.iter().find(|&&(_, w)| w < 0.0) {
                return Err(format!("weighted: weight {key} = {} is negative; weights must be >= 0", format_number(w)));
            }
            params.retain(|&(_, w)| w > 0.0);
            if params.is_empty() {
                return Err("weighted: every weight is 0; give at least one weight > 0".to_string());
            }
        }
        Ok(Objective { name, params })
    }

    /// The built-in's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// The params in canonical form: defaults filled in, sorted by key, zero weights left out.
    pub fn params(&self) -> &[(&'static str, f64)] {
        &self.params
    }

    /// One param's value (a weight left out of `weighted` is 0).
    pub fn param(&self, key: &str) -> Option<f64> {
        match self.params.iter().find(|(k, _)| *k == key) {
            Some(&(_, v)) => Some(v),
            None if self.name == "weighted" && WEIGHTS.contains(&key) => Some(0.0),
            None => None,
        }
    }
}

impl FromStr for Objective {
    type Err = String;

    fn from_str(spec: &str) -> Result<Self, String> {
        Self::parse(spec)
    }
}

impl fmt::Display for Objective {
    /// The canonical spec, e.g. `weighted:harm=1,tct=1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name)?;
        for (i, (key, value)) in self.params.iter().enumerate() {
            write!(f, "{}{key}={}", if i == 0 { ':' } else { ',' }, format_number(*value))?;
        }
        Ok(())
    }
}

/// A number as the canonical form writes it, Python's `repr(float)` without a trailing `.0`:
/// the shortest digits that read back to the same f64, in positional notation when the
/// decimal exponent is from -4 to 15, else `D[.DDD]e±XX` (at least two exponent digits).
pub fn format_number(x: f64) -> String {
    // Rust's `{:e}` and `{}` both write the shortest round-trip digits.
    let scientific = format!("{x:e}");
    let (mantissa, exponent) = scientific.split_once('e').expect("{:e} writes an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} writes a whole exponent");
    if (-4..16).contains(&exponent) || !x.is_finite() {
        format!("{x}")
    } else {
        format!("{mantissa}e{}{:02}", if exponent < 0 { '-' } else { '+' }, exponent.unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(spec: &str) -> String {
        Objective::parse(spec).unwrap_or_else(|e| panic!("{spec}: {e}")).to_string()
    }

    fn error(spec: &str) -> String {
        match Objective::parse(spec) {
            Ok(o) => panic!("{spec} parsed as {o}"),
            Err(e) => e,
        }
    }

    #[test]
    fn every_builtin_parses_to_its_canonical_form() {
        assert_eq!(canonical("tct"), "tct");
        assert_eq!(canonical("power"), "power");
        assert_eq!(canonical("harm"), "harm");
        assert_eq!(canonical("tct_delay_budget"), "tct_delay_budget:budget_ms=100");
        assert_eq!(canonical("tct_delay_budget:budget_ms=250.0"), "tct_delay_budget:budget_ms=250");
        assert_eq!(canonical("tct_delay_budget:budget_ms=12.5"), "tct_delay_budget:budget_ms=12.5");
        assert_eq!(canonical("weighted:tct=1,harm=1"), "weighted:harm=1,tct=1");
        assert_eq!(canonical("weighted:tct=1,power=0,delay_p95=0.25"), "weighted:delay_p95=0.25,tct=1");
        assert_eq!(canonical("weighted: power = 2 , tct=0.1,"), "weighted:power=2,tct=0.1");
        assert_eq!(Objective::default().to_string(), "tct");
    }

    #[test]
    fn the_canonical_form_parses_to_an_equal_objective() {
        for spec in ["tct", "power", "harm", "tct_delay_budget:budget_ms=0.001", "weighted:delay_p95=3,harm=0.5,power=1,tct=2"] {
            let o = Objective::parse(spec).unwrap();
            assert_eq!(o.to_string(), spec);
            assert_eq!(Objective::parse(&o.to_string()).unwrap(), o);
        }
    }

    #[test]
    fn objectives_are_equal_when_their_values_are() {
        let parse = |s: &str| Objective::parse(s).unwrap();
        assert_eq!(parse("tct_delay_budget"), parse("tct_delay_budget:budget_ms=100.0"));
        assert_eq!(parse("weighted:tct=1,power=0"), parse("weighted:tct=1.0"));
        assert_eq!(parse("weighted:harm=1,tct=1"), parse("weighted:tct=1,harm=1"));
        assert_ne!(parse("tct_delay_budget:budget_ms=50"), parse("tct_delay_budget"));
        assert_ne!(parse("weighted:tct=1"), parse("tct"));
        assert_ne!(parse("power"), parse("tct"));
        // A repeated key keeps its last value, as in algorithm specs.
        assert_eq!(parse("tct_delay_budget:budget_ms=5,budget_ms=7"), parse("tct_delay_budget:budget_ms=7"));
    }

    #[test]
    fn params_read_with_defaults() {
        let o = Objective::parse("weighted:tct=2").unwrap();
        assert_eq!((o.name(), o.params()), ("weighted", &[("tct", 2.0)][..]));
        assert_eq!((o.param("tct"), o.param("harm"), o.param("colour")), (Some(2.0), Some(0.0), None));
        assert_eq!(Objective::parse("tct_delay_budget").unwrap().param("budget_ms"), Some(100.0));
    }

    #[test]
    fn unknown_names_and_keys_are_refused() {
        assert_eq!(error("foo"), "unknown objective 'foo': the built-ins are tct, power, tct_delay_budget, harm, weighted");
        assert_eq!(error(""), "unknown objective '': the built-ins are tct, power, tct_delay_budget, harm, weighted");
        assert_eq!(error("TCT"), "unknown objective 'TCT': the built-ins are tct, power, tct_delay_budget, harm, weighted");
        assert_eq!(error(" tct"), "unknown objective ' tct': the built-ins are tct, power, tct_delay_budget, harm, weighted");
        assert_eq!(error("tct:budget_ms=5"), "tct: unknown parameter 'budget_ms' (tct takes no parameters)");
        assert_eq!(error("tct_delay_budget:budget=5"), "tct_delay_budget: unknown parameter 'budget' (the parameters are budget_ms)");
        assert_eq!(error("weighted:throughput=1"), "weighted: unknown weight 'throughput' (the weights are delay_p95, harm, power, tct)");
        assert_eq!(error("weighted:tct"), "weighted: 'tct' is not KEY=VALUE");
    }

    #[test]
    fn bad_numbers_are_refused() {
        assert_eq!(error("weighted:power=-1"), "weighted: weight power = -1 is negative; weights must be >= 0");
        assert_eq!(error("weighted:tct=-2.50,power=-1"), "weighted: weight power = -1 is negative; weights must be >= 0");
        assert_eq!(error("weighted:tct=-2.50"), "weighted: weight tct = -2.5 is negative; weights must be >= 0");
        assert_eq!(canonical("weighted:tct=-1,tct=1"), "weighted:tct=1", "a key's last value counts");
        assert_eq!(error("weighted:tct=1,harm=lots"), "weighted: harm = 'lots' is not a number");
        assert_eq!(error("weighted:tct=1_0"), "weighted: tct = '1_0' is not a number");
        assert_eq!(error("weighted:tct=inf"), "weighted: tct = 'inf' is not a finite number");
        assert_eq!(error("weighted:tct=NaN"), "weighted: tct = 'NaN' is not a finite number");
        assert_eq!(error("weighted"), "weighted: every weight is 0; give at least one weight > 0");
        assert_eq!(error("weighted:tct=0,harm=0"), "weighted: every weight is 0; give at least one weight > 0");
        assert_eq!(error("weighted:tct=-0"), "weighted: every weight is 0; give at least one weight > 0");
        assert_eq!(error("tct_delay_budget:budget_ms=0"), "tct_delay_budget: budget_ms = 0 must be > 0");
        assert_eq!(error("tct_delay_budget:budget_ms=-5"), "tct_delay_budget: budget_ms = -5 must be > 0");
        assert_eq!(error("tct_delay_budget:budget_ms=100ms"), "tct_delay_budget: budget_ms = '100ms' is not a number");
        assert_eq!(error("tct_delay_budget:budget_ms=1e400"), "tct_delay_budget: budget_ms = '1e400' is not a finite number");
        assert_eq!(error("tct_delay_budget:budget_ms=-1e-5"), "tct_delay_budget: budget_ms = -1e-05 must be > 0");
    }

    #[test]
    fn numbers_are_written_as_pythons_repr_without_a_trailing_zero() {
        // Expected values from Python 3: `repr(x)`, a trailing ".0" removed.
        for (x, python) in [
            (100.0, "100"),
            (0.5, "0.5"),
            (12.5, "12.5"),
            (0.0001, "0.0001"),
            (9.9e-05, "9.9e-05"),
            (1e-05, "1e-05"),
            (1.5e-07, "1.5e-07"),
            (1000000000000000.0, "1000000000000000"),
            (1e+16, "1e+16"),
            (9999999999999998.0, "9999999999999998"),
            (1.2345678901234568e+17, "1.2345678901234568e+17"),
            (1e+100, "1e+100"),
            (0.1 + 0.2, "0.30000000000000004"),
            (2.5e-300, "2.5e-300"),
            (1.0 / 3.0, "0.3333333333333333"),
            (123456.789, "123456.789"),
        ] {
            assert_eq!(format_number(x), python, "{x:e}");
        }
        assert_eq!(canonical("tct_delay_budget:budget_ms=0.00001"), "tct_delay_budget:budget_ms=1e-05");
        assert_eq!(canonical("weighted:tct=1e16"), "weighted:tct=1e+16");
    }
}
