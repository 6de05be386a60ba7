//! Python algorithms: `--algorithm py:MODULE:CLASS` runs a Python class in an interpreter
//! embedded in the agent (pyo3), with no rebuild.
//!
//! [`load`] imports `MODULE`, instantiates `CLASS` (one instance per flow: the agent loads a
//! target once per flow) and wraps it as a simple-API [`Algorithm`]. For every report the
//! agent calls `instance.on_report(flow)`, where `flow` is a [`PyFlow`] (`Flow` in Python): a view of the
//! measurement and of the shared [`FlowState`] (already updated with the report's RTT and
//! rate samples, as for Rust algorithms) with setters for the window, pacing rate,
//! threshold and reporting mode. What the callback set is written back to the flow's state
//! when it returns.
//!
//! Every call goes through [`crate::python_guard`]: it runs on the Python worker thread under
//! a time budget, and a callback that raises, sets a window or rate the guard refuses (the
//! setter raises `ValueError` at the faulty line, and the call counts as refused even if the
//! algorithm catches it), or runs past its budget leaves the flow's state as it was before
//! the call, so the flow keeps its window and the agent goes on. Each is counted per flow and
//! carried by the events file (`on_report_errors`, `python_bad_values`, `python_timeouts`,
//! `python_skipped`), so a broken algorithm cannot pass for a working one.
//!
//! Where modules come from: the interpreter honours `PYTHONPATH`, and if `VIRTUAL_ENV` is set
//! its `site-packages` (with its `.pth` files, e.g. an editable install of `ccswitch`) is
//! added to `sys.path`. The experiment harness sets both for the agents it starts.
//!
//! The Python side of the API is documented in `python/ccswitch/authoring/__init__.py`; an example is
//! `python/ccswitch/authoring/examples/reno.py`.
//!
//! A class that declares `datapath_programs` (the full API) and pyportus files are loaded by
//! [`crate::pyportus`] instead.

use std::fmt;
use std::sync::Arc;

use anyhow::{anyhow, Result};
use ccswitch_algorithms::{Algorithm, FlowState, Measurement, Reporting, SlowStart, WindowEvent};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::PyString;
use pyo3::intern;
use tracing::{error, info};

use crate::python_guard::{check_rate, check_window, outcome, FlowGuard};

/// Default MSS of the placeholder state a [`PyFlow`] holds before its first report.
const PLACEHOLDER_MSS_BYTES: u32 = 1448;

/// Load `MODULE:CLASS` (the part after `py:`) and instantiate the class for one flow.
///
/// Like the callbacks, this runs on the Python worker ([`crate::python_guard::load`]), so that
/// the agent's thread never waits on the GIL: an import or constructor still running after
/// [`crate::python_guard::LOAD_BUDGET`] is abandoned, interrupted, and the load fails.
pub fn load(target: &str) -> Result<Box<dyn Algorithm>> {
    let (module, class) = target
        .rsplit_once(':')
        .filter(|(m, c)| !m.is_empty() && !c.is_empty())
        .ok_or_else(|| {
            anyhow!("py:{target}: expected py:MODULE:CLASS, e.g. py:ccswitch.authoring.examples.reno:Reno")
        })?;
    let (target, module, class) = (target.to_string(), module.to_string(), class.to_string());
    crate::python_guard::load(&format!("py:{target}"), move |py| load_with(py, &target, &module, &class))?
}

fn load_with(py: Python<'_>, target: &str, module: &str, class: &str) -> Result<Box<dyn Algorithm>> {
    {
        set_up_paths(py);
        let m = py.import_bound(module).map_err(|e| {
            let hint = if e.is_instance_of::<pyo3::exceptions::PyModuleNotFoundError>(py) {
                format!(
                    "\n(sys.path: {}; add the module's directory to PYTHONPATH, or set VIRTUAL_ENV \
                     to the venv it is installed in)",
                    sys_path(py)
                )
            } else {
                String::new()
            };
            anyhow!("cannot import {module}: {}{hint}", describe(py, &e))
        })?;
        let cls = m.getattr(class).map_err(|e| {
            let file = m
                .getattr("__file__")
                .and_then(|f| f.extract::<String>())
                .unwrap_or_else(|_| "?".into());
            anyhow!("cannot find class {class} in module {module} ({file}): {}", describe(py, &e))
        })?;
        let instance = cls
            .call0()
            .map_err(|e| anyhow!("cannot instantiate {module}:{class}: {}", describe(py, &e)))?;
        let on_report = instance
            .getattr(intern!(py, "on_report"))
            .ok()
            .filter(|f| f.is_callable())
            .ok_or_else(|| {
                anyhow!("{module}:{class} has no on_report(self, flow) method (see ccswitch.authoring.Algorithm)")
            })?;
        let name = match instance.getattr(intern!(py, "name")) {
            Ok(n) if n.is_instance_of::<PyString>() => n.extract::<String>()?,
            _ => class.to_string(),
        };
        let reporting = match instance.getattr(intern!(py, "reporting")) {
            Ok(r) => parse_reporting(&r)
                .map_err(|e| anyhow!("{module}:{class}.reporting: {}", describe(py, &e)))?,
            Err(_) => Reporting::PerRtt,
        };
        let slow_start_in_datapath = match instance.getattr(intern!(py, "slow_start_in_datapath")) {
            Ok(v) => v.extract::<bool>().map_err(|_| {
                anyhow!("{module}:{class}.slow_start_in_datapath: expected True or False, got {v}")
            })?,
            Err(_) => false,
        };
        let flow = Py::new(
            py,
            PyFlow {
                state: FlowState::new(PLACEHOLDER_MSS_BYTES, 0),
                m: Measurement::default(),
                reporting,
                refused: None,
            },
        )?;
        Ok(Box::new(PyAlgorithm {
            who: Who { name, target: target.to_string() },
            objects: Arc::new(PyObjects { on_report: on_report.unbind(), _instance: instance.unbind(), flow }),
            reporting,
            slow_start_in_datapath,
            guard: FlowGuard::default(),
        }) as Box<dyn Algorithm>)
    }
}

/// Make the modules of `VIRTUAL_ENV` importable (once per process). `PYTHONPATH` is read by
/// the interpreter itself when it starts.
pub(crate) fn set_up_paths(py: Python<'_>) {
    static DONE: GILOnceCell<()> = GILOnceCell::new();
    DONE.get_or_init(py, || {
        let code = r#"
import os, site, sys
venv = os.environ.get("VIRTUAL_ENV")
if venv:
    site_packages = os.path.join(venv, "lib", "python%d.%d" % sys.version_info[:2], "site-packages")
    if os.path.isdir(site_packages) and site_packages not in sys.path:
        site.addsitedir(site_packages)
if not getattr(sys, "argv", None):
    sys.argv = ["ccswitch-agent"]
"#;
        match py.run_bound(code, None, None) {
            Ok(()) => info!(python = %python_version(py), sys_path = %sys_path(py), "python interpreter ready"),
            Err(e) => error!(error = %describe(py, &e), "setting up the python path failed"),
        }
    });
}

fn python_version(py: Python<'_>) -> String {
    py.version().split_whitespace().next().unwrap_or("?").to_string()
}

pub(crate) fn sys_path(py: Python<'_>) -> String {
    py.import_bound("sys")
        .and_then(|sys| sys.getattr("path"))
        .and_then(|p| p.repr())
        .map(|r| r.to_string())
        .unwrap_or_else(|_| "?".into())
}

/// An exception with its traceback, as Python prints it.
pub(crate) fn describe(py: Python<'_>, e: &PyErr) -> String {
    let formatted = py.import_bound("traceback").and_then(|tb| {
        tb.call_method1(
            "format_exception",
            (e.get_type_bound(py), e.value_bound(py), e.traceback_bound(py)),
        )?
        .extract::<Vec<String>>()
    });
    match formatted {
        Ok(lines) => lines.concat().trim_end().to_string(),
        Err(_) => e.to_string(),
    }
}

/// `reporting` of a Python algorithm: `None` or `"per_rtt"` (the default), `"per_ack"`, or a
/// period in µs.
fn parse_reporting(value: &Bound<'_, PyAny>) -> PyResult<Reporting> {
    if value.is_none() {
        return Ok(Reporting::PerRtt);
    }
    if let Ok(s) = value.extract::<String>() {
        return match s.as_str() {
            "per_rtt" => Ok(Reporting::PerRtt),
            "per_ack" => Ok(Reporting::PerAck),
            _ => Err(PyValueError::new_err(format!(
                "{s:?}: expected \"per_rtt\", \"per_ack\" or a period in µs"
            ))),
        };
    }
    Ok(Reporting::EveryMicros(period_us(value)?))
}

fn period_us(value: &Bound<'_, PyAny>) -> PyResult<u64> {
    match amount(value, "period")? {
        0 => Err(PyValueError::new_err("period: must be at least 1 µs")),
        us => Ok(us),
    }
}

/// A non-negative amount given as an int or a float (rounded).
pub(crate) fn amount(value: &Bound<'_, PyAny>, what: &str) -> PyResult<u64> {
    if let Ok(n) = value.extract::<u64>() {
        return Ok(n);
    }
    let x: f64 = value.extract().map_err(|_| {
        let ty = value.get_type().name().map(|n| n.to_string()).unwrap_or_default();
        PyTypeError::new_err(format!("{what}: expected a number, got {ty}"))
    })?;
    if !x.is_finite() || x < 0.0 {
        return Err(PyValueError::new_err(format!("{what}: expected a non-negative number, got {x}")));
    }
    Ok(x.round() as u64) // saturates above u64::MAX
}

/// A Python class driving one flow.
struct PyAlgorithm {
    who: Who,
    /// Shared with the job that runs on the Python worker, which may outlive a report the
    /// agent stopped waiting for.
    objects: Arc<PyObjects>,
    reporting: Reporting,
    /// The class's `slow_start_in_datapath`: while the window is below `ssthresh`, the datapath
    /// grows it by every byte acknowledged ([`Algorithm::slow_start`]).
    slow_start_in_datapath: bool,
    guard: FlowGuard,
}

/// An algorithm's name and target, as the log names it.
struct Who {
    name: String,
    target: String,
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (py:{})", self.name, self.target)
    }
}

struct PyObjects {
    /// The instance's bound `on_report` method (looked up once).
    on_report: Py<PyAny>,
    _instance: Py<PyAny>,
    /// The view handed to every callback (one object per flow, refreshed per report).
    flow: Py<PyFlow>,
}

impl Algorithm for PyAlgorithm {
    fn name(&self) -> &str {
        &self.who.name
    }

    fn reporting(&self) -> Reporting {
        self.reporting
    }

    fn slow_start(&self, state: &FlowState) -> Option<SlowStart> {
        (self.slow_start_in_datapath && state.in_slow_start())
            .then_some(SlowStart { cwnd_bytes: state.cwnd_bytes, until_bytes: state.ssthresh_bytes })
    }

    fn on_report(&mut self, state: &mut FlowState, m: &Measurement) {
        let objects = Arc::clone(&self.objects);
        let (before, m, reporting) = (state.clone(), m.clone(), self.reporting);
        let called = self.guard.call(&self.who, "on_report", move |py| {
            let flow = objects.flow.bind(py);
            {
                let mut f = flow.borrow_mut();
                f.state.clone_from(&before);
                f.m = m;
                f.reporting = reporting;
                f.refused = None;
            }
            let result = objects.on_report.bind(py).call1((flow,));
            let mut f = flow.borrow_mut();
            outcome(py, f.refused.take(), result, |_| (f.state.clone(), f.reporting))
        });
        if let Some((after, reporting)) = called {
            *state = after;
            self.reporting = reporting;
        }
    }
}

/// What a Python algorithm sees of its flow in `on_report(flow)`: the latest measurement,
/// the shared flow state, and setters. Times are in µs, windows in bytes, rates in bytes/s.
/// Mystique's names (getCRTT, getMinRTT, getCBW, getMaxBW, isLoss, setCwnd, setPeriod, ...)
/// are aliases.
#[pyclass(name = "Flow", module = "ccswitch.agent")]
pub struct PyFlow {
    state: FlowState,
    m: Measurement,
    reporting: Reporting,
    /// The first window or rate refused during the current call (the call is then discarded).
    refused: Option<String>,
}

impl PyFlow {
    /// A value the guard passed, or the ValueError for one it refused (recorded: the call is
    /// discarded even if the algorithm catches the error).
    fn checked(&mut self, checked: Result<u64, String>) -> PyResult<u64> {
        checked.map_err(|why| {
            self.refused.get_or_insert_with(|| why.clone());
            PyValueError::new_err(why)
        })
    }
}

/// A Python int or float as f64 (a bool, a string or None is a TypeError).
pub(crate) fn number(value: &Bound<'_, PyAny>, what: &str) -> PyResult<f64> {
    if value.is_instance_of::<pyo3::types::PyBool>() || value.is_none() {
        return Err(PyTypeError::new_err(format!("{what}: expected a number, got {}", value.get_type().name()?)));
    }
    value.extract::<f64>().or_else(|e| {
        if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(value.py()) {
            Ok(f64::INFINITY) // an int beyond a float's range: refused as absurd
        } else {
            let ty = value.get_type().name().map(|n| n.to_string()).unwrap_or_default();
            Err(PyTypeError::new_err(format!("{what}: expected a number, got {ty}")))
        }
    })
}

#[pymethods]
impl PyFlow {
    // ---- the measurement of this report
    /// Datapath clock at the last ACK of this report, µs.
    #[getter]
    fn now_us(&self) -> u64 {
        self.state.now_us
    }
    /// Latest RTT sample, µs (0 before the first).
    #[getter]
    fn rtt_us(&self) -> u64 {
        self.state.latest_rtt_us
    }
    /// Current RTT (Mystique's CRTT): the latest RTT sample, µs.
    #[getter]
    fn crtt_us(&self) -> u64 {
        self.state.latest_rtt_us
    }
    /// Bytes newly acknowledged since the previous report.
    #[getter]
    fn acked_bytes(&self) -> u64 {
        self.m.acked_bytes
    }
    /// Packets newly marked lost since the previous report.
    #[getter]
    fn lost(&self) -> u64 {
        self.m.lost_packets
    }
    /// Whether the sender's retransmission timer fired.
    #[getter]
    fn timeout(&self) -> bool {
        self.m.timeout
    }
    /// ACKs that carried ECN-Echo since the previous report, in packets.
    #[getter]
    fn ecn(&self) -> u64 {
        self.m.ecn_packets
    }
    /// Bytes in flight at the last ACK.
    #[getter]
    fn in_flight(&self) -> u64 {
        self.m.bytes_in_flight
    }
    /// Delivery rate of this report, bytes/s (0: no sample).
    #[getter]
    fn delivery_rate(&self) -> u64 {
        self.m.delivery_rate_bytes_per_s
    }
    /// Same as `delivery_rate` (Mystique's current bandwidth).
    #[getter]
    fn bw(&self) -> u64 {
        self.m.delivery_rate_bytes_per_s
    }
    /// True if this report carries a loss or a timeout.
    fn is_loss(&self) -> bool {
        self.m.lost_packets > 0 || self.m.timeout
    }

    // ---- the flow state (shared with every algorithm; survives algorithm handovers)
    /// Smallest RTT seen on the flow, µs (0 before the first sample).
    #[getter]
    fn min_rtt_us(&self) -> u64 {
        self.state.min_rtt_us
    }
    /// Smoothed RTT (RFC 6298), µs.
    #[getter]
    fn srtt_us(&self) -> u64 {
        self.state.srtt_us
    }
    /// Largest delivery rate seen on the flow, bytes/s.
    #[getter]
    fn max_bw(&self) -> u64 {
        self.state.max_delivery_rate_bytes_per_s
    }
    /// Maximum segment size, bytes.
    #[getter]
    fn mss(&self) -> u64 {
        self.state.mss_bytes
    }
    /// Congestion window, bytes (assignable).
    #[getter]
    fn cwnd(&self) -> u64 {
        self.state.cwnd_bytes
    }
    #[setter(cwnd)]
    fn assign_cwnd(&mut self, bytes: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set_cwnd(bytes)
    }
    /// Slow-start threshold, bytes (2**64 - 1 until set; assignable).
    #[getter]
    fn ssthresh(&self) -> u64 {
        self.state.ssthresh_bytes
    }
    #[setter(ssthresh)]
    fn assign_ssthresh(&mut self, bytes: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set_ssthresh(bytes)
    }
    /// Pacing rate, bytes/s, or None to leave pacing to the datapath (assignable).
    #[getter]
    fn rate(&self) -> Option<u64> {
        self.state.pacing_rate_bytes_per_s
    }
    #[setter(rate)]
    fn assign_rate(&mut self, bytes_per_s: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set_rate(bytes_per_s)
    }
    /// Whether the window is below the slow-start threshold.
    #[getter]
    fn in_slow_start(&self) -> bool {
        self.state.in_slow_start()
    }
    /// Whether the flow is in a recovery episode started by `classify()` (algorithms that
    /// track their own recovery, like the example Reno, do not need it).
    #[getter]
    fn in_recovery(&self) -> bool {
        self.state.in_recovery()
    }
    /// The reporting mode: "per_rtt", "per_ack" or a period in µs.
    #[getter]
    fn reporting(&self, py: Python<'_>) -> PyObject {
        match self.reporting {
            Reporting::PerRtt => "per_rtt".into_py(py),
            Reporting::PerAck => "per_ack".into_py(py),
            Reporting::EveryMicros(us) => us.into_py(py),
        }
    }

    // ---- setters
    /// Set the congestion window, bytes (int or float), from 2 segments to the largest TCP
    /// window (2**30 - 2**14); anything else raises ValueError and discards the whole call.
    fn set_cwnd(&mut self, bytes: &Bound<'_, PyAny>) -> PyResult<()> {
        let checked = number(bytes, "cwnd").and_then(|x| self.checked(check_window(x, self.state.mss_bytes)))?;
        self.state.cwnd_bytes = checked;
        Ok(())
    }
    /// Set the slow-start threshold, bytes.
    fn set_ssthresh(&mut self, bytes: &Bound<'_, PyAny>) -> PyResult<()> {
        self.state.ssthresh_bytes = amount(bytes, "ssthresh")?;
        Ok(())
    }
    /// Set the pacing rate, bytes/s (2 segments per second to 10**12); None leaves pacing to
    /// the datapath. A rate out of bounds raises ValueError and discards the whole call.
    fn set_rate(&mut self, bytes_per_s: &Bound<'_, PyAny>) -> PyResult<()> {
        self.state.pacing_rate_bytes_per_s = if bytes_per_s.is_none() {
            None
        } else {
            let checked = number(bytes_per_s, "rate").and_then(|x| self.checked(check_rate(x, self.state.mss_bytes)))?;
            Some(checked)
        };
        Ok(())
    }
    /// Report every `us` microseconds (and at once on loss or timeout).
    fn set_period_us(&mut self, us: &Bound<'_, PyAny>) -> PyResult<()> {
        self.reporting = Reporting::EveryMicros(period_us(us)?);
        Ok(())
    }
    /// Report after every ACK (costly: one message per ACK).
    fn set_report_per_ack(&mut self) {
        self.reporting = Reporting::PerAck;
    }
    /// Report once per RTT (the default).
    fn set_report_per_rtt(&mut self) {
        self.reporting = Reporting::PerRtt;
    }

    /// The control flow shared by the Rust loss-based algorithms (FlowState::classify):
    /// returns ("timeout", 0), ("congestion", bytes) for the first loss of a congestion event
    /// (which starts a recovery episode) with the bytes acknowledged before it that slow
    /// start did not take, to grow by before the cut, ("hold", 0) while recovering or when slow start
    /// used every acknowledged byte, or ("avoidance", bytes) with the bytes left for
    /// congestion avoidance. In slow start it grows the window itself. Call at most once
    /// per report.
    fn classify(&mut self) -> (&'static str, u64) {
        let m = &self.m;
        match self.state.classify(m) {
            WindowEvent::Timeout => ("timeout", 0),
            WindowEvent::CongestionEvent { acked_bytes } => ("congestion", acked_bytes),
            WindowEvent::Hold => ("hold", 0),
            WindowEvent::Avoidance { acked_bytes } => ("avoidance", acked_bytes),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Flow(cwnd={}, ssthresh={}, rtt_us={}, min_rtt_us={}, acked_bytes={}, lost={}, timeout={}, in_flight={})",
            self.state.cwnd_bytes,
            self.state.ssthresh_bytes,
            self.state.latest_rtt_us,
            self.state.min_rtt_us,
            self.m.acked_bytes,
            self.m.lost_packets,
            self.m.timeout,
            self.m.bytes_in_flight
        )
    }

    // ---- Mystique's names (Table III), same units as above
    #[allow(non_snake_case)]
    fn getCRTT(&self) -> u64 {
        self.crtt_us()
    }
    #[allow(non_snake_case)]
    fn getMinRTT(&self) -> u64 {
        self.min_rtt_us()
    }
    #[allow(non_snake_case)]
    fn getSRTT(&self) -> u64 {
        self.srtt_us()
    }
    #[allow(non_snake_case)]
    fn getCBW(&self) -> u64 {
        self.bw()
    }
    #[allow(non_snake_case)]
    fn getMaxBW(&self) -> u64 {
        self.max_bw()
    }
    #[allow(non_snake_case)]
    fn getCwnd(&self) -> u64 {
        self.cwnd()
    }
    #[allow(non_snake_case)]
    fn isLoss(&self) -> bool {
        self.is_loss()
    }
    #[allow(non_snake_case)]
    fn setCwnd(&mut self, bytes: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set_cwnd(bytes)
    }
    #[allow(non_snake_case)]
    fn setRate(&mut self, bytes_per_s: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set_rate(bytes_per_s)
    }
    #[allow(non_snake_case)]
    fn setPeriod(&mut self, us: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set_period_us(us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::python_guard::tests::python_tests_one_at_a_time;
    use crate::python_guard::{log_as, take_counts, LogAs, PythonCounts, LOGGED_IN_FULL, LOG_EVERY};
    use std::path::Path;
    use std::time::{Duration, Instant};

    const MSS: u64 = 1448;

    /// Make the repository's `python/` dir (the `ccswitch` package) and `dir` importable.
    fn add_paths(extra: &[&Path]) {
        let repo_python = Path::new(env!("CARGO_MANIFEST_DIR")).join("../python");
        Python::with_gil(|py| {
            let sys_path = py.import_bound("sys").unwrap().getattr("path").unwrap();
            for dir in std::iter::once(repo_python.as_path()).chain(extra.iter().copied()) {
                let dir = dir.canonicalize().unwrap().display().to_string();
                if !sys_path.contains(&dir).unwrap() {
                    sys_path.call_method1("insert", (0, dir)).unwrap();
                }
            }
        });
    }

    fn write_module(name: &str, source: &str) -> std::path::PathBuf {
        let dir = crate::test_files::dir("modules");
        std::fs::write(dir.join(format!("{name}.py")), source).unwrap();
        add_paths(&[&dir]);
        dir
    }

    fn ack(now_ms: u64, segments: u64, in_flight_segments: u64) -> Measurement {
        Measurement {
            now_us: now_ms * 1000,
            acked_bytes: segments * MSS,
            rtt_us: 50_000,
            bytes_in_flight: in_flight_segments * MSS,
            delivery_rate_bytes_per_s: segments * MSS * 20,
            ..Default::default()
        }
    }

    /// Feed one measurement as the agent does (observe, then the algorithm).
    fn feed(alg: &mut dyn Algorithm, state: &mut FlowState, m: &Measurement) {
        state.observe(m);
        alg.on_report(state, m);
    }

    #[test]
    fn example_reno_slow_starts_halves_on_loss_and_grows_one_mss_per_rtt() {
        let _one = python_tests_one_at_a_time();
        add_paths(&[]);
        let mut reno = load("ccswitch.authoring.examples.reno:Reno").expect("the example loads");
        assert_eq!(reno.name(), "Reno");
        assert_eq!(reno.reporting(), Reporting::PerRtt);
        let mut state = FlowState::new(MSS as u32, 10 * MSS as u32);
        // Slow start: one RTT of ACKs for the whole window doubles it.
        let mut t = 0;
        for expected in [20, 40, 80] {
            t += 50;
            let cwnd = state.cwnd_bytes / MSS;
            feed(reno.as_mut(), &mut state, &ack(t, cwnd, cwnd));
            assert_eq!(state.cwnd_bytes, expected * MSS);
        }
        // The datapath slow-starts between reports (`slow_start_in_datapath`).
        assert_eq!(reno.slow_start(&state), Some(SlowStart { cwnd_bytes: 80 * MSS, until_bytes: u64::MAX }));
        // A loss halves the window and sets ssthresh.
        t += 10;
        feed(reno.as_mut(), &mut state, &Measurement { lost_packets: 1, ..ack(t, 0, 80) });
        assert_eq!((state.cwnd_bytes, state.ssthresh_bytes), (40 * MSS, 40 * MSS));
        assert_eq!(reno.slow_start(&state), None, "past slow start");
        // A second loss from the same window is the same congestion event.
        feed(reno.as_mut(), &mut state, &Measurement { lost_packets: 2, ..ack(t + 5, 10, 70) });
        assert_eq!(state.cwnd_bytes, 40 * MSS);
        // Recovery lasts until the 80 segments in flight at the loss are acknowledged: no
        // growth until then; then congestion avoidance adds one MSS per window acknowledged.
        feed(reno.as_mut(), &mut state, &ack(t + 50, 69, 40));
        assert_eq!(state.cwnd_bytes, 40 * MSS, "still recovering: one segment left");
        feed(reno.as_mut(), &mut state, &ack(t + 51, 1, 40));
        assert_eq!(state.cwnd_bytes, 40 * MSS);
        t += 51;
        for i in 1..=3 {
            t += 50;
            feed(reno.as_mut(), &mut state, &ack(t, 40 + i - 1, 40));
            assert_eq!(state.cwnd_bytes, (40 + i) * MSS, "round {i}");
        }
        // A timeout restarts from the minimum window (2 segments) with ssthresh at half.
        feed(reno.as_mut(), &mut state, &Measurement { timeout: true, ..ack(t + 300, 0, 43) });
        assert_eq!(state.cwnd_bytes, 2 * MSS);
        assert_eq!(state.ssthresh_bytes, 21 * MSS, "half of 43 segments, in whole segments");
    }

    #[test]
    fn example_reno_matches_the_rust_reno_report_for_report() {
        let _one = python_tests_one_at_a_time();
        add_paths(&[]);
        let mut py = load("ccswitch.authoring.examples.reno:Reno").unwrap();
        let mut rust = ccswitch_algorithms::simple("reno").unwrap();
        let (mut ps, mut rs) =
            (FlowState::new(MSS as u32, 10 * MSS as u32), FlowState::new(MSS as u32, 10 * MSS as u32));
        let mut rng = ccswitch_algorithms::xorshift::XorShift64::new(0x2545_f491_4f6c_dd1d);
        let mut next = |n: u64| rng.below(n);
        for i in 0..3000u64 {
            let cwnd_segments = (rs.cwnd_bytes / MSS).max(1);
            let mut m = ack(i * 50, next(cwnd_segments + 1), cwnd_segments);
            match next(100) {
                0..=2 => m.lost_packets = 1 + next(3),
                3 if next(10) == 0 => m.timeout = true,
                _ => {}
            }
            feed(py.as_mut(), &mut ps, &m);
            feed(rust.as_mut(), &mut rs, &m);
            assert_eq!(
                (ps.cwnd_bytes, ps.ssthresh_bytes),
                (rs.cwnd_bytes, rs.ssthresh_bytes),
                "report {i}: {m:?}"
            );
            assert_eq!(py.reporting(), rust.reporting(), "report {i}: {m:?}");
        }
    }

    #[test]
    fn the_flow_view_exposes_the_measurement_and_applies_setters() {
        let _one = python_tests_one_at_a_time();
        write_module(
            "flow_view_probe",
            r#"
class Probe:
    reporting = "per_ack"
    seen = None
    def on_report(self, flow):
        Probe.seen = (flow.acked_bytes, flow.lost, flow.is_loss(), flow.isLoss(), flow.rtt_us,
                      flow.getCRTT(), flow.min_rtt_us, flow.getMinRTT(), flow.bw, flow.getMaxBW(),
                      flow.in_flight, flow.mss, flow.now_us, flow.ecn, flow.timeout, flow.reporting)
        flow.cwnd = flow.cwnd * 1.5
        flow.set_ssthresh(30000)
        flow.setRate(1_000_000)
        flow.setPeriod(20_000)
"#,
        );
        let mut alg = load("flow_view_probe:Probe").unwrap();
        assert_eq!(alg.name(), "Probe", "the class name when there is no `name`");
        assert_eq!(alg.reporting(), Reporting::PerAck);
        let mut state = FlowState::new(MSS as u32, 10 * MSS as u32);
        let m = Measurement {
            now_us: 7,
            acked_bytes: 2896,
            lost_packets: 1,
            ecn_packets: 3,
            rtt_us: 40_000,
            min_rtt_us: 30_000,
            bytes_in_flight: 5000,
            delivery_rate_bytes_per_s: 123_456,
            ..Default::default()
        };
        feed(alg.as_mut(), &mut state, &m);
        assert_eq!(state.cwnd_bytes, 15 * MSS);
        assert_eq!(state.ssthresh_bytes, 30000);
        assert_eq!(state.pacing_rate_bytes_per_s, Some(1_000_000));
        assert_eq!(alg.reporting(), Reporting::EveryMicros(20_000));
        Python::with_gil(|py| {
            let seen = py.import_bound("flow_view_probe").unwrap().getattr("Probe").unwrap()
                .getattr("seen").unwrap().repr().unwrap().to_string();
            assert_eq!(
                seen,
                "(2896, 1, True, True, 40000, 40000, 30000, 30000, 123456, 123456, 5000, 1448, 7, 3, False, 'per_ack')"
            );
        });
    }

    /// Feed `alg` one report and return the counts it left for the events file.
    fn feed_counted(alg: &mut dyn Algorithm, state: &mut FlowState, m: &Measurement) -> PythonCounts {
        take_counts();
        feed(alg, state, m);
        take_counts()
    }

    fn counted(errors: u64, timeouts: u64, skipped: u64, bad_values: u64) -> PythonCounts {
        PythonCounts { errors, timeouts, skipped, bad_values }
    }

    #[test]
    fn an_exception_in_on_report_keeps_the_window_and_the_flow() {
        let _one = python_tests_one_at_a_time();
        write_module(
            "raising_probe",
            r#"
class Raises:
    calls = 0
    def on_report(self, flow):
        Raises.calls += 1
        flow.set_cwnd(5000)    # discarded: the call failed
        if Raises.calls % 2:
            raise RuntimeError("boom")
        flow.set_cwnd(99999)
"#,
        );
        let mut alg = load("raising_probe:Raises").unwrap();
        let mut state = FlowState::new(MSS as u32, 10 * MSS as u32);
        let n = feed_counted(alg.as_mut(), &mut state, &ack(1, 1, 10));
        assert_eq!(state.cwnd_bytes, 10 * MSS, "the window is kept when on_report raises");
        assert_eq!(n, counted(1, 0, 0, 0));
        let n = feed_counted(alg.as_mut(), &mut state, &ack(2, 1, 10));
        assert_eq!(state.cwnd_bytes, 99999, "and the next report is handled normally");
        assert!(n.is_zero());
    }

    #[test]
    fn negative_zero_tiny_nan_infinite_and_absurd_windows_and_rates_are_refused_and_counted() {
        let _one = python_tests_one_at_a_time();
        write_module(
            "bad_value_probe",
            r#"
import math
class Bad:
    value = None
    attr = "cwnd"
    catch = False
    def on_report(self, flow):
        flow.set_ssthresh(7777)          # discarded with the rest of the call
        if Bad.catch:
            try:
                setattr(flow, Bad.attr, Bad.value)
            except ValueError:
                pass
        else:
            setattr(flow, Bad.attr, Bad.value)
"#,
        );
        let mut alg = load("bad_value_probe:Bad").unwrap();
        let mut state = FlowState::new(MSS as u32, 10 * MSS as u32);
        let set = |attr: &str, value: &str, catch: bool| {
            Python::with_gil(|py| {
                let code = format!(
                    "import bad_value_probe as m, math\nm.Bad.attr = {attr:?}\nm.Bad.value = {value}\nm.Bad.catch = {}",
                    if catch { "True" } else { "False" }
                );
                py.run_bound(&code, None, None).unwrap();
            })
        };
        let bad = [
            ("cwnd", "-5"), ("cwnd", "0"), ("cwnd", "1"), ("cwnd", "2 * 1448 - 1"), ("cwnd", "math.nan"),
            ("cwnd", "math.inf"), ("cwnd", "-math.inf"), ("cwnd", "2**30"), ("cwnd", "10**400"),
            ("rate", "0"), ("rate", "-1.5"), ("rate", "math.nan"), ("rate", "10**13"),
        ];
        for (i, (attr, value)) in bad.iter().enumerate() {
            for catch in [false, true] {
                set(attr, value, catch);
                let n = feed_counted(alg.as_mut(), &mut state, &ack(i as u64, 1, 10));
                assert_eq!(n, counted(0, 0, 0, 1), "{attr} = {value} (caught: {catch})");
                assert_eq!(state.cwnd_bytes, 10 * MSS, "{attr} = {value}: the window is kept");
                assert_eq!(state.pacing_rate_bytes_per_s, None, "{attr} = {value}: so is the rate");
                assert_eq!(state.ssthresh_bytes, u64::MAX, "{attr} = {value}: and everything else the call set");
            }
        }
        // In bounds: applied.
        for (attr, value) in [("cwnd", "2 * 1448"), ("cwnd", "65535 * 2**14"), ("rate", "2 * 1448"), ("rate", "None")] {
            set(attr, value, false);
            assert!(feed_counted(alg.as_mut(), &mut state, &ack(99, 1, 10)).is_zero(), "{attr} = {value}");
        }
        assert_eq!(state.cwnd_bytes, 65535 << 14);
        assert_eq!(state.ssthresh_bytes, 7777);
    }

    #[test]
    fn a_callback_stuck_in_a_loop_is_abandoned_counted_and_its_flow_suspended_then_retried() {
        let _one = python_tests_one_at_a_time();
        write_module(
            "stuck_probe",
            "class Stuck:\n    stuck = True\n    def on_report(self, flow):\n        flow.cwnd = 5 * 1448\n        while Stuck.stuck:\n            pass\n        flow.cwnd = 20 * 1448\n",
        );
        let mut alg = load("stuck_probe:Stuck").unwrap();
        let mut state = FlowState::new(MSS as u32, 10 * MSS as u32);
        let saved = crate::python_guard::budget();
        crate::python_guard::set_budget(Duration::from_millis(10));
        let started = Instant::now();
        let n = feed_counted(alg.as_mut(), &mut state, &ack(1, 1, 10));
        let waited = started.elapsed();
        assert_eq!(n, counted(0, 1, 0, 0));
        assert_eq!(state.cwnd_bytes, 10 * MSS, "the window set before the loop is not applied");
        // Suspended: answered at once, without Python.
        let started = Instant::now();
        for i in 2..50 {
            assert_eq!(feed_counted(alg.as_mut(), &mut state, &ack(i, 1, 10)), counted(0, 0, 1, 0));
        }
        let skipping = started.elapsed();
        assert_eq!(state.cwnd_bytes, 10 * MSS);
        // Past the suspension, with the loop fixed, the flow is served again.
        Python::with_gil(|py| py.run_bound("import stuck_probe\nstuck_probe.Stuck.stuck = False", None, None).unwrap());
        std::thread::sleep(crate::python_guard::FIRST_SUSPENSION);
        let n = feed_counted(alg.as_mut(), &mut state, &ack(60, 1, 10));
        crate::python_guard::set_budget(saved);
        assert_eq!(n, counted(0, 0, 0, 0));
        assert_eq!(state.cwnd_bytes, 20 * MSS);
        eprintln!("waited {waited:?} for the stuck call; 48 skipped reports took {skipping:?}");
    }

    #[test]
    fn the_log_shows_the_first_few_events_of_a_kind_in_full_then_one_in_a_thousand() {
        let _one = python_tests_one_at_a_time();
        let logged: Vec<LogAs> = (1..=LOG_EVERY + 1).map(log_as).collect();
        assert!(logged[..LOGGED_IN_FULL as usize - 1].iter().all(|l| *l == LogAs::Full));
        assert_eq!(logged[LOGGED_IN_FULL as usize - 1], LogAs::FullThenThinned);
        assert_eq!(logged[LOGGED_IN_FULL as usize], LogAs::Quiet);
        assert_eq!(logged[LOG_EVERY as usize - 1], LogAs::Count);
        assert_eq!(logged.iter().filter(|l| **l == LogAs::FullThenThinned).count(), 1);
    }

    #[test]
    fn every_exception_is_counted_for_the_event_log_and_claimed_once() {
        let _one = python_tests_one_at_a_time();
        write_module(
            "always_raises_probe",
            "class Always:\n    def on_report(self, flow):\n        raise ValueError('no')\n",
        );
        let mut alg = load("always_raises_probe:Always").unwrap();
        let mut state = FlowState::new(MSS as u32, 10 * MSS as u32);
        take_counts();
        for i in 1..=7 {
            feed(alg.as_mut(), &mut state, &ack(i, 1, 10));
        }
        assert_eq!(take_counts(), counted(7, 0, 0, 0), "each raise is counted");
        assert!(take_counts().is_zero(), "and claimed once");
    }

    #[test]
    fn bad_targets_give_clear_errors() {
        let _one = python_tests_one_at_a_time();
        add_paths(&[]);
        let err = |t: &str| format!("{:#}", load(t).err().expect(t));
        let e = err("nonexistent.mod:X");
        assert!(e.starts_with("cannot import nonexistent.mod:"), "{e}");
        assert!(e.contains("ModuleNotFoundError") && e.contains("sys.path"), "{e}");
        let e = err("ccswitch.authoring.examples.reno:NoSuchClass");
        assert!(e.starts_with("cannot find class NoSuchClass in module ccswitch.authoring.examples.reno"), "{e}");
        assert!(err("no_class_given").contains("expected py:MODULE:CLASS"));
        write_module("broken_probe", "class NoCallback:\n    pass\nclass BadInit:\n    def __init__(self):\n        1 / 0\n    def on_report(self, flow):\n        pass\nclass BadReporting:\n    reporting = 'sometimes'\n    def on_report(self, flow):\n        pass\n");
        assert!(err("broken_probe:NoCallback").contains("has no on_report(self, flow) method"));
        let e = err("broken_probe:BadInit");
        assert!(e.contains("cannot instantiate broken_probe:BadInit") && e.contains("ZeroDivisionError"), "{e}");
        assert!(err("broken_probe:BadReporting").contains("\"sometimes\": expected"));
        write_module("looping_init_probe", "class Loops:\n    def __init__(self):\n        while True:\n            pass\n    def on_report(self, flow):\n        pass\n");
        let e = err("looping_init_probe:Loops");
        assert!(e.contains("py:looping_init_probe:Loops: still loading (import and constructor) after 0.5 s"), "{e}");
        // The interrupted constructor leaves the interpreter usable.
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Err(e) = load("ccswitch.authoring.examples.reno:Reno") {
            assert!(e.to_string().contains("still busy"), "{e:#}");
            assert!(Instant::now() < deadline, "{e:#}");
            std::thread::sleep(Duration::from_millis(10));
        }
        write_module("syntax_error_probe", "def broken(:\n");
        let e = err("syntax_error_probe:X");
        assert!(e.contains("cannot import syntax_error_probe") && e.contains("SyntaxError"), "{e}");
    }
}
