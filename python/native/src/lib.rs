//! Native part of the `ccswitch` package: the agent selector's own feature and model code
//! (crate `ccswitch-selector`), so that datasets are built from the features the agent decides
//! on and models are checked with the evaluator the agent runs; and the CCP protocol's
//! message types and standard report (crate `ccswitch-protocol`), so that the tests' fake
//! datapath speaks the protocol as declared.

use std::path::PathBuf;

use ccswitch_algorithms::Measurement;
use ccswitch_protocol::standard::report;
use ccswitch_protocol::wire::MsgType;
use ccswitch_selector::features::{FeatureTracker, FeatureWindow, Features};
use ccswitch_selector::model::Model;
use pyo3::exceptions::{PyKeyError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

/// Report keys read (those of the agent's `report` events in `--events` files).
const REPORT_KEYS: [&str; 5] = ["rtt_us", "acked_bytes", "lost_packets", "delivery_rate_bps", "dp_us"];
const BITS_PER_BYTE: u64 = 8;

fn parse_window(kind: &str, samples: usize) -> PyResult<FeatureWindow> {
    FeatureWindow::from_kind(kind, samples).map_err(|e| PyValueError::new_err(format!("window: {e}")))
}

/// `at` names the report in errors ("report" or "reports[3]").
fn whole(report: &Bound<'_, PyDict>, key: &str, at: &str) -> PyResult<u64> {
    let value = report.get_item(key)?.ok_or_else(|| {
        PyKeyError::new_err(format!("{at} has no {key:?} (a report needs {})", REPORT_KEYS.join(", ")))
    })?;
    value.extract::<u64>().map_err(|_| PyValueError::new_err(format!("{at} {key:?} = {value}: not a whole number >= 0")))
}

/// A report dict (the keys of an agent `report` event) as the agent's `Measurement`.
/// `delivery_rate_bps` is in bit/s, as events write it; the agent measures bytes/s.
fn measurement(report: &Bound<'_, PyAny>, at: &str) -> PyResult<Measurement> {
    let report = report.downcast::<PyDict>().map_err(|_| PyValueError::new_err(format!("{at} is not a dict")))?;
    let timeout = match report.get_item("timeout")? {
        None => false,
        Some(v) => v.is_truthy()?,
    };
    Ok(Measurement {
        now_us: whole(report, "dp_us", at)?,
        rtt_us: whole(report, "rtt_us", at)?,
        acked_bytes: whole(report, "acked_bytes", at)?,
        lost_packets: whole(report, "lost_packets", at)?,
        delivery_rate_bytes_per_s: whole(report, "delivery_rate_bps", at)? / BITS_PER_BYTE,
        timeout,
        ..Measurement::default()
    })
}

fn features_dict<'py>(py: Python<'py>, f: &Features) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new_bound(py);
    for (i, name) in Features::NAMES.iter().enumerate() {
        d.set_item(*name, f.at(i))?;
    }
    Ok(d)
}

/// One flow's features, updated report by report: the agent selector's own tracker.
#[pyclass(name = "FeatureTracker", module = "ccswitch._native")]
struct PyFeatureTracker {
    inner: FeatureTracker,
}

#[pymethods]
impl PyFeatureTracker {
    /// `window`: "first" (the flow's first `samples` RTT samples) or "sliding" (the last ones).
    #[new]
    fn new(window: &str, samples: usize) -> PyResult<Self> {
        Ok(Self { inner: FeatureTracker::new(parse_window(window, samples)?) })
    }

    /// Absorb one report (a dict with the keys of an agent `report` event); `mss` converts
    /// acknowledged bytes into packets for the loss rate.
    fn observe(&mut self, report: &Bound<'_, PyAny>, mss: u64) -> PyResult<()> {
        self.inner.observe(&measurement(report, "report")?, mss);
        Ok(())
    }

    /// The features now, `{name: float}` in the order of `FEATURE_NAMES`.
    fn features<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        features_dict(py, &self.inner.features())
    }

    /// Whether the window has all its samples.
    fn window_full(&self) -> bool {
        self.inner.window_full()
    }

    /// RTT samples in the window.
    fn samples(&self) -> usize {
        self.inner.samples()
    }
}

/// The features the agent's selector decides on at its first decision over a flow's reports
/// (window `window`/`samples`, first decision once the window holds `min_samples` samples):
/// `{"features": {name: float}, "decided": bool, "report_index": int | None, "dp_us": int | None}`.
/// A flow that ended first gives the features after its last report, `decided` False.
#[pyfunction]
#[pyo3(signature = (reports, mss, window, samples, min_samples))]
fn decision_features<'py>(
    py: Python<'py>,
    reports: &Bound<'py, PyAny>,
    mss: u64,
    window: &str,
    samples: usize,
    min_samples: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let w = parse_window(window, samples)?;
    if !(1..=w.samples()).contains(&min_samples) {
        return Err(PyValueError::new_err(format!("min_samples = {min_samples}: must be between 1 and samples ({samples})")));
    }
    let mut measurements = Vec::new();
    for (i, r) in reports.iter()?.enumerate() {
        measurements.push(measurement(&r?, &format!("reports[{i}]"))?);
    }
    let d = ccswitch_selector::first_decision(&measurements, mss, w, min_samples);
    let out = PyDict::new_bound(py);
    out.set_item("features", features_dict(py, &d.features)?)?;
    out.set_item("decided", d.report_index.is_some())?;
    out.set_item("report_index", d.report_index)?;
    out.set_item("dp_us", d.now_us)?;
    Ok(out)
}

/// A model file loaded and checked by the agent's own code.
#[pyclass(name = "Model", module = "ccswitch._native", frozen)]
struct PyModel {
    inner: Model,
}

#[pymethods]
impl PyModel {
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The input columns, in order.
    #[getter]
    fn features(&self) -> Vec<&'static str> {
        self.inner.feature_names().collect()
    }

    /// The algorithm specs, in the order of the probabilities.
    #[getter]
    fn classes(&self) -> Vec<String> {
        self.inner.classes().to_vec()
    }

    /// `{"kind": "first" | "sliding", "samples": N}`.
    #[getter]
    fn window<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new_bound(py);
        d.set_item("kind", self.inner.window().kind())?;
        d.set_item("samples", self.inner.window().samples())?;
        Ok(d)
    }

    #[getter]
    fn min_samples(&self) -> usize {
        self.inner.min_samples()
    }

    #[getter]
    fn trees(&self) -> usize {
        self.inner.trees()
    }

    /// `(label, probabilities)` for one vector in the order of `features`, as the agent
    /// evaluates it (scikit-learn's semantics).
    fn predict(&self, features: Vec<f64>) -> PyResult<(String, Vec<f64>)> {
        if features.len() != self.inner.feature_names().len() {
            return Err(PyValueError::new_err(format!(
                "model {} takes {} features ({}), got {}",
                self.inner.origin(),
                self.inner.feature_names().len(),
                self.inner.feature_names().collect::<Vec<_>>().join(", "),
                features.len()
            )));
        }
        if let Some(x) = features.iter().find(|x| !x.is_finite()) {
            return Err(PyValueError::new_err(format!("feature value {x} is not finite (the agent's features always are)")));
        }
        let (class, proba) = self.inner.predict(&features);
        Ok((self.inner.classes()[class].clone(), proba))
    }

    fn __repr__(&self) -> String {
        format!("<Model {} from {}: {} trees, classes {:?}>", self.inner.name(), self.inner.origin(), self.inner.trees(), self.inner.classes())
    }
}

/// Load and check a model file as the agent does; ValueError names the file and every fault.
#[pyfunction]
fn load_model(path: PathBuf) -> PyResult<PyModel> {
    Model::load(&path).map(|inner| PyModel { inner }).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// Native part of the `ccswitch` package.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("FEATURE_NAMES", PyList::new_bound(m.py(), Features::NAMES))?;
    let types = PyDict::new_bound(m.py());
    for (name, code) in [
        ("CREATE", MsgType::Create),
        ("MEASURE", MsgType::Measure),
        ("INSTALL_EXPR", MsgType::InstallExpr),
        ("UPDATE_FIELDS", MsgType::UpdateFields),
        ("CHANGE_PROG", MsgType::ChangeProg),
        ("READY", MsgType::Ready),
    ] {
        types.set_item(name, code as u16)?;
    }
    m.add("CCP_MESSAGE_TYPES", types)?;
    m.add("STANDARD_REPORT_FIELDS", PyList::new_bound(m.py(), report::NAMES))?;
    m.add_class::<PyFeatureTracker>()?;
    m.add_class::<PyModel>()?;
    m.add_function(wrap_pyfunction!(decision_features, m)?)?;
    m.add_function(wrap_pyfunction!(load_model, m)?)?;
    Ok(())
}
