//! Parity with scikit-learn: every model in `learner/models/` that has golden data beside it
//! (`NAME.json` and `NAME.golden.csv`, written by the training notebook from scikit-learn's own
//! `predict` and `predict_proba`) must give the same label on every golden vector and the same
//! probabilities within 1e-9. With no such pair the test fails: parity unchecked is not parity.
//!
//! `CCSWITCH_MODELS_DIR=DIR` checks the models of another directory instead (the same rules).

use std::path::{Path, PathBuf};

use ccswitch_selector::model::Model;

const PROBABILITY_TOLERANCE: f64 = 1e-9;
const MIN_ROWS: usize = 10_000;
/// Disagreements shown per model when the test fails.
const SHOWN: usize = 5;

fn models_dir() -> PathBuf {
    match std::env::var_os("CCSWITCH_MODELS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../learner/models"),
    }
}

/// Every `NAME.json` of `dir` with a `NAME.golden.csv` beside it.
fn golden_pairs(dir: &Path) -> Vec<(PathBuf, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut pairs: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|model| {
            let golden = model.with_extension("golden.csv");
            golden.is_file().then_some((model, golden))
        })
        .collect();
    pairs.sort();
    pairs
}

struct Parity {
    rows: usize,
    labels_agreeing: usize,
    max_probability_error: f64,
    disagreements: Vec<String>,
}

fn check(model_path: &Path, golden_path: &Path) -> Result<Parity, String> {
    let model = Model::load(model_path).map_err(|e| e.to_string())?;
    let text = std::fs::read_to_string(golden_path).map_err(|e| format!("{}: {e}", golden_path.display()))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or_else(|| format!("{}: empty", golden_path.display()))?.split(',').collect();
    let features: Vec<&str> = model.feature_names().collect();
    let classes: Vec<String> = model.classes().iter().map(|c| format!("proba_{c}")).collect();
    let expected: Vec<&str> = features.iter().copied().chain(["label"]).chain(classes.iter().map(String::as_str)).collect();
    if header != expected {
        return Err(format!("{}: header {header:?}, expected {expected:?} (the model's features, label, proba_<class>)", golden_path.display()));
    }
    let (nf, nc) = (features.len(), classes.len());
    let mut parity = Parity { rows: 0, labels_agreeing: 0, max_probability_error: 0.0, disagreements: Vec::new() };
    let mut proba = vec![0.0; nc];
    for (i, line) in lines.enumerate() {
        let line_no = i + 2;
        let fields: Vec<&str> = line.split(',').collect();
        if fields.len() != nf + 1 + nc {
            return Err(format!("{}:{line_no}: {} fields, expected {}", golden_path.display(), fields.len(), nf + 1 + nc));
        }
        let number = |s: &str| s.parse::<f64>().map_err(|_| format!("{}:{line_no}: {s:?} is not a number", golden_path.display()));
        let x = fields[..nf].iter().map(|s| number(s)).collect::<Result<Vec<_>, _>>()?;
        let label = fields[nf];
        let golden = fields[nf + 1..].iter().map(|s| number(s)).collect::<Result<Vec<_>, _>>()?;
        let class = model.predict_into(&x, &mut proba);
        let error = proba.iter().zip(&golden).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
        parity.rows += 1;
        parity.max_probability_error = parity.max_probability_error.max(error);
        let agrees = model.classes()[class] == label;
        parity.labels_agreeing += usize::from(agrees);
        if (!agrees || error > PROBABILITY_TOLERANCE) && parity.disagreements.len() < SHOWN {
            parity.disagreements.push(format!(
                "line {line_no}: x = {x:?}: scikit-learn {label} {golden:?}, ours {} {proba:?}",
                model.classes()[class]
            ));
        }
    }
    Ok(parity)
}

#[test]
fn every_exported_model_agrees_with_scikit_learn_on_its_golden_data() {
    let dir = models_dir();
    let pairs = golden_pairs(&dir);
    assert!(
        !pairs.is_empty(),
        "no model with golden data in {}: the training notebook writes NAME.json and NAME.golden.csv there",
        dir.display()
    );
    let mut failures = Vec::new();
    for (model, golden) in &pairs {
        match check(model, golden) {
            Err(e) => failures.push(e),
            Ok(p) => {
                println!(
                    "{}: {} rows, labels {}/{} identical, largest probability difference {:e}",
                    model.display(),
                    p.rows,
                    p.labels_agreeing,
                    p.rows,
                    p.max_probability_error
                );
                if p.rows < MIN_ROWS {
                    failures.push(format!("{}: {} golden rows, at least {MIN_ROWS} needed", golden.display(), p.rows));
                }
                if p.labels_agreeing != p.rows || p.max_probability_error > PROBABILITY_TOLERANCE {
                    failures.push(format!(
                        "{}: {} of {} labels differ, largest probability difference {:e}:\n    {}",
                        model.display(),
                        p.rows - p.labels_agreeing,
                        p.rows,
                        p.max_probability_error,
                        p.disagreements.join("\n    ")
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
