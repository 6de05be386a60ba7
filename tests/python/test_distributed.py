"""Runs and sweeps on a local Dask cluster of two workers, for real: root, mahimahi, nginx,
curl, namespaces, the kernel datapath. Like test_integration.py these FAIL (they do not skip)
when the machine cannot run them; CI runs them as root."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

from ccswitch.experiments import results

from test_integration import PYTHONPATH, netns_list, pid_alive, require_machine, write_scenario

SCHEMES = ["native:reno", "kernel:reno"]


def cli(args, **kw):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "ccswitch"] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, **kw)


def finish(proc, timeout=300):
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def cells(run_dir):
    return sorted((r["client"], r["scheme"], r["file_bytes"], r["repetition"], r["unit"])
                  for r in results.read_jsonl(os.path.join(run_dir, "transfers.jsonl")))


def test_a_local_cluster_records_what_the_in_process_runner_records_and_resumes(tmp_path):
    require_machine()
    sc = write_scenario(tmp_path, SCHEMES, size=300_000, reps=2)
    before = netns_list()
    here, there = str(tmp_path / "in-process"), str(tmp_path / "cluster")
    rc, _, err = finish(cli(["run", str(sc), "--out", here]))
    assert rc == 0, err
    shared_scratch = os.path.join(tempfile.gettempdir(), "dask-scratch-space")
    scratch_before = os.path.exists(shared_scratch)
    rc, _, err = finish(cli(["run", str(sc), "--out", there, "--local-workers", "2"]))
    assert rc == 0, err
    assert "local Dask cluster" in err and re.search(r"\d+ lab\(s\) on 2 worker\(s\)", err), err
    assert scratch_before or not os.path.exists(shared_scratch), "the cluster left Dask's shared scratch directory"
    assert cells(here) == cells(there) and len(cells(there)) == 4
    assert len(results.read_transfers_parquet(os.path.join(there, "transfers.parquet"))) == 4
    rows = results.read_jsonl(os.path.join(there, "transfers.jsonl"))
    assert sorted(r["transfer"] for r in rows) == [1, 2, 3, 4]
    assert all(r["sha256_ok"] and r["error"] is None for r in rows)
    for r in results.read_jsonl(os.path.join(there, "transfers.jsonl")):
        if r["scheme"] == "kernel:reno":
            # the flow ran the agent's algorithm and its events came back with the unit
            assert r["cc_observed"].startswith("ccsw") and r["algorithms"] == ["reno"], r
            assert r["events"].startswith("flows/") and os.path.exists(os.path.join(there, r["events"]))
    summary = {k: json.load(open(os.path.join(d, "summary.json"))) for k, d in (("here", here), ("there", there))}
    shape = {k: sorted((r["client"], r["scheme"], r["n"]) for r in v["rows"]) for k, v in summary.items()}
    assert shape["here"] == shape["there"] == [("clean-10ms", "kernel:reno", 2), ("clean-10ms", "native:reno", 2)]
    for k in ("here", "there"):
        [ratio] = summary[k]["ratios"]
        assert (ratio["a"], ratio["b"], ratio["n_pairs"]) == ("kernel:reno", "native:reno", 2)
    for name in ("summary.txt", "tct.png", "scenario.toml"):
        assert os.path.exists(os.path.join(there, name)), name
    # rerun into the same directory: every unit is finished, nothing runs again
    log_before = open(os.path.join(there, "transfers.jsonl")).read()
    rc, _, err = finish(cli(["run", str(sc), "--out", there, "--local-workers", "2"]))
    assert rc == 0, err
    assert "4 of 4 transfers finished earlier, 0 to run" in err
    assert open(os.path.join(there, "transfers.jsonl")).read() == log_before
    assert netns_list() == before


def unit_children():
    """PID -> parent PID of the runners that workers started (`python -m ccswitch.experiments.distributed`)."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if b"ccswitch.experiments.distributed" in cmd:
            found[int(pid)] = ppid
    return found


def test_a_worker_killed_mid_transfer_loses_nothing_and_duplicates_nothing(tmp_path):
    require_machine()
    sc = write_scenario(tmp_path, SCHEMES, size=2_000_000, reps=3)
    before = netns_list()
    out = str(tmp_path / "run")
    proc = cli(["run", str(sc), "--out", out, "--local-workers", "2"])
    victim = None
    deadline = time.monotonic() + 120
    while victim is None and time.monotonic() < deadline and proc.poll() is None:
        kids = unit_children()
        if kids:
            victim = next(iter(kids.items()))
            break
        time.sleep(0.05)
    assert victim is not None, "no unit ever ran"
    child, worker = victim
    with open(f"/proc/{child}/cmdline", "rb") as f:
        work = f.read().split(b"\0")[-2].decode()
    assert os.path.isdir(work), work
    time.sleep(0.5)  # into its transfer
    os.kill(worker, signal.SIGKILL)
    rc, _, err = finish(proc)
    assert rc == 0, err
    rows = results.read_jsonl(os.path.join(out, "transfers.jsonl"))
    assert sorted(r["transfer"] for r in rows) == [1, 2, 3, 4, 5, 6], err
    assert len({r["unit"] for r in rows}) == 6
    assert all(r["sha256_ok"] and r["error"] is None for r in rows)
    # the orphaned runner tore its lab down and left
    t0 = time.monotonic()
    while pid_alive(child) and time.monotonic() - t0 < 30:
        time.sleep(0.2)
    assert not pid_alive(child)
    assert not os.path.exists(work), "the orphaned runner's work directory stayed"
    assert f"ccsw-srv-{child}" not in netns_list()
    assert netns_list() == before


def test_a_sweep_on_a_local_cluster_resumes_without_rerunning_a_stored_cell(tmp_path):
    require_machine()
    spec = tmp_path / "s.toml"
    spec.write_text("""
name = "dsw"
seed = 7
paths = 2
timeout_s = 60
agent_settle_s = 0.5
datapaths = ["kernel"]
candidates = ["bbr", "cubic"]
initial = "bbr"
[window]
kind = "first"
samples = 10
min_samples = 4
[sizes]
fixed = [300_000]
max_est_s = 25
[[mix]]
name = "constant"
weight = 1
kind = "constant"
rtt_ms = { dist = "uniform", min = 10, max = 40 }
mbps = { dist = "uniform", min = 10, max = 30 }
queue_bdp = { dist = "choice", values = [1, 2] }
""")
    store, raw = str(tmp_path / "store"), str(tmp_path / "raw")
    args = ["sweep", str(spec), "--store", store, "--raw", raw, "--local-workers", "2"]
    rc, _, err = finish(cli(args + ["--max-cells", "2"]))
    assert rc == 0, err
    first = {f: os.stat(os.path.join(dp, f)).st_mtime_ns
             for dp, _, fs in os.walk(os.path.join(store, "cells")) for f in fs}
    assert len(first) == 2, err
    rc, _, err = finish(cli(args))
    assert rc == 0, err
    assert "2 finished earlier (skipped), 2 to run" in err
    after = {f: os.stat(os.path.join(dp, f)).st_mtime_ns
             for dp, _, fs in os.walk(os.path.join(store, "cells")) for f in fs}
    assert len(after) == 4 and all(after[f] == t for f, t in first.items())
