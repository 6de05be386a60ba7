//! The schedule file: which one-way delay and which random loss rates hold from which second.
//!
//! ```json
//! {"steps": [{"at_s": 0, "delay_ms": 20, "loss_downlink": 0, "loss_uplink": 0},
//!            {"at_s": 5, "delay_ms": 150, "loss_downlink": 0.01}]}
//! ```
//! A step holds from its `at_s` until the next step's. `at_s` starts at 0 and strictly
//! increases; `delay_ms` is a number >= 0 (one way, applied in each direction, like
//! mm-delay's); `loss_downlink` / `loss_uplink` are probabilities in [0, 1), 0 when absent.
//! Anything else is refused with the step and the key named.

use serde_json::{Map, Value};

#[derive(Debug, Clone, PartialEq)]
pub struct ScheduleStep {
    pub at_s: f64,
    pub delay_ms: f64,
    pub loss_downlink: f64,
    pub loss_uplink: f64,
}

impl ScheduleStep {
    pub fn at_ns(&self) -> u64 {
        (self.at_s * 1e9).round() as u64
    }

    pub fn delay_ns(&self) -> u64 {
        (self.delay_ms * 1e6).round() as u64
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub steps: Vec<ScheduleStep>,
}

const STEP_KEYS: [&str; 4] = ["at_s", "delay_ms", "loss_downlink", "loss_uplink"];

impl Schedule {
    /// Parse and validate the text of a schedule file; the error names the bad step and key.
    pub fn parse(text: &str) -> Result<Schedule, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON: {e}"))?;
        let root = root
            .as_object()
            .ok_or("the top level must be an object with key \"steps\"")?;
        if let Some(other) = root.keys().find(|k| k.as_str() != "steps") {
            return Err(format!("unknown top-level key {other:?} (only \"steps\")"));
        }
        let steps = root
            .get("steps")
            .ok_or("missing key \"steps\"")?
            .as_array()
            .ok_or("\"steps\" must be a list of steps")?;
        if steps.is_empty() {
            return Err("\"steps\" is empty: give at least the step at at_s = 0".into());
        }
        let mut parsed: Vec<ScheduleStep> = Vec::with_capacity(steps.len());
        for (i, step) in steps.iter().enumerate() {
            let obj = step
                .as_object()
                .ok_or_else(|| format!("step {i}: must be an object"))?;
            if let Some(other) = obj.keys().find(|k| !STEP_KEYS.contains(&k.as_str())) {
                return Err(format!(
                    "step {i}: unknown key {other:?} (known: {})",
                    STEP_KEYS.join(", ")
                ));
            }
            let at_s = number(obj, i, "at_s", None)?;
            let delay_ms = number(obj, i, "delay_ms", None)?;
            let loss_downlink = number(obj, i, "loss_downlink", Some(0.0))?;
            let loss_uplink = number(obj, i, "loss_uplink", Some(0.0))?;
            match parsed.last() {
                None if at_s != 0.0 => return Err(format!("step 0: key \"at_s\": the first step must be at 0, got {at_s}")),
                Some(prev) if at_s <= prev.at_s => {
                    return Err(format!(
                        "step {i}: key \"at_s\": must be greater than step {}'s {} (steps strictly increase), got {at_s}",
                        i - 1,
                        prev.at_s
                    ))
                }
                _ => {}
            }
            if delay_ms < 0.0 {
                return Err(format!(
                    "step {i}: key \"delay_ms\": must be >= 0, got {delay_ms}"
                ));
            }
            for (key, p) in [
                ("loss_downlink", loss_downlink),
                ("loss_uplink", loss_uplink),
            ] {
                if !(0.0..1.0).contains(&p) {
                    return Err(format!(
                        "step {i}: key {key:?}: must be a probability in [0, 1), got {p}"
                    ));
                }
            }
            parsed.push(ScheduleStep {
                at_s,
                delay_ms,
                loss_downlink,
                loss_uplink,
            });
        }
        Ok(Schedule { steps: parsed })
    }

    /// Index of the step in force `elapsed_ns` after time 0.
    pub fn step_at(&self, elapsed_ns: u64) -> usize {
        // Steps are few (a handful); the last one whose start has passed.
        self.steps
            .iter()
            .rposition(|s| s.at_ns() <= elapsed_ns)
            .unwrap_or(0)
    }
}

fn number(
    obj: &Map<String, Value>,
    step: usize,
    key: &str,
    default: Option<f64>,
) -> Result<f64, String> {
    match (obj.get(key), default) {
        (None, Some(d)) => Ok(d),
        (None, None) => Err(format!("step {step}: missing key {key:?}")),
        (Some(v), _) => match v.as_f64() {
            Some(x) if x.is_finite() => Ok(x),
            _ => Err(format!(
                "step {step}: key {key:?}: must be a number, got {v}"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_of_the_docs_parses_with_absent_losses_as_zero() {
        let s = Schedule::parse(
            r#"{"steps": [{"at_s": 0, "delay_ms": 20, "loss_downlink": 0, "loss_uplink": 0},
                          {"at_s": 5, "delay_ms": 150.5, "loss_downlink": 0.01}]}"#,
        )
        .unwrap();
        assert_eq!(s.steps.len(), 2);
        assert_eq!(
            s.steps[1],
            ScheduleStep {
                at_s: 5.0,
                delay_ms: 150.5,
                loss_downlink: 0.01,
                loss_uplink: 0.0
            }
        );
        assert_eq!(s.steps[1].delay_ns(), 150_500_000);
        assert_eq!(s.steps[1].at_ns(), 5_000_000_000);
    }

    fn refused(text: &str) -> String {
        Schedule::parse(text).expect_err("should have been refused")
    }

    #[test]
    fn a_first_step_not_at_zero_is_refused_naming_step_and_key() {
        let e = refused(r#"{"steps": [{"at_s": 1, "delay_ms": 20}]}"#);
        assert!(e.contains("step 0") && e.contains("at_s"), "{e}");
    }

    #[test]
    fn steps_that_do_not_strictly_increase_are_refused() {
        let e = refused(
            r#"{"steps": [{"at_s": 0, "delay_ms": 20}, {"at_s": 2, "delay_ms": 1}, {"at_s": 2, "delay_ms": 3}]}"#,
        );
        assert!(e.contains("step 2") && e.contains("at_s"), "{e}");
    }

    #[test]
    fn negative_delay_and_loss_outside_zero_to_one_are_refused() {
        let e = refused(r#"{"steps": [{"at_s": 0, "delay_ms": -1}]}"#);
        assert!(e.contains("step 0") && e.contains("delay_ms"), "{e}");
        let e = refused(
            r#"{"steps": [{"at_s": 0, "delay_ms": 1}, {"at_s": 3, "delay_ms": 1, "loss_uplink": 1}]}"#,
        );
        assert!(e.contains("step 1") && e.contains("loss_uplink"), "{e}");
        let e = refused(r#"{"steps": [{"at_s": 0, "delay_ms": 1, "loss_downlink": -0.1}]}"#);
        assert!(e.contains("loss_downlink"), "{e}");
    }

    #[test]
    fn missing_unknown_and_mistyped_keys_are_refused() {
        assert!(refused(r#"{"steps": [{"at_s": 0}]}"#).contains("missing key \"delay_ms\""));
        let e = refused(r#"{"steps": [{"at_s": 0, "delay_ms": 1, "loss": 0.1}]}"#);
        assert!(e.contains("step 0") && e.contains("\"loss\""), "{e}");
        let e = refused(r#"{"steps": [{"at_s": 0, "delay_ms": "20"}]}"#);
        assert!(
            e.contains("delay_ms") && e.contains("must be a number"),
            "{e}"
        );
        assert!(refused(r#"{"steps": []}"#).contains("empty"));
        assert!(refused(r#"{"stepz": []}"#).contains("stepz"));
        assert!(refused("[1, 2]").contains("object"));
        assert!(refused("{").contains("JSON"));
    }

    #[test]
    fn the_step_in_force_is_the_last_one_started() {
        let s = Schedule::parse(r#"{"steps": [{"at_s": 0, "delay_ms": 1}, {"at_s": 2, "delay_ms": 2}, {"at_s": 2.5, "delay_ms": 3}]}"#).unwrap();
        assert_eq!(s.step_at(0), 0);
        assert_eq!(s.step_at(1_999_999_999), 0);
        assert_eq!(s.step_at(2_000_000_000), 1);
        assert_eq!(s.step_at(2_499_999_999), 1);
        assert_eq!(s.step_at(2_500_000_000), 2);
        assert_eq!(s.step_at(u64::MAX), 2);
    }
}
