"""A tiny sweep end to end (root, mahimahi, nginx, the Rust binaries): 2 paths x 2 candidates,
interrupted by SIGTERM after its first cells, then resumed: nothing that finished runs again."""

import gzip
import json
import os
import signal
import subprocess
import sys
import time


from ccswitch.experiments import sweep_paths, sweep_spec
from live import require_machine_and_binaries
from test_integration import PYTHONPATH

SPEC = """
name = "live"
seed = 11
paths = 2
timeout_s = 30
agent_settle_s = 0.3
candidates = ["bbr", "cubic"]
initial = "bbr"
[window]
kind = "first"
samples = 20
min_samples = 8
[sizes]
fixed = [300_000]
[[mix]]
name = "lan"
weight = 1
kind = "constant"
rtt_ms = { dist = "uniform", min = 10, max = 30 }
mbps = { dist = "uniform", min = 20, max = 40 }
queue_bdp = 1
"""


def start_sweep(spec, store, raw):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "ccswitch", "sweep", str(spec), "--store", str(store), "--raw",
                             str(raw)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True)


def cell_files(store):
    return sorted((store / "cells").rglob("*.json.gz")) if (store / "cells").exists() else []


def netns_names():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def test_a_tiny_sweep_interrupted_after_its_first_cells_resumes_without_rerunning_them(tmp_path):
    require_machine_and_binaries()
    spec_file = tmp_path / "live.toml"
    spec_file.write_text(SPEC)
    store, raw = tmp_path / "store", tmp_path / "raw"
    proc = start_sweep(spec_file, store, raw)
    try:
        deadline = time.monotonic() + 40
        while len(cell_files(store)) < 1 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"the sweep ended before it could be interrupted: {proc.communicate()[1][-2000:]}"
        assert cell_files(store), "no cell finished within 40 s"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    assert "interrupted by SIGTERM; everything torn down" in err
    # torn down: the run's server namespace is gone
    assert f"ccsw-srv-{proc.pid}" not in netns_names()
    first = {p: p.read_bytes() for p in cell_files(store)}
    assert 1 <= len(first) < 4
    stamps = {p: p.stat().st_mtime_ns for p in first}

    again = start_sweep(spec_file, store, raw)
    try:
        out, err2 = again.communicate(timeout=90)
    finally:
        if again.poll() is None:
            os.killpg(again.pid, signal.SIGKILL)
            again.wait()
    assert again.returncode == 0, err2[-3000:]
    assert f"2 paths, 4 cells; {len(first)} finished earlier (skipped), {4 - len(first)} to run" in err2
    assert f"{4 - len(first)} cells ran" in err2
    files = cell_files(store)
    assert len(files) == 4
    # nothing that had finished ran again: the same bytes, never rewritten
    assert all(p.read_bytes() == b and p.stat().st_mtime_ns == stamps[p] for p, b in first.items())
    # the second invocation's runs hold exactly the cells that were missing
    rows = []
    for d in sorted(raw.iterdir()):
        jl = d / "transfers.jsonl"
        if jl.exists() and d.stat().st_mtime_ns > max(stamps.values()):
            rows += [json.loads(line) for line in jl.read_text().splitlines() if line.strip()]
    assert len(rows) == 4 - len(first)
    docs = [json.loads(gzip.open(p).read()) for p in files]
    spec = sweep_spec.loads_spec(SPEC)
    want = {c.key for c in sweep_paths.cells_of(spec, sweep_paths.sample_paths(spec))}
    assert {d["key"] for d in docs} == want
    for d in docs:
        assert d["row"]["sha256_ok"] and d["row"]["error"] is None and d["row"]["tct_s"] > 0
        assert d["row"]["load1"] is not None and d["row"]["algorithms"] == [d["candidate"]]
        if d["candidate"] == "bbr":
            assert d["flow"]["reports"]["n"] > 0 and d["flow"]["flow"]["algorithm"] == "bbr"
        else:
            assert "flow" not in d
    assert f"ccsw-srv-{again.pid}" not in netns_names()
