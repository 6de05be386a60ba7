//! Named, typed-by-unit parameters of an algorithm, settable from a spec such as
//! `cubic:beta=0.8,c=0.4`.

use std::fmt;

use crate::AlgorithmInfo;

/// A parameter an algorithm declares, with its default.
#[derive(Clone, Copy, Debug)]
pub struct Param {
    pub name: &'static str,
    pub default: f64,
    /// Unit or kind of the value ("segments", "ms", "ratio", "bool" ...).
    pub unit: &'static str,
    pub help: &'static str,
}

/// Values for every parameter an algorithm declares: its defaults, overridden by a spec.
#[derive(Clone, Debug)]
pub struct Params {
    values: Vec<(&'static str, f64)>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SpecError {
    UnknownAlgorithm { name: String, known: String },
    UnknownParam { algorithm: String, param: String, known: String },
    BadValue { param: String, value: String },
    NotSimple(String),
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecError::UnknownAlgorithm { name, known } => {
                write!(f, "unknown algorithm {name:?}; known: {known}")
            }
            SpecError::UnknownParam { algorithm, param, known } if known.is_empty() => {
                write!(f, "{algorithm} has no parameter {param:?} (it takes none)")
            }
            SpecError::UnknownParam { algorithm, param, known } => {
                write!(f, "{algorithm} has no parameter {param:?}; it takes: {known}")
            }
            SpecError::BadValue { param, value } => {
                write!(f, "parameter {param}: {value:?} is not a number")
            }
            SpecError::NotSimple(name) => write!(f, "{name} is not a simple-API algorithm"),
        }
    }
}

impl std::error::Error for SpecError {}

impl Params {
    pub fn defaults(declared: &'static [Param]) -> Self {
        Self { values: declared.iter().map(|p| (p.name, p.default)).collect() }
    }

    /// Parse `PARAM=VALUE,PARAM=VALUE` (empty: all defaults) against `info`'s parameters.
    pub fn parse(info: &AlgorithmInfo, assignments: &str) -> Result<Self, SpecError> {
        let mut params = Self::defaults(info.params);
        for assignment in assignments.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            let (key, value) = assignment.split_once('=').ok_or_else(|| SpecError::BadValue {
                param: assignment.to_string(),
                value: String::new(),
            })?;
            let (key, value) = (key.trim(), value.trim());
            let slot = params.values.iter_mut().find(|(name, _)| *name == key).ok_or_else(|| {
                SpecError::UnknownParam {
                    algorithm: info.name.to_string(),
                    param: key.to_string(),
                    known: info.params.iter().map(|p| p.name).collect::<Vec<_>>().join(", "),
                }
            })?;
            slot.1 = match value {
                "true" => 1.0,
                "false" => 0.0,
                v => v.parse::<f64>().ok().filter(|x| x.is_finite()).ok_or_else(|| {
                    SpecError::BadValue { param: key.to_string(), value: v.to_string() }
                })?,
            };
        }
        Ok(params)
    }

    /// The value of a declared parameter. Asking for an undeclared one is a programming error.
    pub fn get(&self, name: &str) -> f64 {
        self.values
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("parameter {name} is not declared"))
    }

    pub fn flag(&self, name: &str) -> bool {
        self.get(name) != 0.0
    }
}

#[cfg(test)]
mod tests {
    use crate::{info, instantiate, SpecError};

    #[test]
    fn spec_overrides_defaults_and_rejects_nonsense() {
        let cubic = info("cubic").unwrap();
        let p = super::Params::parse(cubic, "beta=0.8").unwrap();
        assert_eq!(p.get("beta"), 0.8);
        assert_eq!(p.get("c"), 0.4);
        assert!(matches!(instantiate("nope"), Err(SpecError::UnknownAlgorithm { .. })));
        assert!(matches!(instantiate("cubic:gamma=1"), Err(SpecError::UnknownParam { .. })));
        assert!(matches!(instantiate("cubic:beta=abc"), Err(SpecError::BadValue { .. })));
        assert!(matches!(instantiate("cubic:beta=inf"), Err(SpecError::BadValue { .. })));
        assert!(instantiate("cubic:beta=0.8, c=0.5").is_ok());
    }

    #[test]
    fn every_algorithm_instantiates_with_defaults() {
        for a in crate::ALGORITHMS {
            assert_eq!(instantiate(a.name).unwrap().name(), a.name);
            assert!(!a.summary.is_empty() && !a.source.is_empty(), "{} is described", a.name);
        }
    }
}
