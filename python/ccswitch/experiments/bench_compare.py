"""`ccswitch bench overhead|authoring|both --baseline REV`: the same benchmark on two builds of
ccswitch, on this machine, in one run.

"before" is REV: a detached git worktree of it at /tmp/ccswitch-baseline-<sha7>, built there
(`cargo build --release --workspace --locked`, its own target/ inside the worktree) and reused
by later comparisons. "after" is the tree this package lives in, with the binaries the other
benchmarks use (`$CCSWITCH_BIN_DIR` or target/release). Each side is run as a whole invocation
of its own tree's `ccswitch bench WHICH --json` (its own Python package and its own binaries;
the harness and the binaries' options change together, so neither drives the other's), and
the invocations alternate in time: before, after, before, after, ... for `--compare-rounds`
rounds, one sample per invocation. With `--lock FILE` each invocation holds an exclusive
flock on FILE, so that other measurements on the machine do not overlap it.

The table gives, per figure, the median of the before samples, the median of the after samples
and after/before. Overhead schemes are matched by datapath and algorithm, with the old
spellings (`ccswitch:ALG`, `switch:ALG`) read as `kernel:ALG` and `ovs:ALG`. Figures are
reported, never compared with targets.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .environment import bin_dir, repo_root
from .errors import RunError
from .compat import DATAPATH_SPELLINGS, canonical_scheme, old_py_module_spelling
from ..topology.namespaces import log

#: (key in a `bench overhead --json` row, figure name, unit)
OVERHEAD_FIGURES = (
    ("bpf_ns_per_ack", "BPF ns/ACK", "ns"),
    ("shim_cpu_ms_per_10k_acks", "shim CPU per 10k ACKs", "ms"),
    ("agent_cpu_ms_per_10k_acks", "agent CPU per 10k ACKs", "ms"),
    ("tct_s", "transfer time", "s"),
)
#: (key in `bench authoring --json`, subject, unit)
AUTHORING_FIGURES = (
    ("rust_us_per_report", "Rust", "µs/report"),
    ("python_us_per_report", "Python", "µs/report"),
    ("python_to_rust_ratio", "Python/Rust", "x"),
)

#: `bench overhead` logs one line per transfer: "<scheme> <client> rep <n>: <tct> s <status>"
TRANSFER_LINE = re.compile(r"^(?P<scheme>\S+) (?P<client>\S+) rep (?P<rep>\d+): (?P<tct>\S+) s (?P<status>.*)$")

Sample = Dict[Tuple[str, str], float]  # (subject, figure) -> value, from one invocation


def scheme_key(label: str) -> str:
    """`ccswitch:reno` and `kernel:reno` -> `kernel:reno`; `switch:cubic` -> `ovs:cubic`."""
    kind, sep, rest = label.partition(":")
    return canonical_scheme(f"{DATAPATH_SPELLINGS.get(kind, kind)}:{rest}" if sep else label)


def transfer_times(stderr: str) -> Dict[str, List[float]]:
    """Transfer times (s) per scheme label from the per-transfer lines a `bench overhead` run
    logs (the runs whose JSON has no tct_s); failed transfers are left out."""
    out: Dict[str, List[float]] = {}
    for line in stderr.splitlines():
        m = TRANSFER_LINE.match(line.strip())
        if m and m["status"] == "ok":
            try:
                out.setdefault(m["scheme"], []).append(float(m["tct"]))
            except ValueError:
                pass
    return out


def overhead_sample(doc: dict, stderr: str = "") -> Sample:
    """One `bench overhead --json` output (and its log, for transfer times) as a sample."""
    logged = transfer_times(stderr)
    sample: Sample = {}
    for row in doc.get("rows", []):
        subject = scheme_key(row["scheme"])
        for key, figure, _unit in OVERHEAD_FIGURES:
            if key == "tct_s":
                times = [t for t in (row.get("tct_s") or logged.get(row["scheme"], [])) if t is not None]
                value = statistics.median(times) if times else None
            else:
                value = row.get(key)
            if value is not None:
                sample[(subject, figure)] = float(value)
    return sample


def authoring_sample(doc: dict) -> Sample:
    """One `bench authoring --json` output (its medians over its own rounds) as a sample."""
    return {("authoring", figure): float(doc[key]) for key, figure, _unit in AUTHORING_FIGURES
            if doc.get(key) is not None}


def units() -> Dict[str, str]:
    return {figure: unit for _key, figure, unit in OVERHEAD_FIGURES + AUTHORING_FIGURES}


def compare_rows(before: Sequence[Sample], after: Sequence[Sample]) -> List[dict]:
    """Per (subject, figure) seen on either side, in first-seen order: the median and count of
    each side's samples and after/before (None where a side has no sample or before is 0)."""
    keys: Dict[Tuple[str, str], None] = {}
    for s in list(before) + list(after):
        keys.update(dict.fromkeys(s))
    unit = units()
    rows = []
    for subject, figure in keys:
        b = [s[(subject, figure)] for s in before if (subject, figure) in s]
        a = [s[(subject, figure)] for s in after if (subject, figure) in s]
        mb = statistics.median(b) if b else None
        ma = statistics.median(a) if a else None
        rows.append({
            "subject": subject, "figure": figure, "unit": unit.get(figure, ""),
            "before": mb, "after": ma,
            "ratio": ma / mb if mb and ma is not None else None,
            "n_before": len(b), "n_after": len(a),
            "before_samples": b, "after_samples": a,
        })
    return rows


def _fmt(x: Optional[float]) -> str:
    if x is None:
        return "—"
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}" if abs(x) < 1 else f"{x:.2f}"


def markdown_table(rows: Iterable[dict], before_name: str, after_name: str) -> str:
    lines = [f"| subject | figure | unit | before ({before_name}) | after ({after_name}) | after/before | runs |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        ratio = "—" if r["ratio"] is None else f"{r['ratio']:.2f}"
        lines.append(f"| {r['subject']} | {r['figure']} | {r['unit']} | {_fmt(r['before'])} | {_fmt(r['after'])} "
                     f"| {ratio} | {r['n_before']}+{r['n_after']} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------- builds


@dataclass
class Build:
    name: str      # "before" or "after"
    rev: str       # the commit (short), as shown in the table
    tree: str      # the repository checkout
    bin_dir: str   # its Rust binaries

    def env(self) -> Dict[str, str]:
        python = os.path.join(self.tree, "python")
        path = [python] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        return dict(os.environ, PYTHONPATH=os.pathsep.join(dict.fromkeys(path)), CCSWITCH_BIN_DIR=self.bin_dir)


def _git(repo: str, *args: str) -> str:
    cp = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if cp.returncode != 0:
        raise RunError(f"git {' '.join(args)}: {cp.stderr.strip()}")
    return cp.stdout.strip()


def _cargo() -> str:
    return shutil.which("cargo") or os.path.expanduser("~/.cargo/bin/cargo")


def baseline_build(rev: str, out_dir: str, jobs: int) -> Build:
    """REV checked out in a detached worktree of this repository and built there (cached: an
    existing worktree of the same commit is reused, and cargo rebuilds nothing when nothing
    changed)."""
    repo = repo_root()
    sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    tree = os.path.join(tempfile.gettempdir(), f"ccswitch-baseline-{sha[:7]}")
    if os.path.isdir(tree):
        if _git(tree, "rev-parse", "HEAD") != sha:
            raise RunError(f"{tree} exists but is not at {sha}; remove it (git worktree remove --force {tree})")
        log(f"baseline {rev}: reusing the worktree {tree}")
    else:
        log(f"baseline {rev}: git worktree add --detach {tree} {sha[:12]}")
        _git(repo, "worktree", "add", "--detach", tree, sha)
    target = os.path.join(tree, "target")
    build_log = os.path.join(out_dir, f"build-{sha[:7]}.log")
    cmd = ["nice", "-n", "19", _cargo(), "build", f"-j{jobs}", "--release", "--workspace", "--locked"]
    log(f"baseline {rev}: {' '.join(cmd)} (CARGO_TARGET_DIR={target}; log: {build_log})")
    t0 = time.monotonic()
    with open(build_log, "w") as f:
        rc = subprocess.run(cmd, cwd=tree, stdout=f, stderr=subprocess.STDOUT,
                            env=dict(os.environ, CARGO_TARGET_DIR=target)).returncode
    if rc != 0:
        raise RunError(f"building {rev} in {tree} failed (status {rc}); see {build_log}")
    log(f"baseline {rev}: built in {time.monotonic() - t0:.0f} s")
    return Build("before", sha[:7], tree, os.path.join(target, "release"))


def current_build() -> Build:
    repo = repo_root()
    try:
        rev = _git(repo, "rev-parse", "--short=7", "HEAD")
        if _git(repo, "status", "--porcelain", "--untracked-files=no"):
            rev += "+changes"
    except RunError:
        rev = "current"
    return Build("after", rev, repo, bin_dir())


# ----------------------------------------------------------------------- runs


@contextlib.contextmanager
def experiment_lock(path: Optional[str]):
    """An exclusive flock on `path` (as `flock(1)` takes it) while the block runs."""
    if not path:
        yield
        return
    with open(path, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"  waiting for {path} (another measurement holds it)")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def run_invocation(build: Build, cmd: List[str], log_path: str, lock: Optional[str]) -> Tuple[int, str, str]:
    """`cmd` under `build`'s package and binaries, holding the lock; (status, stdout, stderr),
    stderr also written to `log_path`. On SIGINT the child (same process group) tears itself
    down and is waited for; SIGTERM is passed on to it."""
    with experiment_lock(lock):
        proc = subprocess.Popen(cmd, cwd=build.tree, env=build.env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        old = signal.signal(signal.SIGTERM, lambda s, f: proc.send_signal(signal.SIGTERM))
        try:
            while True:
                try:
                    out, err = proc.communicate()
                    break
                except KeyboardInterrupt:
                    log("  interrupted; waiting for the benchmark to tear down")
                    proc.wait()
                    raise
        finally:
            signal.signal(signal.SIGTERM, old)
    with open(log_path, "w") as f:
        f.write(err)
    return proc.returncode, out, err


def _last_json(stdout: str) -> Optional[dict]:
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                return None
    return None


def bench_args(which: str, args, tree: Optional[str] = None) -> List[str]:
    """The `bench WHICH` arguments; with `tree`, the Python algorithm spelled as that checkout
    names it (a baseline from before ccswitch/authoring/ has the examples at ccswitch.examples)."""
    if which == "overhead":
        extra = ["--repetitions", str(args.repetitions or 1)]
        if args.scenario:
            extra += ["--scenario", os.path.abspath(args.scenario)]
        return extra
    python = args.python
    if tree is not None and not os.path.isdir(os.path.join(tree, "python", "ccswitch", "authoring")):
        python = old_py_module_spelling(python)
    return ["--reports", str(args.reports), "--rounds", str(args.rounds), "--rust", args.rust, "--python", python]


def compare(args, out_dir: str) -> dict:
    os.makedirs(os.path.join(out_dir, "runs"), exist_ok=True)
    benches = ["overhead", "authoring"] if args.which == "both" else [args.which]
    before = baseline_build(args.baseline, out_dir, args.build_jobs)
    after = current_build()
    for b in (before, after):
        if not os.access(os.path.join(b.bin_dir, "ccswitch-agent"), os.X_OK):
            raise RunError(f"{b.name}: no ccswitch-agent in {b.bin_dir} (build it first)")
    samples: Dict[str, Dict[str, List[Sample]]] = {b: {"before": [], "after": []} for b in benches}
    runs = []
    t_start = time.monotonic()
    for rnd in range(1, args.compare_rounds + 1):
        for which in benches:
            for build in (before, after):
                name = f"r{rnd}-{build.name}-{which}"
                cmd = [sys.executable, "-m", "ccswitch", "bench", which, "--json"] + bench_args(which, args, build.tree)
                if which == "overhead":
                    cmd += ["--out", os.path.join(out_dir, "runs", name)]
                log(f"[round {rnd}/{args.compare_rounds}] {which}: {build.name} ({build.rev}) ...")
                t0 = time.monotonic()
                rc, stdout, stderr = run_invocation(build, cmd, os.path.join(out_dir, "runs", name + ".log"), args.lock)
                doc = _last_json(stdout)
                seconds = time.monotonic() - t0
                run = {"round": rnd, "bench": which, "build": build.name, "rev": build.rev, "status": rc,
                       "seconds": round(seconds, 1), "output": doc}
                runs.append(run)
                if doc is None:
                    log(f"  {name}: no figures (status {rc}); see runs/{name}.log")
                    continue
                sample = overhead_sample(doc, stderr) if which == "overhead" else authoring_sample(doc)
                samples[which][build.name].append(sample)
                failures = sum(r.get("integrity_failures", 0) for r in doc.get("rows", []))
                note = f", {failures} transfers failed" if failures else ""
                log(f"  {name}: {seconds:.0f} s (status {rc}{note}); "
                    f"{time.monotonic() - t_start:.0f} s so far")
    rows = []
    for which in benches:
        rows += [dict(r, bench=which) for r in compare_rows(samples[which]["before"], samples[which]["after"])]
    return {
        "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "host": os.uname().nodename,
        "kernel": os.uname().release,
        "benches": benches,
        "rounds": args.compare_rounds,
        "order": "before, after alternated: each round runs each bench on before, then on after",
        "before": {"rev": before.rev, "tree": before.tree, "bin_dir": before.bin_dir},
        "after": {"rev": after.rev, "tree": after.tree, "bin_dir": after.bin_dir},
        "bench_args": {w: bench_args(w, args) for w in benches},
        "wall_s": round(time.monotonic() - t_start, 1),
        "failed_runs": sum(r["output"] is None for r in runs),
        "rows": rows,
        "runs": runs,
    }


def cli(args, default_out: str) -> int:
    if args.which not in ("overhead", "authoring", "both"):
        args.parser.error("--baseline: for overhead, authoring or both")
    if args.compare_rounds < 1 or args.build_jobs < 1:
        args.parser.error("--compare-rounds and --build-jobs: must be >= 1")
    out_dir = args.out or default_out
    os.makedirs(out_dir, exist_ok=True)
    try:
        x = compare(args, out_dir)
    except RunError as e:
        log(f"error: {e}")
        return 1
    except KeyboardInterrupt:
        return 130
    table = markdown_table(x["rows"], x["before"]["rev"], x["after"]["rev"])
    head = (f"`ccswitch bench {args.which}` on {x['host']} ({x['kernel']}), {x['rounds']} rounds alternating "
            f"before/after, medians; {x['wall_s'] / 60:.0f} min")
    with open(os.path.join(out_dir, "compare.json"), "w") as f:
        json.dump(x, f, indent=1)
    with open(os.path.join(out_dir, "compare.md"), "w") as f:
        f.write(head + "\n\n" + table + "\n")
    print(head + "\n" + table, file=sys.stderr)
    log(f"wrote {out_dir}/compare.md and compare.json")
    if args.json:
        print(json.dumps({k: v for k, v in x.items() if k != "runs"}))
    return 1 if x["failed_runs"] else 0
