"""How the figures of this directory were measured (run as root from the repository's top,
one experiment at a time: `flock /tmp/ccswitch-experiment.lock .venv/bin/python
experiments/measured/distributed-2026-11-25/measure.py STEP`).

  demo     experiments/demo.toml in-process, then on a local cluster of two workers;
           `ccswitch compare` of the two (compare.txt) and both summaries
  resume   a sweep (learner/sweeps/small.toml into a fresh store) on two local workers,
           interrupted (SIGINT) once half its cells are stored, then rerun (resume.txt)
  kill     experiments/fidelity-2mb.toml on two local workers; one worker is killed (SIGKILL)
           while a unit runs on it, a third of the way in (kill.txt)
"""

import glob
import json
import os
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CCSWITCH = [".venv/bin/ccswitch"]


def sh(args, log):
    with open(log, "w") as f:
        t0 = time.monotonic()
        rc = subprocess.run(CCSWITCH + args, stdout=f, stderr=subprocess.STDOUT).returncode
    return rc, time.monotonic() - t0


def demo():
    out = {}
    for name, extra in (("in-process", []), ("cluster", ["--local-workers", "2"])):
        d = f"results/demo-{name}-1125"
        rc, wall = sh(["run", "experiments/demo.toml", "--out", d] + extra, f"results/demo-{name}-1125.log")
        out[name] = (d, rc, wall)
        for f in ("summary.txt", "summary.json"):
            subprocess.run(["cp", os.path.join(d, f), os.path.join(HERE, f"demo-{name}-{f}")], check=True)
    cmp_ = subprocess.run(CCSWITCH + ["compare", out["in-process"][0], out["cluster"][0]], capture_output=True, text=True)
    with open(os.path.join(HERE, "compare.txt"), "w") as f:
        f.write(cmp_.stdout)
        for name, (d, rc, wall) in out.items():
            f.write(f"{name}: exit {rc}, wall {wall:.1f} s (command, setup included)\n")


def stored(store):
    return {p: os.stat(p).st_mtime_ns for p in glob.glob(os.path.join(store, "cells", "*", "*.json.gz"))}


def resume():
    store, raw = "/tmp/ccswitch-resume-store", "results/resume-sweep-1125"
    subprocess.run(["rm", "-rf", store, raw], check=True)
    args = CCSWITCH + ["sweep", "learner/sweeps/small.toml", "--store", store, "--raw", raw, "--local-workers", "2"]
    lines = []
    with open("results/resume-1.log", "w") as f:
        p = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT)
        total = 36
        while p.poll() is None and len(stored(store)) < total // 2:
            time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        rc1 = p.wait()
    first = stored(store)
    lines.append(f"first invocation: interrupted (SIGINT) with {len(first)} cells stored; exit {rc1}")
    t0 = time.monotonic()
    with open("results/resume-2.log", "w") as f:
        rc2 = subprocess.run(args, stdout=f, stderr=subprocess.STDOUT).returncode
    second = stored(store)
    rerun = [k for k, t in first.items() if second.get(k) != t]
    log2 = open("results/resume-2.log").read()
    lines += [f"second invocation: exit {rc2} in {time.monotonic() - t0:.1f} s; "
              f"{len(second)} cells stored in all; of the {len(first)} stored before, {len(rerun)} rewritten",
              "its first lines:"] + [l for l in log2.splitlines() if l.startswith("sweep small")]
    with open(os.path.join(HERE, "resume.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


def unit_children():
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
            ppid = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
        if b"ccswitch.experiments.distributed" in cmd:
            found[int(pid)] = ppid
    return found


def kill():
    d = "results/kill-worker-1125"
    subprocess.run(["rm", "-rf", d], check=True)
    t0 = time.monotonic()
    with open("results/kill-worker-1125.log", "w") as f:
        p = subprocess.Popen(CCSWITCH + ["run", "experiments/fidelity-2mb.toml", "--out", d, "--local-workers", "2"],
                             stdout=f, stderr=subprocess.STDOUT)
        while p.poll() is None:
            n = sum(1 for _ in open(os.path.join(d, "transfers.jsonl"))) if os.path.exists(os.path.join(d, "transfers.jsonl")) else 0
            kids = unit_children()
            if n >= 21 and kids:
                child, worker = next(iter(kids.items()))
                os.kill(worker, signal.SIGKILL)
                killed = (child, worker, n)
                break
            time.sleep(0.1)
        rc = p.wait()
    rows = [json.loads(l) for l in open(os.path.join(d, "transfers.jsonl"))]
    units = [r["unit"] for r in rows]
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    alive = os.path.exists(f"/proc/{killed[0]}")
    lines = [f"run: exit {rc}, wall {time.monotonic() - t0:.1f} s",
             f"killed worker pid {killed[1]} (SIGKILL) while its unit runner pid {killed[0]} ran, "
             f"after {killed[2]} of 63 rows were in",
             f"rows: {len(rows)}, distinct units: {len(set(units))}, transfers numbered "
             f"{sorted(r['transfer'] for r in rows) == list(range(1, 64))} 1..63 each once, "
             f"ok and SHA-256 intact: {sum(1 for r in rows if r['sha256_ok'] and not r['error'])}",
             f"the orphaned runner still alive afterwards: {alive}; its namespace ccsw-srv-{killed[0]} left: "
             f"{f'ccsw-srv-{killed[0]}' in netns}; namespaces left: {netns.strip() or 'none'}"]
    with open(os.path.join(HERE, "kill.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    {"demo": demo, "resume": resume, "kill": kill}[sys.argv[1]]()
