"""pyportus algorithm files run unmodified (`kernel:pyportus:FILE.py:CLASS`,
`ovs:pyportus:FILE.py:CLASS`): three files in pyportus's shape (a constant window, AIMD, a
Reno-like algorithm with its own per-ACK program that changes program on congestion), copied
as they are next to the scenario, each drive a real transfer on both datapaths with the
file's SHA-256 intact; what ccswitch cannot honour stops the agent at start, naming it. The
mapping of the API itself is unit-tested in agent/src/pyportus/tests.rs. The live tests need
root, mahimahi, openvswitch-switch and the Rust binaries; they fail rather than skip without
them."""

import json
import os
import re
import shutil
import subprocess

import pytest

from ccswitch.analysis.plots import Series
from ccswitch.experiments import environment
from ccswitch.experiments.events import flow_of, read_events
from ccswitch.topology.bridges import OVS_BIN, normalize_stats
from ccswitch.topology.daemons import CcswitchDaemons, python_agent_env
from live import agents_log_debug
from test_ovs_integrity import set_up_ovs_runner

ALGORITHMS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pyportus_algorithms")
FILE_BYTES = 3_000_000
#: (file, class) of the three algorithms; each runs on both datapaths.
ALGORITHMS = [("const_cwnd.py", "ConstCwnd"), ("aimd.py", "AIMD"), ("reno_like.py", "RenoLike")]
DATAPATHS = ("kernel", "ovs")
SCHEMES = [f"{dp}:pyportus:{f}:{c}" for dp in DATAPATHS for f, c in ALGORITHMS]

# A queue of 40 packets on a path whose BDP is about 100: slow start overflows it, so the
# algorithms see losses.
SCENARIO = f"""
name = "pyportus-algorithms"
repetitions = 1
schemes = {SCHEMES!r}
bridge = "ovs"
timeout_s = 60
agent_settle_s = 0.5
[[clients]]
name = "rtt50"
delay_ms = 25
link = {{ mbps = 24 }}
queue_packets = 40
file_bytes = {FILE_BYTES}
"""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    missing = CcswitchDaemons.missing_binaries(environment.bin_dir(), ("ccswitch-agent", "ccswitch-kernel", OVS_BIN))
    if missing:
        pytest.fail(f"Rust binaries not built (cargo build --release --workspace): {missing}")
    d = tmp_path_factory.mktemp("pyportus")
    for f, _ in ALGORITHMS:  # unmodified, beside the scenario (its directory is on the agent's sys.path)
        shutil.copy(os.path.join(ALGORITHMS_DIR, f), d / f)
    with agents_log_debug(), set_up_ovs_runner(d, SCENARIO) as r:
        yield r


def transfer(r, label):
    """One transfer under `label`; returns its row, what the agent logged meanwhile and what
    the kernel shim logged (the same when the agent runs in the shim's process)."""
    scheme = next(s for s in r.sc.schemes if s.label == label)
    r.prepare_scheme(scheme)
    paths = [r.daemons.agent_log, os.path.join(r.log_dir, "kernel-shim.log")]
    starts = [os.path.getsize(p) if os.path.exists(p) else 0 for p in paths]
    row = r.transfer(0, r.sc.clients[0], scheme, FILE_BYTES)
    # The agent's events of the flow, sliced as a run slices them (row["events"]).
    t0, t1, events_path = r.last_transfer
    r.collector.attach(SCHEMES.index(label), row, events_path, t0, t1, row["client_addr"])
    logs = []
    for path, start in zip(paths, starts):
        with open(path, errors="replace") as f:
            f.seek(start)
            logs.append(f.read())
    return row, logs[0], logs[1]


@pytest.mark.parametrize("label", SCHEMES)
def test_an_unmodified_pyportus_file_drives_a_transfer(run, label):
    r = run
    datapath, _, target = label.partition(":")
    cls = target.rsplit(":", 1)[1]
    row, log, shim_log = transfer(r, label)
    assert row["error"] is None, row
    assert row["sha256_ok"], row
    if datapath == "kernel":
        assert row["cc_observed"] == r.daemons.cc_name, "the flow ran on the kernel datapath"
        assert "program left to the shim's interpreter" not in shim_log, "the program ran in BPF's interpreter"
    else:
        assert row["ovs_exit"] == 0, row
        with open(os.path.join(r.out_dir, row["ovs_stats"])) as f:
            stats = normalize_stats(json.load(f))["stats"]
        assert stats["acks_rewritten"] > 0, f"the port clamped the server's window: {stats}"
    created = re.findall(rf"flow created .*?sid=(\d+) algorithm=\"?{cls}\"? mss=(\d+)", log)
    assert created, f"no flow created under {cls}:\n{log[-3000:]}"
    mss = {int(m) for _, m in created}
    created = [sid for sid, _ in created]
    answers = re.findall(r"report answered sid=(\d+) .*?answer=(.*)", log)
    answers = [a for sid, a in answers if sid in created]
    assert len(answers) > 5, f"{cls} answered {len(answers)} reports\n{log[-3000:]}"
    assert "raised" not in log, log[-3000:]
    windows = [int(w) for a in answers for w in re.findall(r"reg_index: 4, value: (\d+)", a)]
    if cls == "ConstCwnd":
        assert set(windows) == {64 * m for m in mss}, f"every answer keeps the constant window: {set(windows)}"
    elif cls == "AIMD":
        assert len(set(windows)) > 3, f"AIMD moved its window: {windows}"
    else:
        changes = [a for a in answers if "ChangeProgram" in a and "congestion_avoidance" in a]
        assert changes, f"RenoLike changed program on congestion:\n{answers[:20]}"
    # The flow's reports are in the events file as a simple-API flow's are, so plot-flows
    # draws its window and throughput.
    assert row.get("events"), f"the transfer has no events: {row}"
    flow = flow_of(read_events(os.path.join(r.out_dir, row["events"])))
    series = Series.of(flow)
    assert len(series.t) > 5 and min(series.cwnd) > 0, f"{len(series.t)} report lines, windows {set(series.cwnd)}"
    assert sum(series.acked) >= FILE_BYTES // 2, f"the reports saw the file acknowledged: {sum(series.acked)}"
    if cls == "ConstCwnd":
        assert set(series.cwnd) == {64 * m for m in mss}, set(series.cwnd)
    elif cls == "AIMD":
        assert len(set(series.cwnd)) > 3, series.cwnd
        assert max(series.inflight) > 0, "packets in flight, reported in packets, shown in bytes"
    else:
        assert max(series.cwnd) > 10 * min(mss), "the window the datapath grew, as the program reports it"


def agent_binary():
    path = os.path.join(environment.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")
    return path


REFUSED_SOURCES = {
    "gca.py": "import portus\n\nclass Reno(portus.GenericCongAvoidBase):\n    pass\n\nportus.start('netlink', Reno)\n",
    "old_install.py": "import pyportus as portus\n\nclass Flow:\n    def __init__(self, datapath, datapath_info):\n"
                      "        self.datapath = datapath\n        self.datapath.install('(def (Report (acked 0)))')\n",
    "blocking.py": open(os.path.join(ALGORITHMS_DIR, "aimd.py")).read().replace(
        'portus.start("netlink", alg)', 'portus.start("netlink", alg, blocking=True)'),
    "broken_program.py": open(os.path.join(ALGORITHMS_DIR, "aimd.py")).read().replace(
        "(:= Report.timeout Flow.was_timeout)", "(:= Report.timeout Flow.was_timeout"),
}


@pytest.mark.parametrize("file, expected", [
    ("gca.py", r"portus\.GenericCongAvoidBase is not offered by ccswitch: the class-based generic-cong-avoid binding"),
    ("old_install.py", r"line 6: datapath\.install\(program\) is pyportus's API before 0\.4, not offered by ccswitch"),
    ("blocking.py", r"refused: portus\.start: blocking not offered by ccswitch"),
    ("broken_program.py", r"datapath program \"default\" does not compile"),
    ("no_such_file.py", r"no such file in the current directory or on sys\.path"),
])
def test_what_ccswitch_cannot_honour_stops_the_agent_at_start(tmp_path, file, expected):
    for name, source in REFUSED_SOURCES.items():
        (tmp_path / name).write_text(source)
    env = python_agent_env(dict(os.environ), [str(tmp_path)])
    sock = tmp_path / "agent.sock"
    algorithm = f"pyportus:{file}"
    cp = subprocess.run([agent_binary(), "--socket", str(sock), "--algorithm", algorithm],
                        capture_output=True, text=True, env=env, timeout=30, cwd="/")
    assert cp.returncode != 0 and not sock.exists(), "the agent must not start serving"
    assert f"--algorithm {algorithm}: " in cp.stderr, cp.stderr
    assert re.search(expected, cp.stderr, re.S), cp.stderr


def test_the_scenario_check_accepts_the_files_from_the_scenarios_directory(tmp_path):
    """`ccswitch run` asks the agent about every scheme first: relative FILEs resolve from the
    scenario's directory (on the agent's sys.path), whatever the current directory."""
    from ccswitch.experiments import scenario as scenario_mod
    for f, _ in ALGORITHMS:
        shutil.copy(os.path.join(ALGORITHMS_DIR, f), tmp_path / f)
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    sc = scenario_mod.load_scenario(str(path))
    environment.check_agent_schemes(sc)
    (tmp_path / "aimd.py").write_text("import portus\nportus.connect('unix', object)\n")
    with pytest.raises(scenario_mod.ScenarioError, match=r"portus\.connect is not offered by ccswitch"):
        environment.check_agent_schemes(sc)


def test_bench_authoring_runs_the_full_api_pair_alike():
    """`ccswitch bench authoring`: the Python full-API Reno and the Rust reno-datapath end on
    the same window after the same synthetic reports (the figures are printed, not asserted)."""
    from ccswitch.experiments import bench
    x = bench.authoring(reports=2000, rounds=1)
    full = x["full_api"]
    assert (full["rust"], full["python"]) == (bench.AUTHORING_FULL_RUST, bench.AUTHORING_FULL_PYTHON)
    assert full["same_final_window"], full["final_cwnd_bytes"]
    assert full["rust_us_per_report"] > 0 and full["python_us_per_report"] > 0
    assert x["same_final_window"], x["final_cwnd_bytes"]
