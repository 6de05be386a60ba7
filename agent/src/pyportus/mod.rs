//! Python algorithms that bring their own datapath programs, run in the agent's embedded
//! interpreter: unmodified pyportus files (`--algorithm pyportus:FILE.py[:CLASS]`) and
//! ccswitch's own full Python API (`py:MODULE:CLASS` whose class declares
//! `datapath_programs`).
//!
//! Both compile their programs with the compiler of Rust algorithms
//! ([`CompiledProgram::compile`], when the algorithm is loaded, so a program that does not
//! compile stops the agent at start) and become a [`ProgramAlgorithm`]: the agent installs
//! their programs and the datapath runs them (in BPF's interpreter on the kernel datapath, in
//! the shim on the ovs datapath), as it does the Rust algorithms' programs.
//!
//! The Python side sees, per flow, a [`PyDatapath`] (pyportus's `datapath`; ccswitch's
//! `flow`): `update_field(name, value)`, `update_fields([(name, value), ...])`,
//! `set_program(name, [(name, value), ...])`. Names are `Cwnd`, `Rate` or a control register
//! of the flow's program (`Control.x` or `x`). What one callback asks is checked when it is
//! called (an unknown name raises there, as in pyportus) and sent when the callback returns,
//! as one CHANGE_PROG or UPDATE_FIELDS. Reports are [`PyReport`]s whose attributes are the
//! program's `Report` fields.
//!
//! Loading and every callback run under [`crate::python_guard`], as the simple API's do: on
//! the Python worker thread within the time budget. The callback collects what it asks in
//! the flow's [`PyDatapath`] and hands it back; the agent's thread applies it to the flow
//! once the callback has returned. A callback that raises, runs past its budget (abandoned,
//! interrupted, its flow suspended) or sets a window, rate or register the guard refuses
//! (`Cwnd` from 1 segment, [`check_program_window`]; `Rate` as [`check_rate`]; a register
//! non-negative and finite) is counted and logged, and what it asked is dropped, program
//! change included (pyportus would have sent each call at once), so the flow keeps its
//! window and program.
//!
//! pyportus files: [`load_pyportus`] installs the compatibility module (`portus.py` beside
//! this file, with the classes below) as `portus` and `pyportus` in the embedded
//! interpreter's `sys.modules`, then imports the file; its module-level
//! `portus.start(ipc, alg)` registers `alg` and returns. One `alg` serves every flow, as in
//! pyportus: the agent calls `alg.new_flow(datapath=..., datapath_info=...)` per flow.
//! ccswitch's API: one instance of the class per flow, as for the simple API.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{anyhow, Context, Result};
use ccswitch_algorithms::{FlowControl, DatapathInfo, ProgramAlgorithm, Report};
use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyDict, PyString};
use tracing::warn;

use crate::program::CompiledProgram;
use crate::python::{amount, describe, number, set_up_paths, sys_path};
use crate::python_guard::{check_program_window, check_rate, outcome, Called, FlowGuard};

#[cfg(test)]
mod tests;

/// The `portus` module offered to pyportus files (see its docstring).
const PORTUS_SOURCE: &str = include_str!("portus.py");

#[allow(unexpected_cfgs)] // pyo3's macro tests a feature of its own crate
mod refused {
    pyo3::create_exception!(
        portus,
        RefusedByCcswitch,
        pyo3::exceptions::PyException,
        "pyportus offers this and ccswitch cannot honour it."
    );
}
use refused::RefusedByCcswitch;

/// Which Python API an algorithm is written against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    /// pyportus: one `AlgBase` instance; per flow `new_flow(datapath, datapath_info)` returns
    /// an object with `on_report(r)`. Fields cannot be updated before the flow has a program.
    Pyportus,
    /// ccswitch: one instance of the class per flow, `on_create(flow)` (optional) and
    /// `on_report(flow, report)`; the flow starts on the first program.
    Ccswitch,
}

/// One program as callbacks address it.
struct ProgramLayout {
    name: String,
    report_names: Arc<[String]>,
    /// The same, as interned Python strings (what attribute names in code are).
    interned_report_names: Vec<Py<PyString>>,
    /// Control registers, without `Control.`, sorted (for messages).
    controls: Vec<String>,
}

/// An algorithm loaded once per process (the agent instantiates a spec per flow).
struct LoadedPythonAlgorithm {
    api: Api,
    /// The class's name, as logs and the events file name the flows' algorithm.
    name: String,
    /// The spec as given, for logs.
    spec: String,
    /// pyportus: the registered `AlgBase` instance; ccswitch: the class.
    object: Py<PyAny>,
    programs: Vec<(String, String)>,
    layouts: Arc<[ProgramLayout]>,
    /// A pyportus flow whose `new_flow` chose no program has been logged.
    warned_no_program: AtomicBool,
}

/// LoadedPythonAlgorithm algorithms by spec (a pyportus file by its canonical path). Looked up and filled with
/// the GIL held but never held across Python code, which may release the GIL.
static LOADED: Mutex<Option<HashMap<String, Arc<LoadedPythonAlgorithm>>>> = Mutex::new(None);

fn cached(key: &str) -> Option<Arc<LoadedPythonAlgorithm>> {
    LOADED.lock().expect("loaded algorithms poisoned").as_ref()?.get(key).cloned()
}

fn remember(key: String, loaded: LoadedPythonAlgorithm) -> Arc<LoadedPythonAlgorithm> {
    let mut map = LOADED.lock().expect("loaded algorithms poisoned");
    // Another thread may have loaded it meanwhile: keep the first, so all flows share one.
    Arc::clone(map.get_or_insert_with(HashMap::new).entry(key).or_insert_with(|| Arc::new(loaded)))
}

/// `pyportus:FILE.py[:CLASS]` (the part after `pyportus:`): an unmodified pyportus algorithm
/// file. A relative FILE is looked for in the current directory, then in each `sys.path`
/// entry (`PYTHONPATH`, where `ccswitch run` puts the scenario's directory). Without CLASS,
/// the algorithm the file registered with `portus.start`; with CLASS, the registered instance
/// of that class, else `CLASS()`.
pub fn load_pyportus(target: &str) -> Result<Box<dyn ProgramAlgorithm>> {
    let (file, class) = match target.rsplit_once(':') {
        _ if target.ends_with(".py") => (target, None),
        Some((file, class)) if file.ends_with(".py") && !class.is_empty() => (file, Some(class)),
        _ => return Err(anyhow!("pyportus:{target}: expected pyportus:FILE.py or pyportus:FILE.py:CLASS")),
    };
    let (spec, file, class) = (format!("pyportus:{target}"), file.to_string(), class.map(str::to_string));
    let loaded = crate::python_guard::load(&spec.clone(), move |py| -> Result<Arc<LoadedPythonAlgorithm>> {
        set_up_paths(py);
        let portus = portus_module(py).map_err(|e| anyhow!("the pyportus compatibility module: {}", describe(py, &e)))?;
        let path = find_file(py, &file)?;
        let key = format!("pyportus:{}:{}", path.display(), class.as_deref().unwrap_or(""));
        if let Some(l) = cached(&key) {
            return Ok(l);
        }
        let (alg, programs): (Bound<'_, PyAny>, Bound<'_, PyDict>) = portus
            .call_method1("_load", (path.display().to_string(), class))
            .and_then(|r| r.extract())
            .map_err(|e| anyhow!("{spec}: {}", refusal_or_traceback(py, &e)))?;
        let name = alg.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "pyportus".into());
        let loaded = compile(Api::Pyportus, name, spec, alg.unbind(), &programs)?;
        Ok(remember(key, loaded))
    })??;
    Ok(Box::new(PythonProgramAlgorithm::new(loaded, None)))
}

/// `py:MODULE:CLASS` whose class declares `datapath_programs`: ccswitch's full Python API
/// (`ccswitch.authoring.ProgramAlgorithm`). `None` for any other target, which the simple API
/// loads (and whose errors it reports).
pub fn load_full_api(target: &str) -> Result<Option<Box<dyn ProgramAlgorithm>>> {
    let Some((module, class)) = target.rsplit_once(':').filter(|(m, c)| !m.is_empty() && !c.is_empty()) else {
        return Ok(None);
    };
    let (target, module, class) = (target.to_string(), module.to_string(), class.to_string());
    crate::python_guard::load(&format!("py:{target}"), move |py| {
        set_up_paths(py);
        let Ok(cls) = py.import_bound(module.as_str()).and_then(|m| m.getattr(class.as_str())) else {
            return Ok(None);
        };
        if !cls.hasattr(intern!(py, "datapath_programs"))? {
            return Ok(None);
        }
        let key = format!("py:{target}");
        let loaded = match cached(&key) {
            Some(l) => l,
            None => {
                let first = cls.call0().map_err(|e| anyhow!("cannot instantiate {module}:{class}: {}", describe(py, &e)))?;
                let programs = first
                    .call_method0(intern!(py, "datapath_programs"))
                    .and_then(|p| p.downcast_into::<PyDict>().map_err(PyErr::from))
                    .map_err(|e| anyhow!("{module}:{class}.datapath_programs(): {}", describe(py, &e)))?;
                // As for the simple API: a string `name` names the algorithm, else the class.
                let name = match first.getattr(intern!(py, "name")) {
                    Ok(n) if n.is_instance_of::<pyo3::types::PyString>() => n.extract::<String>()?,
                    _ => class.clone(),
                };
                let l = compile(Api::Ccswitch, name, key.clone(), cls.clone().unbind(), &programs)?;
                remember(key, l)
            }
        };
        let instance = cls.call0().map_err(|e| anyhow!("cannot instantiate {module}:{class}: {}", describe(py, &e)))?;
        if !instance.getattr(intern!(py, "on_report")).is_ok_and(|f| f.is_callable()) {
            return Err(anyhow!(
                "{module}:{class} has no on_report(self, flow, report) method (see ccswitch.authoring.ProgramAlgorithm)"
            ));
        }
        Ok(Some(Box::new(PythonProgramAlgorithm::new(loaded, Some(instance.unbind()))) as Box<dyn ProgramAlgorithm>))
    })?
}

/// Compile an algorithm's programs (name → source, in the dict's order: the first is a new
/// flow's) with the agent's compiler.
fn compile(
    api: Api,
    name: String,
    spec: String,
    object: Py<PyAny>,
    programs: &Bound<'_, PyDict>,
) -> Result<LoadedPythonAlgorithm> {
    let py = programs.py();
    let mut sources = Vec::new();
    for (program, source) in programs.iter() {
        match (program.extract::<String>(), source.extract::<String>()) {
            (Ok(program), Ok(source)) => sources.push((program, source)),
            _ => return Err(anyhow!("{spec}: datapath_programs() must return a dict of string -> string")),
        }
    }
    if sources.is_empty() {
        return Err(anyhow!("{spec}: datapath_programs() must return at least one program"));
    }
    let mut layouts = Vec::new();
    for (program, source) in &sources {
        let compiled = CompiledProgram::compile(program, source)
            .with_context(|| format!("{spec}: datapath program {program:?} does not compile"))?;
        let mut controls: Vec<String> = compiled.control_names().map(str::to_string).collect();
        controls.sort();
        let interned_report_names =
            compiled.report_names.iter().map(|n| PyString::intern_bound(py, n).unbind()).collect();
        layouts.push(ProgramLayout {
            name: program.clone(),
            report_names: compiled.report_names.clone().into(),
            interned_report_names,
            controls,
        });
    }
    Ok(LoadedPythonAlgorithm {
        api,
        name,
        spec,
        object,
        programs: sources,
        layouts: layouts.into(),
        warned_no_program: AtomicBool::new(false),
    })
}

/// An exception from loading: a refusal by its message alone, anything else with its traceback.
fn refusal_or_traceback(py: Python<'_>, e: &PyErr) -> String {
    if e.is_instance_of::<RefusedByCcswitch>(py) {
        return format!("refused: {}", e.value_bound(py));
    }
    describe(py, e)
}

/// FILE as given if it exists (relative to the current directory), else the first `sys.path`
/// entry that holds it.
fn find_file(py: Python<'_>, file: &str) -> Result<PathBuf> {
    let given = Path::new(file);
    let mut candidates = vec![given.to_path_buf()];
    if given.is_relative() {
        let entries: Vec<String> =
            py.import_bound("sys").and_then(|s| s.getattr("path")).and_then(|p| p.extract()).unwrap_or_default();
        candidates.extend(entries.iter().filter(|e| !e.is_empty()).map(|e| Path::new(e).join(given)));
    }
    candidates
        .iter()
        .find(|p| p.is_file())
        .map(|p| p.canonicalize().unwrap_or_else(|_| p.clone()))
        .ok_or_else(|| {
            anyhow!(
                "pyportus:{file}: no such file in the current directory{}",
                if given.is_relative() { format!(" or on sys.path ({})", sys_path(py)) } else { String::new() }
            )
        })
}

/// The `portus` module, made once per process: the agent's classes as `_ccswitch_pyportus`,
/// then `portus.py` run as `portus` (it adds itself as `pyportus` too).
fn portus_module(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    static PORTUS: GILOnceCell<Py<PyModule>> = GILOnceCell::new();
    let m = PORTUS.get_or_try_init(py, || -> PyResult<Py<PyModule>> {
        let native = PyModule::new_bound(py, "_ccswitch_pyportus")?;
        native.add_class::<PyDatapath>()?;
        native.add_class::<PyDatapathInfo>()?;
        native.add_class::<PyReport>()?;
        native.add_function(wrap_pyfunction!(try_compile, &native)?)?;
        native.add("RefusedByCcswitch", py.get_type_bound::<RefusedByCcswitch>())?;
        py.import_bound("sys")?.getattr("modules")?.set_item("_ccswitch_pyportus", &native)?;
        Ok(PyModule::from_code_bound(py, PORTUS_SOURCE, "<ccswitch-agent>/portus.py", "portus")?.unbind())
    })?;
    Ok(m.bind(py).clone())
}

/// pyportus's `try_compile(program)`: "" if the agent's compiler accepts it, else why not.
#[pyfunction]
fn try_compile(program: &str) -> String {
    match CompiledProgram::compile("program", program) {
        Ok(_) => String::new(),
        Err(e) => format!("{e:#}"),
    }
}

/// What one callback asked of its flow, sent when it returns.
#[derive(Default)]
struct PendingDatapathChanges {
    /// `set_program` was called: the flow changes to `PyDatapath::program`.
    program_changed: bool,
    cwnd_bytes: Option<u32>,
    rate_bytes_per_s: Option<u64>,
    /// Control registers of the flow's (new) program, without `Control.`.
    controls: Vec<(String, u64)>,
}

/// A register a callback may set.
enum Field {
    Cwnd,
    Rate,
    Control(String),
}

/// pyportus's `datapath` of one flow (ccswitch's full-API `flow`).
#[pyclass(name = "PyDatapath", module = "portus")]
pub struct PyDatapath {
    layouts: Arc<[ProgramLayout]>,
    info: DatapathInfo,
    /// The flow's program; `None` for a pyportus flow before its first `set_program`.
    program: Option<usize>,
    pending: PendingDatapathChanges,
    /// The first window, rate or register value refused during the current callback (the
    /// callback's whole effect is then discarded, even if the algorithm caught the error).
    refused: Option<String>,
}

impl PyDatapath {
    fn resolve(&self, name: &str) -> PyResult<Field> {
        let Some(program) = self.program else {
            return Err(PyValueError::new_err(format!(
                "cannot update {name}: no datapath program installed yet (call datapath.set_program(name, fields) first)"
            )));
        };
        let layout = &self.layouts[program];
        let bare = name.strip_prefix("Control.").unwrap_or(name);
        match name {
            "Cwnd" => Ok(Field::Cwnd),
            "Rate" => Ok(Field::Rate),
            _ if name.starts_with("__") => Err(PyValueError::new_err(format!("cannot update reserved field {name:?}"))),
            _ if layout.controls.iter().any(|c| c == bare) => Ok(Field::Control(bare.to_string())),
            _ => {
                let report = name.strip_prefix("Report.").unwrap_or(name);
                let why = if layout.report_names.iter().any(|r| r == report) || name == "Micros" {
                    "only the datapath writes it".to_string()
                } else {
                    "no such field".to_string()
                };
                Err(PyValueError::new_err(format!(
                    "cannot update {name:?} of program {:?}: {why}; what can be updated: Cwnd, Rate{}",
                    layout.name,
                    layout.controls.iter().map(|c| format!(", Control.{c}")).collect::<String>()
                )))
            }
        }
    }

    /// Check every `(name, value)` first, then record them all (none if one is wrong). A
    /// window or rate is checked as the simple API's are ([`check_program_window`], [`check_rate`]), a
    /// register must be a non-negative number; a value refused is recorded as such.
    fn update(&mut self, fields: &[(String, Bound<'_, PyAny>)]) -> PyResult<()> {
        let mss = u64::from(self.info.mss_bytes);
        let mut checked = Vec::with_capacity(fields.len());
        for (name, value) in fields {
            let field = self.resolve(name)?;
            let value = match field {
                Field::Cwnd => self.refuse(number(value, name).map(|x| check_program_window(x, mss)))?,
                Field::Rate => self.refuse(number(value, name).map(|x| check_rate(x, mss)))?,
                Field::Control(_) => match amount(value, name) {
                    Err(e) if e.is_instance_of::<PyValueError>(value.py()) => self.refuse(Ok(Err(e.to_string())))?,
                    other => other?,
                },
            };
            checked.push((field, value));
        }
        for (field, value) in checked {
            match field {
                // check_window's bound is below 2**32.
                Field::Cwnd => self.pending.cwnd_bytes = Some(value as u32),
                Field::Rate => self.pending.rate_bytes_per_s = Some(value),
                Field::Control(name) => {
                    self.pending.controls.retain(|(n, _)| *n != name);
                    self.pending.controls.push((name, value));
                }
            }
        }
        Ok(())
    }

    /// A value the guard passed, or the ValueError for one it refused (recorded).
    fn refuse(&mut self, checked: PyResult<Result<u64, String>>) -> PyResult<u64> {
        checked?.map_err(|why| {
            self.refused.get_or_insert_with(|| why.clone());
            PyValueError::new_err(why)
        })
    }
}

/// `[(name, value), ...]` as pairs.
fn pairs<'py>(fields: &Bound<'py, PyAny>) -> PyResult<Vec<(String, Bound<'py, PyAny>)>> {
    fields
        .iter()?
        .map(|item| item?.extract::<(String, Bound<'py, PyAny>)>())
        .collect::<PyResult<_>>()
        .map_err(|_| PyTypeError::new_err("fields must be a list of (name, value) tuples"))
}

#[pymethods]
impl PyDatapath {
    /// Set `Cwnd` (bytes), `Rate` (bytes/s) or a control register of the flow's program.
    fn update_field(&mut self, name: String, value: Bound<'_, PyAny>) -> PyResult<()> {
        self.update(&[(name, value)])
    }

    /// Set several fields at once: `[(name, value), ...]`.
    fn update_fields(&mut self, fields: &Bound<'_, PyAny>) -> PyResult<()> {
        let fields = pairs(fields)?;
        self.update(&fields)
    }

    /// Switch the flow to the program `name` (its registers start afresh), then set `fields`.
    #[pyo3(signature = (name, fields=None))]
    fn set_program(&mut self, name: &str, fields: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let fields = fields.map(pairs).transpose()?.unwrap_or_default();
        let Some(index) = self.layouts.iter().position(|l| l.name == name) else {
            return Err(PyValueError::new_err(format!(
                "failed to set datapath program {name:?}: datapath_programs() has no such program (it has {})",
                self.layouts.iter().map(|l| format!("{:?}", l.name)).collect::<Vec<_>>().join(", ")
            )));
        };
        let before = (self.program, std::mem::take(&mut self.pending.controls));
        self.program = Some(index);
        if let Err(e) = self.update(&fields) {
            (self.program, self.pending.controls) = before;
            return Err(e);
        }
        self.pending.program_changed = true;
        Ok(())
    }

    /// pyportus before 0.4 installed program text per flow.
    #[pyo3(signature = (*_args, **_kwargs))]
    fn install(&self, _args: &Bound<'_, PyAny>, _kwargs: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        Err(RefusedByCcswitch::new_err(
            "datapath.install(program) is pyportus's API before 0.4, not offered by ccswitch: return the \
             programs from datapath_programs() and choose one with datapath.set_program(name, fields)",
        ))
    }

    /// The flow's program (None for a pyportus flow that has not chosen one).
    #[getter]
    fn program(&self) -> Option<String> {
        self.program.map(|p| self.layouts[p].name.clone())
    }

    #[getter]
    fn mss(&self) -> u32 {
        self.info.mss_bytes
    }

    #[getter]
    fn init_cwnd(&self) -> u32 {
        self.info.init_cwnd_bytes
    }

    #[getter]
    fn sock_id(&self) -> u32 {
        self.info.sid
    }

    /// What the datapath said of the flow (pyportus's `datapath_info`).
    #[getter]
    fn info(&self) -> PyDatapathInfo {
        PyDatapathInfo::from(self.info)
    }

    fn __repr__(&self) -> String {
        format!("Datapath(sock_id={}, program={:?})", self.info.sid, self.program())
    }
}

/// pyportus's `datapath_info`.
#[pyclass(name = "DatapathInfo", module = "portus", frozen)]
pub struct PyDatapathInfo {
    #[pyo3(get)]
    sock_id: u32,
    #[pyo3(get)]
    init_cwnd: u32,
    #[pyo3(get)]
    mss: u32,
    /// IPv4, network order as an integer (`portus.util.str_to_ip` makes it a string).
    #[pyo3(get)]
    src_ip: u32,
    #[pyo3(get)]
    src_port: u32,
    #[pyo3(get)]
    dst_ip: u32,
    #[pyo3(get)]
    dst_port: u32,
}

impl From<DatapathInfo> for PyDatapathInfo {
    fn from(i: DatapathInfo) -> Self {
        Self {
            sock_id: i.sid,
            init_cwnd: i.init_cwnd_bytes,
            mss: i.mss_bytes,
            src_ip: i.src_ip,
            src_port: i.src_port.into(),
            dst_ip: i.dst_ip,
            dst_port: i.dst_port.into(),
        }
    }
}

#[pymethods]
impl PyDatapathInfo {
    fn __repr__(&self) -> String {
        format!(
            "DatapathInfo(sock_id={}, init_cwnd={}, mss={}, src={}:{}, dst={}:{})",
            self.sock_id,
            self.init_cwnd,
            self.mss,
            std::net::Ipv4Addr::from(self.src_ip),
            self.src_port,
            std::net::Ipv4Addr::from(self.dst_ip),
            self.dst_port
        )
    }
}

/// One report: the program's `Report` fields as attributes (`r.acked`).
#[pyclass(name = "PyReport", module = "portus", frozen)]
pub struct PyReport {
    program: usize,
    layouts: Arc<[ProgramLayout]>,
    values: Vec<u64>,
}

impl PyReport {
    fn names(&self) -> &[String] {
        &self.layouts[self.program].report_names
    }
}

#[pymethods]
impl PyReport {
    /// A field first (an algorithm reads several per report; Python's own lookup would fail
    /// with an exception before `__getattr__` ran), then the object's own attributes.
    fn __getattribute__(slf: &Bound<'_, Self>, name: &Bound<'_, PyString>) -> PyResult<PyObject> {
        let py = slf.py();
        let this = slf.get();
        // Attribute names in code are interned, as are the fields' names: compare identities.
        let interned = &this.layouts[this.program].interned_report_names;
        if let Some(i) = interned.iter().position(|n| n.as_ptr() == name.as_ptr()) {
            return Ok(this.values.get(i).copied().unwrap_or(0).into_py(py));
        }
        // SAFETY: both pointers are valid, owned by their `Bound`s; the result is a new reference or null.
        unsafe {
            let attr = pyo3::ffi::PyObject_GenericGetAttr(slf.as_ptr(), name.as_ptr());
            Bound::from_owned_ptr_or_err(py, attr).map(Bound::unbind)
        }
    }

    /// What `__getattribute__` did not find (pyo3 calls this on its AttributeError): a field
    /// by a name that is not interned (e.g. built at run time), or why there is none.
    fn __getattr__(&self, name: &Bound<'_, PyString>) -> PyResult<u64> {
        self.field(&name.to_cow()?)
    }

    fn __dir__(&self) -> Vec<String> {
        self.names().to_vec()
    }

    fn __repr__(&self) -> String {
        let fields: Vec<String> =
            self.names().iter().zip(&self.values).map(|(n, v)| format!("{n}={v}")).collect();
        format!("Report({:?}: {})", self.layouts[self.program].name, fields.join(", "))
    }
}

impl PyReport {
    /// A field by name, or why there is none.
    fn field(&self, name: &str) -> PyResult<u64> {
        if let Some(i) = self.names().iter().position(|n| n == name) {
            return Ok(self.values.get(i).copied().unwrap_or(0));
        }
        let hint = match name {
            "Cwnd" | "Rate" => format!("; to see the datapath's {name}, report it: (:= Report.x {name})"),
            _ => String::new(),
        };
        Err(PyAttributeError::new_err(format!(
            "{name} is not a Report field of program {:?} (its fields: {}){hint}",
            self.layouts[self.program].name,
            self.names().join(", ")
        )))
    }
}

impl fmt::Display for LoadedPythonAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.spec)
    }
}

/// A Python algorithm with its own programs, for one flow. Its callbacks run on the Python
/// worker under the guard ([`FlowGuard::call`]); what they ask is collected in the flow's
/// [`PyDatapath`], handed back when the callback returns, and applied to the flow here, on
/// the agent's thread.
struct PythonProgramAlgorithm {
    loaded: Arc<LoadedPythonAlgorithm>,
    /// ccswitch's API: this flow's instance of the class.
    instance: Option<Arc<Py<PyAny>>>,
    /// Once the flow is created; none if creating it raised (its reports are then answered
    /// with nothing, the window kept).
    objects: Option<Arc<FlowObjects>>,
    /// Creating the flow is still to be done: it was skipped or abandoned (not raised), so
    /// the next report tries again.
    create_pending: bool,
    guard: FlowGuard,
}

/// What a flow's callbacks need on the worker.
struct FlowObjects {
    datapath: Py<PyDatapath>,
    /// The flow's bound `on_report`.
    on_report: Py<PyAny>,
}

/// What one callback asked, handed back from the worker.
struct Asked {
    pending: PendingDatapathChanges,
    /// The flow's program after the callback.
    program: usize,
}

impl PythonProgramAlgorithm {
    fn new(loaded: Arc<LoadedPythonAlgorithm>, instance: Option<Py<PyAny>>) -> Self {
        Self { loaded, instance: instance.map(Arc::new), objects: None, create_pending: true, guard: FlowGuard::default() }
    }

    /// Send what the callback asked: its program change first (which clears control registers
    /// set before it), then the window, rate and control registers.
    fn apply(&self, asked: Asked, flow: &mut dyn FlowControl) {
        let Asked { pending, program } = asked;
        if pending.program_changed {
            flow.change_program(&self.loaded.layouts[program].name);
        }
        if let Some(cwnd) = pending.cwnd_bytes {
            flow.set_cwnd(cwnd);
        }
        if let Some(rate) = pending.rate_bytes_per_s {
            flow.set_rate(rate);
        }
        for (name, value) in &pending.controls {
            flow.set_control(name, *value);
        }
    }

    /// The flow's program by the agent's account, which the Python side is synced to before
    /// each callback (an abandoned callback may have changed it there).
    fn current_program(&self, flow: &dyn FlowControl) -> usize {
        let name = flow.program();
        self.loaded.layouts.iter().position(|l| l.name == name).unwrap_or(0)
    }

    /// pyportus's `new_flow` or ccswitch's `on_create`, on the worker.
    fn create(&mut self, flow: &mut dyn FlowControl) {
        let (loaded, instance, info) = (Arc::clone(&self.loaded), self.instance.clone(), flow.info());
        let failed_before = self.guard.counts().errors + self.guard.counts().bad_values;
        let what = if loaded.api == Api::Pyportus { "new_flow" } else { "on_create" };
        let created = self.guard.call(&*self.loaded, what, move |py| {
            let datapath = PyDatapath {
                layouts: Arc::clone(&loaded.layouts),
                info,
                program: if loaded.api == Api::Pyportus { None } else { Some(0) },
                pending: PendingDatapathChanges::default(),
                refused: None,
            };
            let dp = match Py::new(py, datapath) {
                Ok(dp) => dp,
                Err(e) => return Called::Raised(describe(py, &e)),
            };
            let result = first_callback(py, &loaded, instance.as_deref(), &dp);
            let mut d = dp.borrow_mut(py);
            // A pyportus flow gets no reports until it chooses a program; the agent must run
            // one, so it runs the first (and fields can be updated from then on).
            if d.program.is_none() && result.is_ok() && !loaded.warned_no_program.swap(true, Ordering::Relaxed) {
                warn!(
                    "{loaded}: new_flow did not call datapath.set_program(...); its flows run the first program, {:?}",
                    loaded.layouts[0].name
                );
            }
            let asked = Asked { pending: std::mem::take(&mut d.pending), program: d.program.unwrap_or(0) };
            let refused = d.refused.take();
            drop(d);
            outcome(py, refused, result, |on_report| (FlowObjects { datapath: dp, on_report: on_report.unbind() }, asked))
        });
        match created {
            Some((objects, asked)) => {
                self.create_pending = false;
                self.objects = Some(Arc::new(objects));
                self.apply(asked, flow);
            }
            // Raised or refused: the flow keeps its window and gets no callbacks, as when
            // pyportus's new_flow raises. Skipped or abandoned: tried again at the next report.
            None => self.create_pending = self.guard.counts().errors + self.guard.counts().bad_values == failed_before,
        }
    }
}

/// Call the flow's first callback (pyportus: `new_flow`; ccswitch: `on_create`, if defined)
/// and return its `on_report`.
fn first_callback<'py>(
    py: Python<'py>,
    loaded: &LoadedPythonAlgorithm,
    instance: Option<&Py<PyAny>>,
    dp: &Py<PyDatapath>,
) -> PyResult<Bound<'py, PyAny>> {
    match loaded.api {
        Api::Pyportus => {
            let kwargs = PyDict::new_bound(py);
            kwargs.set_item(intern!(py, "datapath"), dp)?;
            kwargs.set_item(intern!(py, "datapath_info"), PyDatapathInfo::from(dp.borrow(py).info).into_py(py))?;
            let flow_obj = loaded.object.bind(py).call_method(intern!(py, "new_flow"), (), Some(&kwargs))?;
            flow_obj.getattr(intern!(py, "on_report")).ok().filter(|f| f.is_callable()).ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "new_flow() returned a {} without an on_report(self, r) method",
                    flow_obj.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ))
            })
        }
        Api::Ccswitch => {
            let instance = instance.expect("ccswitch's API has an instance per flow").bind(py);
            if let Ok(on_create) = instance.getattr(intern!(py, "on_create")) {
                on_create.call1((dp,))?;
            }
            instance.getattr(intern!(py, "on_report"))
        }
    }
}

impl ProgramAlgorithm for PythonProgramAlgorithm {
    fn name(&self) -> &str {
        &self.loaded.name
    }

    fn programs(&self) -> Vec<(String, String)> {
        self.loaded.programs.clone()
    }

    fn on_create(&mut self, flow: &mut dyn FlowControl) {
        self.create(flow);
    }

    fn on_report(&mut self, flow: &mut dyn FlowControl, report: &Report) {
        if self.create_pending {
            self.create(flow);
        }
        let Some(objects) = &self.objects else { return };
        let layouts = &self.loaded.layouts;
        let Some(program) = layouts.iter().position(|l| l.name == report.program) else { return };
        let r = PyReport { program, layouts: Arc::clone(layouts), values: report.values.to_vec() };
        let (objects, api, current) = (Arc::clone(objects), self.loaded.api, self.current_program(flow));
        let asked = self.guard.call(&*self.loaded, "on_report", move |py| {
            let dp = objects.datapath.bind(py);
            {
                // What an abandoned callback left is not the flow's: start from the agent's view.
                let mut d = dp.borrow_mut();
                d.program = Some(current);
                d.pending = PendingDatapathChanges::default();
                d.refused = None;
            }
            let callback = objects.on_report.bind(py);
            let result = match api {
                Api::Pyportus => callback.call1((r,)),
                Api::Ccswitch => callback.call1((dp, r)),
            };
            let mut d = dp.borrow_mut();
            let asked = Asked { pending: std::mem::take(&mut d.pending), program: d.program.unwrap_or(current) };
            outcome(py, d.refused.take(), result, |_| asked)
        });
        if let Some(asked) = asked {
            self.apply(asked, flow);
        }
    }
}
