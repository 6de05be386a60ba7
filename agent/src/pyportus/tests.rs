//! The mapping of pyportus's and ccswitch's full Python API onto the agent's flows, through
//! [`FlowController`] as the agent drives it: what each callback's calls become on the wire.

use std::path::{Path, PathBuf};

use ccswitch_algorithms::DatapathInfo;
use ccswitch_protocol::lang::{reg_type, Implicit};
use pyo3::prelude::*;

use crate::flow::{instantiate, Answer, FlowController, ProgramCache};
use crate::program::{CompiledProgram, SimpleProgram};
use crate::python_guard::tests::python_tests_one_at_a_time;
use crate::python_guard::{take_counts, PythonCounts};

fn take_errors() -> u64 {
    take_counts().errors
}

const MSS: u32 = 1448;

fn info() -> DatapathInfo {
    DatapathInfo {
        sid: 7,
        mss_bytes: MSS,
        init_cwnd_bytes: 10 * MSS,
        src_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 0, 1)),
        src_port: 8765,
        dst_ip: u32::from(std::net::Ipv4Addr::new(10, 0, 1, 2)),
        dst_port: 40000,
    }
}

/// The three pyportus-style files the live tests run.
fn algorithms_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/python/pyportus_algorithms").canonicalize().unwrap()
}

/// The repository's `python/` on sys.path (for ccswitch's own API and its example).
fn add_repo_python() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../python").canonicalize().unwrap();
    Python::with_gil(|py| {
        let path = py.import_bound("sys").unwrap().getattr("path").unwrap();
        let dir = dir.display().to_string();
        if !path.contains(&dir).unwrap() {
            path.call_method1("insert", (0, dir)).unwrap();
        }
    });
}

/// A pyportus file written for one test (each test its own name: files load once per process).
fn write_file(name: &str, source: &str) -> String {
    let path = crate::test_files::dir("pyportus").join(format!("{name}.py"));
    std::fs::write(&path, source).unwrap();
    path.display().to_string()
}

/// A probe file (`write_file`): [`PROBE_PROGRAMS`], then `flow` (a `Flow` class and what it
/// needs), then the algorithm `class` over the programs "first" and "second", whose flows are
/// `Flow`s, started as upstream's files start theirs.
fn probe_file(name: &str, class: &str, flow: &str) -> String {
    write_file(
        name,
        &format!(
            r#"{PROBE_PROGRAMS}{flow}
class {class}(portus.AlgBase):
    def datapath_programs(self):
        return {{"first": PROGRAM, "second": SECOND}}
    def new_flow(self, datapath, datapath_info):
        return Flow(datapath, datapath_info)

portus.start("unix", {class}())
"#
        ),
    )
}

struct PyportusFixture {
    simple: SimpleProgram,
    cache: ProgramCache,
}

/// An answer as (the program it changes to, if any; `[(register, value)]`), registers named
/// as the algorithm names them.
type Named = (Option<String>, Vec<(String, u64)>);

impl PyportusFixture {
    /// Holds the lock of tests that run Python for as long as the fixture lives.
    fn new() -> (Self, std::sync::MutexGuard<'static, ()>) {
        let one_at_a_time = python_tests_one_at_a_time();
        (Self { simple: SimpleProgram::compile().unwrap(), cache: ProgramCache::default() }, one_at_a_time)
    }

    fn flow(&self, spec: &str) -> (FlowController, Named) {
        let instance = instantiate(spec).unwrap_or_else(|e| panic!("{spec}: {e:#}"));
        let (flow, answer) = FlowController::new(instance, info(), &self.simple, &self.cache).unwrap();
        let named = self.named(&flow, &answer);
        (flow, named)
    }

    /// Report `fields` by name to the flow's program (unnamed fields 0).
    fn report(&self, flow: &mut FlowController, fields: &[(&str, u64)]) -> Named {
        let program = self.program_of(flow);
        let values: Vec<u64> = program
            .report_names
            .iter()
            .map(|n| fields.iter().find(|(f, _)| f == n).map_or(0, |(_, v)| *v))
            .collect();
        for (f, _) in fields {
            assert!(program.report_names.iter().any(|n| n == f), "{} has no field {f}", program.name);
        }
        let answer = flow.on_report(&values, &self.simple).unwrap().answer;
        self.named(flow, &answer)
    }

    fn program_of(&self, flow: &FlowController) -> std::sync::Arc<CompiledProgram> {
        let uid = flow.program_uid(&self.simple);
        self.cache.by_uid(uid).expect("the flow's program is compiled")
    }

    fn named(&self, flow: &FlowController, answer: &Answer) -> Named {
        let program = self.program_of(flow);
        let (changed, updates) = match answer {
            Answer::ChangeProgram { program, updates } => (Some(program.name.clone()), updates),
            Answer::Update(updates) => (None, updates),
        };
        let names = updates
            .iter()
            .map(|u| {
                let name = if u.reg_type == reg_type::IMPLICIT && u.reg_index == Implicit::Cwnd as u32 {
                    "Cwnd".to_string()
                } else if u.reg_type == reg_type::IMPLICIT && u.reg_index == Implicit::Rate as u32 {
                    "Rate".to_string()
                } else {
                    program
                        .control_names()
                        .find(|c| {
                            program.control_field(c, 0).is_ok_and(|f| (f.reg_type, f.reg_index) == (u.reg_type, u.reg_index))
                        })
                        .unwrap_or("?")
                        .to_string()
                };
                (name, u.value)
            })
            .collect();
        (changed, names)
    }
}

fn fields(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

fn load_error(spec: &str) -> String {
    match instantiate(spec) {
        Ok(_) => panic!("{spec} loaded"),
        Err(e) => format!("{e:#}"),
    }
}

#[test]
fn a_constant_window_file_sets_its_program_and_window_and_keeps_it() {
    let (fx, _one) = PyportusFixture::new();
    let spec = format!("pyportus:{}/const_cwnd.py:ConstCwnd", algorithms_dir().display());
    let (mut flow, created) = fx.flow(&spec);
    assert_eq!(flow.name(), "ConstCwnd");
    assert_eq!(created, (Some("per_rtt".into()), fields(&[("Cwnd", 64 * u64::from(MSS))])));
    let answer = fx.report(&mut flow, &[("acked", 20_000), ("rtt", 50_000)]);
    assert_eq!(answer, (None, fields(&[("Cwnd", 64 * u64::from(MSS))])));
}

#[test]
fn the_aimd_file_halves_on_loss_and_grows_one_mss_per_window() {
    let (fx, _one) = PyportusFixture::new();
    // Without CLASS: the algorithm the file started.
    let spec = format!("pyportus:{}/aimd.py", algorithms_dir().display());
    let (mut flow, created) = fx.flow(&spec);
    let init = 10 * u64::from(MSS);
    assert_eq!(created, (Some("default".into()), fields(&[("Cwnd", init)])));
    let (_, grown) = fx.report(&mut flow, &[("acked", init)]);
    assert_eq!(grown, fields(&[("Cwnd", init + u64::from(MSS))]), "one MSS for a window acknowledged");
    let (_, grown) = fx.report(&mut flow, &[("acked", 4 * init)]);
    let cwnd = grown[0].1;
    assert!(cwnd > init + 4 * u64::from(MSS), "{cwnd}");
    let (_, halved) = fx.report(&mut flow, &[("loss", 1)]);
    assert_eq!(halved, fields(&[("Cwnd", (cwnd / 2).max(init))]));
}

#[test]
fn the_reno_like_file_changes_program_on_its_first_loss_and_restarts_slow_start_on_a_timeout() {
    let (fx, _one) = PyportusFixture::new();
    let spec = format!("pyportus:{}/reno_like.py:RenoLike", algorithms_dir().display());
    let (mut flow, created) = fx.flow(&spec);
    let mss = u64::from(MSS);
    assert_eq!(created, (Some("slow_start".into()), fields(&[("Cwnd", 10 * mss), ("mss", mss)])));
    // The datapath grows the window; a report without congestion changes nothing.
    assert_eq!(fx.report(&mut flow, &[("acked", 10 * mss), ("cwnd", 20 * mss)]), (None, vec![]));
    let cut = fx.report(&mut flow, &[("loss", 1), ("cwnd", 40 * mss), ("inflight", 40 * mss)]);
    // Halved, and no growth until what was in flight at the loss is acknowledged.
    let expected = fields(&[("Cwnd", 20 * mss), ("ssthresh", 20 * mss), ("mss", mss), ("hold", 40 * mss)]);
    assert_eq!(cut, (Some("congestion_avoidance".into()), expected));
    // A second loss of the same window is the same event.
    assert_eq!(fx.report(&mut flow, &[("loss", 2), ("acked", mss), ("cwnd", 20 * mss)]), (None, vec![]));
    let restart = fx.report(&mut flow, &[("timeout", 1), ("cwnd", 30 * mss)]);
    let expected = fields(&[("Cwnd", 2 * mss), ("ssthresh", 15 * mss), ("mss", mss)]);
    assert_eq!(restart, (Some("slow_start".into()), expected));
}

const PROBE_PROGRAMS: &str = r#"
import portus, pyportus, sys

PROGRAM = """
    (def (Report (volatile acked 0) (volatile rtt 0)) (Control.gain 1) (Control.other 0))
    (when true
        (:= Report.acked (+ Report.acked Ack.bytes_acked))
        (:= Report.rtt Flow.rtt_sample_us)
        (fallthrough))
    (when (> Micros Flow.rtt_sample_us)
        (report)
        (:= Micros 0))
"""
SECOND = PROGRAM.replace("(Control.other 0)", "(Control.second 0)")
seen = []
"#;

#[test]
fn datapath_calls_map_to_one_answer_and_wrong_ones_raise_where_they_are_made() {
    let (fx, _one) = PyportusFixture::new();
    let path = probe_file(
        "probe_mapping",
        "Probe",
        r#"
class Flow:
    def __init__(self, datapath, datapath_info):
        self.dp = datapath
        seen.append(("same module", portus is pyportus, isinstance(datapath_info, portus.DatapathInfo)))
        seen.append(("info", datapath_info.sock_id, datapath_info.mss, datapath_info.init_cwnd,
                     portus.util.str_to_ip(datapath_info.src_ip), datapath_info.src_port,
                     portus.util.str_to_ip(datapath_info.dst_ip), datapath_info.dst_port))
        for call in (lambda: datapath.update_field("Cwnd", 1), ):
            try:
                call()
            except ValueError as e:
                seen.append(("before set_program", str(e)))
        datapath.set_program("first", [("Cwnd", 20000), ("Control.gain", 3)])

    def on_report(self, r):
        seen.append(("report", r.acked, r.rtt, repr(r)))
        seen.append(("a name built at run time", getattr(r, "".join(["ac", "ked"]))))
        for bad in ("Cwnd", "nonesuch"):
            try:
                getattr(r, bad)
            except AttributeError as e:
                seen.append(("no field", str(e)))
        for name, value in (("nonesuch", 1), ("Report.acked", 1), ("Cwnd", "wide"), ("__x", 1)):
            try:
                self.dp.update_field(name, value)
            except (ValueError, TypeError) as e:
                seen.append(("refused", name, str(e)))
        try:
            self.dp.update_fields([("Cwnd", 5000), ("nonesuch", 1)])
        except ValueError:
            seen.append(("update_fields is all or nothing", ))
        try:
            self.dp.set_program("nonesuch")
        except ValueError as e:
            seen.append(("no program", str(e)))
        self.dp.update_field("Control.gain", 5)
        self.dp.update_fields([("Rate", 1.5e6), ("other", 9), ("Cwnd", 30000)])
        if r.acked > 1000:
            self.dp.set_program("second", [("second", 4)])
"#,
    );
    let (mut flow, created) = fx.flow(&format!("pyportus:{path}"));
    assert_eq!(created, (Some("first".into()), fields(&[("Cwnd", 20000), ("gain", 3)])));
    let answer = fx.report(&mut flow, &[("acked", 1000), ("rtt", 40_000)]);
    assert_eq!(answer, (None, fields(&[("Cwnd", 30000), ("Rate", 1_500_000), ("gain", 5), ("other", 9)])));
    // A program change drops the control registers set before it (they were the old program's).
    let answer = fx.report(&mut flow, &[("acked", 2000)]);
    assert_eq!(answer, (Some("second".into()), fields(&[("Cwnd", 30000), ("Rate", 1_500_000), ("second", 4)])));
    Python::with_gil(|py| {
        let seen: Vec<String> = py
            .import_bound("pyportus_algorithm_probe_mapping")
            .unwrap()
            .getattr("seen")
            .unwrap()
            .extract::<Vec<Bound<'_, PyAny>>>()
            .unwrap()
            .iter()
            .map(|x| x.str().unwrap().to_string())
            .collect();
        let all = seen.join("\n");
        let expect = [
            "('same module', True, True)",
            "('info', 7, 1448, 14480, '10.0.0.1', 8765, '10.0.1.2', 40000)",
            "('before set_program', 'cannot update Cwnd: no datapath program installed yet",
            "('report', 1000, 40000, 'Report(\"first\": acked=1000, rtt=40000)')",
            "('a name built at run time', 1000)",
            "Cwnd is not a Report field of program \"first\" (its fields: acked, rtt); to see the datapath",
            "nonesuch is not a Report field of program \"first\"",
            "('refused', 'nonesuch', 'cannot update \"nonesuch\" of program \"first\": no such field; what can be updated: Cwnd, Rate, Control.gain, Control.other')",
            "('refused', 'Report.acked', 'cannot update \"Report.acked\" of program \"first\": only the datapath writes it",
            "('refused', 'Cwnd', 'Cwnd: expected a number, got str')",
            "('refused', '__x', 'cannot update reserved field \"__x\"')",
            "('update_fields is all or nothing',)",
            "('no program', 'failed to set datapath program \"nonesuch\": datapath_programs() has no such program (it has \"first\", \"second\")')",
        ];
        for e in expect {
            assert!(all.contains(e), "missing {e}\nin\n{all}");
        }
    });
}

#[test]
fn a_raising_callback_is_counted_and_what_it_set_is_dropped() {
    let (fx, _one) = PyportusFixture::new();
    let path = probe_file(
        "probe_raises",
        "Raises",
        r#"
class Flow:
    def __init__(self, datapath, datapath_info):
        self.dp = datapath
        self.reports = 0
        datapath.set_program("first", [("Cwnd", 20000)])
    def on_report(self, r):
        self.reports += 1
        self.dp.set_program("second", [("Cwnd", 4000)])
        if self.reports % 2:
            raise RuntimeError("deliberately broken")
        self.dp.update_field("Cwnd", 25000)
"#,
    );
    let (mut flow, _) = fx.flow(&format!("pyportus:{path}:Raises"));
    take_errors();
    assert_eq!(fx.report(&mut flow, &[("acked", 1)]), (None, vec![]), "dropped, program change too");
    assert_eq!(take_errors(), 1);
    let answer = fx.report(&mut flow, &[("acked", 1)]);
    assert_eq!(answer, (Some("second".into()), fields(&[("Cwnd", 25000)])));
    assert_eq!(take_errors(), 0);
}

#[test]
fn a_flow_whose_new_flow_chose_no_program_runs_the_first_and_a_failed_new_flow_keeps_the_window() {
    let (fx, _one) = PyportusFixture::new();
    let path = write_file(
        "probe_no_program",
        &format!(
            "{PROBE_PROGRAMS}{}",
            r#"
class Flow:
    def __init__(self, datapath, datapath_info):
        self.dp = datapath
    def on_report(self, r):
        self.dp.update_field("Cwnd", 12345)

class NoProgram(portus.AlgBase):
    def datapath_programs(self):
        return {"first": PROGRAM}
    def new_flow(self, datapath, datapath_info):
        return Flow(datapath, datapath_info)

class FailingNewFlow(NoProgram):
    def new_flow(self, datapath, datapath_info):
        raise ValueError("no flows today")
"#
        ),
    );
    let (mut flow, created) = fx.flow(&format!("pyportus:{path}:NoProgram"));
    assert_eq!(created, (Some("first".into()), vec![]));
    assert_eq!(fx.report(&mut flow, &[("acked", 1)]), (None, fields(&[("Cwnd", 12345)])));
    take_errors();
    let (mut flow, created) = fx.flow(&format!("pyportus:{path}:FailingNewFlow"));
    assert_eq!(take_errors(), 1, "new_flow's exception is counted");
    assert_eq!(created, (Some("first".into()), vec![]));
    assert_eq!(fx.report(&mut flow, &[("acked", 1)]), (None, vec![]), "answered, the window kept");
}

#[test]
fn what_ccswitch_cannot_honour_is_refused_at_load_by_name() {
    let _one = python_tests_one_at_a_time();
    let program = r#"
PROGRAM = """(def (Report (volatile acked 0)))
    (when true (:= Report.acked (+ Report.acked Ack.bytes_acked)) (report))"""
"#;
    let alg = |body: &str| format!("import pyportus as portus\n{program}\n{body}");
    let algbase = "class A(portus.AlgBase):\n    def datapath_programs(self):\n        return {'p': PROGRAM}\n    def new_flow(self, datapath, datapath_info):\n        return None\n";
    let cases: Vec<(&str, String, &str)> = vec![
        ("refuse_gca", alg("class Reno(portus.GenericCongAvoidBase):\n    pass\n"),
         "portus.GenericCongAvoidBase is not offered by ccswitch: the class-based generic-cong-avoid binding"),
        ("refuse_connect", alg(&format!("{algbase}portus.connect('netlink', A)\n")), "portus.connect is not offered by ccswitch"),
        ("refuse_class", alg(&format!("{algbase}portus.start('unix', A)\n")),
         "refused: portus.start(ipc, A): a class is pyportus's API before 0.5"),
        ("refuse_option", alg(&format!("{algbase}portus.start('unix', A(), blocking=True)\n")),
         "refused: portus.start: blocking not offered by ccswitch"),
        ("refuse_ipc", alg(&format!("{algbase}portus.start('tcp', A())\n")), "ipc must be one of (netlink|unix|char): 'tcp'"),
        ("refuse_install", alg("class F:\n    def __init__(self, datapath, datapath_info):\n        self.datapath = datapath\n        self.datapath.install(PROGRAM)\n"),
         "datapath.install(program) is pyportus's API before 0.4, not offered by ccswitch"),
        ("refuse_no_start", alg(algbase), "started no algorithm with portus.start(...); name the class: pyportus:"),
        ("refuse_two", alg(&format!("{algbase}portus.start('unix', A())\nportus.start('unix', A())\n")), "started 2 algorithms (A, A)"),
        ("refuse_not_algbase", alg("class B:\n    pass\nportus.start('unix', B())\n"), "B must be a subclass of portus.AlgBase"),
        ("refuse_signature", alg("class C(portus.AlgBase):\n    def datapath_programs(self):\n        return {}\n    def new_flow(self, dp):\n        pass\nportus.start('unix', C())\n"),
         "C.new_flow does not match the required parameters (self, datapath, datapath_info)"),
        ("refuse_empty", alg("class D(portus.AlgBase):\n    def datapath_programs(self):\n        return {}\n    def new_flow(self, datapath, datapath_info):\n        pass\nportus.start('unix', D())\n"),
         "D.datapath_programs() must return at least one program"),
        ("refuse_compile", alg("class E(portus.AlgBase):\n    def datapath_programs(self):\n        return {'broken': '(def (Report (acked 0))) (when true (:= Report.acked (+ 1)'}\n    def new_flow(self, datapath, datapath_info):\n        pass\nportus.start('unix', E())\n"),
         "datapath program \"broken\" does not compile"),
        ("refuse_unknown", alg("x = portus.Nonesuch\n"), "portus.Nonesuch is not offered by ccswitch's pyportus compatibility (it offers AlgBase, start"),
    ];
    for (name, source, expected) in cases {
        let path = write_file(name, &source);
        let e = load_error(&format!("pyportus:{path}"));
        assert!(e.contains(expected), "{name}: {e}");
        assert!(e.starts_with(&format!("pyportus:{path}")), "{name} names the file: {e}");
    }
    let e = load_error("pyportus:no_such_algorithm_file.py");
    assert!(e.contains("pyportus:no_such_algorithm_file.py: no such file in the current directory or on sys.path"), "{e}");
    let e = load_error(&format!("pyportus:{}/aimd.py:Nonesuch", algorithms_dir().display()));
    assert!(e.contains("cannot find class Nonesuch in"), "{e}");
    assert!(load_error("pyportus:aimd").contains("expected pyportus:FILE.py or pyportus:FILE.py:CLASS"));
    // try_compile is the agent's compiler.
    Python::with_gil(|py| {
        let portus = super::portus_module(py).unwrap();
        let ok: String = portus.call_method1("try_compile", ("(def (Report (a 0))) (when true (report))",)).unwrap().extract().unwrap();
        assert_eq!(ok, "");
        let bad: String = portus.call_method1("try_compile", ("(def (Report (a 0))) (when true (:= Report.a (+ 1)",)).unwrap().extract().unwrap();
        assert!(!bad.is_empty());
    });
}

#[test]
fn the_full_api_example_answers_every_report_as_the_rust_reno_datapath() {
    add_repo_python();
    let (fx, _one) = PyportusFixture::new();
    let (mut py, py_created) = fx.flow("py:ccswitch.authoring.examples.reno_datapath:RenoDatapath");
    let (mut rust, rust_created) = fx.flow("reno-datapath");
    assert_eq!(py.name(), "RenoDatapath");
    assert_eq!(py_created, rust_created);
    let mss = u64::from(MSS);
    let mut rng = ccswitch_algorithms::xorshift::XorShift64::new(0x2545_f491_4f6c_dd1d);
    let mut next = |n: u64| rng.below(n);
    let mut cwnd = 10 * mss;
    let mut answers_with_updates = 0;
    for i in 0..3000u64 {
        let acked = next(cwnd / mss + 1) * mss;
        let (lost, timeout) = match next(100) {
            0..=2 => (1 + next(3), 0),
            3 if next(10) == 0 => (0, 1),
            _ => (0, 0),
        };
        cwnd += acked * mss / cwnd.max(1);
        let report = [("acked", acked), ("lost", lost), ("timeout", timeout), ("rtt", 50_000), ("inflight", cwnd),
                      ("now", i * 50_000), ("cwnd", cwnd)];
        let (p, r) = (fx.report(&mut py, &report), fx.report(&mut rust, &report));
        assert_eq!(p, r, "report {i}: {report:?}");
        if let Some((_, c)) = r.1.iter().find(|(n, _)| n == "Cwnd") {
            cwnd = *c;
        }
        answers_with_updates += usize::from(!r.1.is_empty());
    }
    assert!(answers_with_updates > 50, "the losses were answered: {answers_with_updates}");
}

#[test]
fn a_full_api_class_without_on_report_is_refused() {
    let _one = python_tests_one_at_a_time();
    let path = write_file(
        "full_api_broken",
        "class NoReport:\n    def datapath_programs(self):\n        return {'p': '(def (Report (a 0))) (when true (report))'}\n",
    );
    let dir = Path::new(&path).parent().unwrap().display().to_string();
    Python::with_gil(|py| {
        let sys_path = py.import_bound("sys").unwrap().getattr("path").unwrap();
        if !sys_path.contains(&dir).unwrap() {
            sys_path.call_method1("insert", (0, &dir)).unwrap();
        }
    });
    let e = load_error("py:full_api_broken:NoReport");
    assert!(e.contains("full_api_broken:NoReport has no on_report(self, flow, report) method"), "{e}");
}

/// Run `code` in the embedded interpreter (to steer a test's algorithm between reports).
fn run_python(code: &str) {
    Python::with_gil(|py| py.run_bound(code, None, None).unwrap());
}

fn counted(errors: u64, timeouts: u64, skipped: u64, bad_values: u64) -> PythonCounts {
    PythonCounts { errors, timeouts, skipped, bad_values }
}

#[test]
fn a_window_rate_or_register_the_guard_refuses_is_counted_and_the_flow_keeps_its_window() {
    let (fx, _one) = PyportusFixture::new();
    let path = probe_file(
        "probe_bad_values",
        "Bad",
        r#"
import math
how = None
value = None
catch = False
class Flow:
    def __init__(self, datapath, datapath_info):
        self.dp = datapath
        datapath.set_program("first", [("Cwnd", 20000)])
    def on_report(self, r):
        self.dp.set_program("second", [("second", 1)])    # discarded with the rest
        try:
            how(self.dp, value)
        except ValueError:
            if not catch:
                raise
"#,
    );
    let module = "pyportus_algorithm_probe_bad_values";
    let (mut flow, _) = fx.flow(&format!("pyportus:{path}"));
    let hows = [
        ("update_field Cwnd", "lambda dp, v: dp.update_field('Cwnd', v)"),
        ("update_fields Cwnd", "lambda dp, v: dp.update_fields([('Rate', 10**6), ('Cwnd', v)])"),
        ("set_program Cwnd", "lambda dp, v: dp.set_program('first', [('Cwnd', v)])"),
    ];
    let windows = ["-5", "0", "1447", "math.nan", "math.inf", "-math.inf", "2**31", "10**400"];
    let rates = ["0", "-1.5", "math.nan", "10**13"];
    let mut cases: Vec<(String, &str, &str)> = Vec::new();
    for (what, how) in hows {
        cases.extend(windows.iter().map(|v| (what.to_string(), how, *v)));
    }
    cases.extend(rates.iter().map(|v| ("update_field Rate".to_string(), "lambda dp, v: dp.update_field('Rate', v)", *v)));
    for v in ["-1", "math.nan"] {
        cases.push(("a control register".to_string(), "lambda dp, v: dp.update_field('Control.gain', v)", v));
    }
    for (what, how, value) in &cases {
        for catch in ["False", "True"] {
            run_python(&format!("import {module} as m, math\nm.how = {how}\nm.value = {value}\nm.catch = {catch}"));
            take_counts();
            let answer = fx.report(&mut flow, &[("acked", 1)]);
            assert_eq!(answer, (None, vec![]), "{what} = {value} (caught: {catch}): nothing sent, the window kept");
            assert_eq!(take_counts(), counted(0, 0, 0, 1), "{what} = {value} (caught: {catch})");
            assert_eq!(fx.program_of(&flow).name, "first", "{what} = {value}: the program change is dropped too");
        }
    }
    // In bounds: applied (and the program change with it).
    run_python(&format!("import {module} as m\nm.how = lambda dp, v: dp.update_field('Cwnd', v)\nm.value = 2 * 1448\nm.catch = False"));
    let answer = fx.report(&mut flow, &[("acked", 1)]);
    assert_eq!(answer, (Some("second".into()), fields(&[("Cwnd", 2 * u64::from(MSS)), ("second", 1)])));
    assert!(take_counts().is_zero());
}

#[test]
fn a_callback_stuck_in_a_loop_is_abandoned_counted_and_the_flow_keeps_its_window_and_program() {
    let (fx, _one) = PyportusFixture::new();
    let path = probe_file(
        "probe_stuck",
        "Stuck",
        r#"
stuck = True
programs_seen = []
class Flow:
    def __init__(self, datapath, datapath_info):
        self.dp = datapath
        datapath.set_program("first", [("Cwnd", 20000)])
    def on_report(self, r):
        programs_seen.append(self.dp.program)
        self.dp.set_program("second", [("Cwnd", 5000)])
        while stuck:
            pass
        self.dp.update_field("Cwnd", 30000)
"#,
    );
    let (mut flow, created) = fx.flow(&format!("pyportus:{path}"));
    assert_eq!(created, (Some("first".into()), fields(&[("Cwnd", 20000)])));
    let saved = crate::python_guard::budget();
    crate::python_guard::set_budget(std::time::Duration::from_millis(10));
    take_counts();
    let started = std::time::Instant::now();
    let answer = fx.report(&mut flow, &[("acked", 1)]);
    let waited = started.elapsed();
    assert_eq!(answer, (None, vec![]), "abandoned: nothing sent, the window and program kept");
    assert_eq!(take_counts(), counted(0, 1, 0, 0));
    // Suspended: answered at once without Python.
    for _ in 0..20 {
        assert_eq!(fx.report(&mut flow, &[("acked", 1)]), (None, vec![]));
    }
    assert_eq!(take_counts(), counted(0, 0, 20, 0));
    // Fixed and past its suspension, the flow is served again, from the program the agent
    // runs (the abandoned call's set_program never reached the flow).
    run_python("import pyportus_algorithm_probe_stuck as m\nm.stuck = False");
    std::thread::sleep(crate::python_guard::FIRST_SUSPENSION);
    let answer = fx.report(&mut flow, &[("acked", 1)]);
    crate::python_guard::set_budget(saved);
    assert_eq!(answer, (Some("second".into()), fields(&[("Cwnd", 30000)])));
    assert!(take_counts().is_zero());
    Python::with_gil(|py| {
        let seen: Vec<String> =
            py.import_bound("pyportus_algorithm_probe_stuck").unwrap().getattr("programs_seen").unwrap().extract().unwrap();
        assert_eq!(seen, ["first", "first"]);
    });
    assert!(waited >= std::time::Duration::from_millis(10) && waited < std::time::Duration::from_secs(1), "{waited:?}");
}

#[test]
fn a_file_whose_import_never_returns_fails_to_load_and_leaves_the_interpreter_usable() {
    let _one = python_tests_one_at_a_time();
    let path = write_file("probe_import_loops", "import portus\nwhile True:\n    pass\n");
    let e = load_error(&format!("pyportus:{path}"));
    assert!(e.contains("still loading (import and constructor) after 0.5 s"), "{e}");
    let spec = format!("pyportus:{}/const_cwnd.py:ConstCwnd", algorithms_dir().display());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while let Err(e) = instantiate(&spec) {
        assert!(format!("{e:#}").contains("still busy"), "{e:#}");
        assert!(std::time::Instant::now() < deadline, "{e:#}");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
