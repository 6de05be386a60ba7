"""`ccswitch sweep SPEC.toml`: sample paths, run every candidate algorithm on each, keep
every finished transfer as a small committable cell, resume where an interrupted sweep stopped.

A sweep spec (learner/README.md, "Sweep spec") declares distributions of paths (a mixture of
components: constant-rate links or cellular traces, each with distributions of RTT, rate,
loss and queue depth), the candidate algorithms, the file sizes and a seed. Path `i` is drawn
from its own generator seeded with (seed, i), so the same spec gives the same paths, and
asking for more paths keeps the first ones.

Every sampled path is turned into a client of an ordinary scenario by the scenario loader,
and its *path parameters* are what that client carries (`Client.path_fields` without the
words): mm-delay, mm-loss each way, rates or trace files, droptail queue. They name the path
(`path_id`, a hash of them) and, with the scheme, file size and repetition, each *cell* (the
cell key). Paths held out for evaluation are never run: a spec naming a Verizon trace is
refused when it is loaded, and a sampled path equal to a client of a held-out scenario
(experiments/mystique-mix.toml and experiments/mcc-wifi.toml by default) is drawn again,
and the fact logged. A path on which the slowest candidate is not expected to finish the
smallest file well within the timeout is drawn again too (`estimate_slowest_tct_s`).

The cells run on the experiment runner itself (runner.py's `Runner`: nginx, mahimahi, curl,
SHA-256), one topology set-up per batch of paths, the candidates of a path one after the
other in an order rotated from path to path. A finished cell is written at once, gzipped
JSON under `STORE/cells/<path_id>/<cell key>.json.gz`: the transfer's verdict, TCT, load
average at its start, and for the `initial` algorithm the flow's agent events (its `flow`
event and the first `MAX_STORED_REPORTS` reports, in columns) from which `ccswitch dataset`
computes the features. A rerun skips every cell whose file exists. Raw run directories (logs,
full event files) go to `results/sweep-NAME/` (not committed). With a Dask cluster
(`--cluster`, `--local-workers`: distributed.py) every cell is a task of its own, in the same
rotated order; its raw directory comes back under `results/sweep-NAME/units/<cell key>/`.

This module runs a sweep (`run_sweep`: batches, passes, recording cells); beside it
sweep_spec.py parses the spec, sweep_paths.py samples the paths and names the cells,
sweep_store.py keeps them; the command line is commands/sweep.py.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import results, scenario as _scenario
# the spec, paths and cell store of a sweep (beside this module, which runs it)
from .sweep_paths import Cell, Path, cells_of, sample_paths
from .sweep_spec import Spec
from .sweep_store import CellStore


def load1() -> float:
    return os.getloadavg()[0]


def format_duration(s: float) -> str:
    s = int(round(s))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")


class Progress:
    """Cells done of the total, seconds per cell run this session and the time left."""

    def __init__(self, total: int, done_before: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.done_before, self.clock = total, done_before, clock
        self.stored = 0  # cells finished and stored this session
        self.attempts = 0  # transfers run this session (stored or not)
        self.t0 = clock()

    def line(self) -> str:
        done = self.done_before + self.stored
        if not self.attempts:
            return f"{done}/{self.total} cells done"
        per = (self.clock() - self.t0) / self.attempts
        return f"{done}/{self.total} cells done, {per:.1f} s/cell, ETA {format_duration((self.total - done) * per)}"


def batch_scenario(spec: Spec, paths: Sequence[Path], index: int) -> _scenario.Scenario:
    """The scenario of one batch of paths: one client per path, every scheme."""
    doc = {
        "name": f"{spec.name}-b{index:04d}", "repetitions": spec.repetitions, "schemes": spec.schemes(),
        "timeout_s": spec.timeout_s, "agent_settle_s": spec.agent_settle_s,
        "clients": [dict(p.client_table, name=p.client_name, file_sizes=list(p.sizes)) for p in paths],
    }
    if "ovs" in spec.datapaths:
        doc["bridge"] = "ovs"
    return _scenario.parse_scenario(doc, check_files=True)


@dataclass
class SweepResult:
    total: int
    skipped: int
    ran: int
    stored: int
    unfinished: List[Tuple[str, str]]  # (cell key, why)


def make_runner(sc, out_dir, schedule, on_row, analysis=None):
    """A batch's runner (`analysis`: what the command adds to each batch's summary,
    run_summary.RunAnalysis)."""
    from .runner import Runner

    return Runner(sc, out_dir, schedule=schedule, on_row=on_row, schemes_checked=True, analysis=analysis)


def run_sweep(spec: Spec, store_dir: str, raw_dir: str, *, log: Callable[[str], None],
              runner_factory: Callable = make_runner, check_schemes: bool = True,
              max_cells: Optional[int] = None, client: Any = None) -> SweepResult:
    """Run every cell of the spec that the store does not hold yet. Raises errors.Interrupted
    (after the runner tore everything down) when SIGINT/SIGTERM arrives; finished cells are
    already stored."""
    store = CellStore(store_dir)
    paths = sample_paths(spec, log=log)
    note = store.write_spec(spec, paths)
    if note:
        log(f"note: {note}")
    cells = cells_of(spec, paths)
    todo = [c for c in cells if not store.has(c)]
    skipped = len(cells) - len(todo)
    if max_cells is not None:
        todo = todo[:max_cells]
    log(f"sweep {spec.name}: {len(paths)} paths, {len(cells)} cells; {skipped} finished earlier (skipped), "
        f"{len(todo)} to run; store {store.root}, raw runs in {os.path.abspath(raw_dir)}")
    result = SweepResult(total=len(cells), skipped=skipped, ran=0, stored=0, unfinished=[])
    if not todo:
        return result
    progress = Progress(len(cells), skipped)
    ctx = _RunContext(spec, store, raw_dir, log, runner_factory, progress, result, checked=not check_schemes,
                      client=client)
    if client is not None and not ctx.checked:
        from .environment import check_agent_schemes, checked_here

        ctx.checked = checked_here(lambda: check_agent_schemes(batch_scenario(spec, [todo[0].path], 0)), True)
    for attempt in range(1, MAX_PASSES + 1):
        result.unfinished = []
        before = len(todo)
        if client is not None:
            _run_distributed_pass(ctx, todo, client)
        else:
            _run_pass(ctx, todo, attempt)
        todo = [c for c in todo if not store.has(c)]
        if not todo or len(todo) == before:
            break
        if attempt < MAX_PASSES:
            log(f"{len(todo)} cell(s) reached no verdict (harness or agent trouble, not the candidate's); "
                f"pass {attempt + 1} runs them again")
    return result


#: Passes over the cells that reached no verdict (an agent that could not start while its
#: binary was being rebuilt, a topology that could not be set up), as long as each pass gets
#: some of them done.
MAX_PASSES = 3
#: Batches in a row whose topology could not be set up before the sweep gives up.
MAX_BATCH_FAILURES = 3


@dataclass
class _RunContext:
    spec: Spec
    store: CellStore
    raw_dir: str
    log: Callable[[str], None]
    runner_factory: Callable
    progress: Progress
    result: SweepResult
    checked: bool
    batches_run: int = 0
    #: a Dask client: every cell runs as a task on its cluster
    client: Any = None


def _record(ctx: _RunContext, cell: Cell, row: dict, out: str, raw_rel: str) -> None:
    """A cell's transfer ran (its raw run directory is `out`): store it if it is a verdict."""
    spec, store, progress, result = ctx.spec, ctx.store, ctx.progress, ctx.result
    result.ran += 1
    progress.attempts += 1
    ok, why = results.verdict(row)
    observation = cell.candidate == spec.initial
    if ok and observation and row.get("error") is None and not row.get("events"):
        ok, why = False, f"no agent events for the initial algorithm's flow ({row.get('events_note')})"
    if ok and row.get("flows"):
        row["competitor_mbps"] = competitor_mbps(row, out)
    if ok:
        events = None
        if observation and row.get("events"):
            from .rundir import read_events

            events = read_events(os.path.join(out, row["events"]))
        store.write_cell(spec, cell, row, events, raw_rel)
        result.stored += 1
        progress.stored += 1
    else:
        result.unfinished.append((cell.key, why))
    tct = f"{row['tct_s']:.2f} s" if row.get("tct_s") is not None else "-"
    verdict = why if ok else f"{why} (not stored: runs again)"
    host = f" [{row['host']}]" if ctx.client is not None and row.get("host") else ""
    ctx.log(f"  sweep [{progress.line()}] {cell.path.client_name} {cell.scheme} {cell.file_bytes} B: "
            f"{tct} {verdict}, load {row.get('load1') or 0:.2f}{host}")


def competitor_mbps(row: dict, out: str) -> Optional[float]:
    """The competing flows' mean Mbit/s (summed over them) while the flow under test ran, from
    the probe's 100 ms bins: what the harm objective compares between candidates. None when
    the bins or the flows' times are missing."""
    from .measurements import BIN_S, read_throughput_csv

    test = next((f for f in row["flows"] if f.get("role") == "test"), None)
    rivals = [f["flow"] for f in row["flows"] if f.get("role") != "test"]
    if test is None or not rivals or not row.get("throughput_bins") or not test.get("tct_s"):
        return None
    try:
        bins = read_throughput_csv(os.path.join(out, row["throughput_bins"]))
    except (OSError, ValueError):
        return None
    lo = int(round(test["start_s"] / BIN_S))
    hi = max(lo + 1, int(round((test["start_s"] + test["tct_s"]) / BIN_S)))
    total = 0.0
    for flow in rivals:
        if flow not in bins:
            return None
        part = bins[flow][lo:hi]
        total += float(part.sum()) / (hi - lo)  # bins past the array's end carried nothing
    return round(total, 4)


def _run_distributed_pass(ctx: _RunContext, todo: List[Cell], client) -> None:
    """Every cell a task of its own on the cluster (distributed.py), in the order of `todo`
    (the candidates of a path rotated from path to path, as in batches). A cell whose task
    failed stays unstored and runs in the next pass."""
    from . import distributed as _dist

    scenarios: Dict[str, _scenario.Scenario] = {}
    items = []
    for c in todo:
        sc = scenarios.get(c.path.id)
        if sc is None:
            sc = scenarios[c.path.id] = batch_scenario(ctx.spec, [c.path], ctx.batches_run)
            ctx.batches_run += 1
        scheme = next(s for s in sc.schemes if s.label == c.scheme)
        items.append((sc, c.key, 1, (c.rep - 1, sc.clients[0], scheme, c.file_bytes)))
    futures = _dist.submit(client, items, checked=ctx.checked, tag=f"sweep-{ctx.spec.name}-{os.getpid()}-{time.time_ns()}")
    for i, res, exc in _dist.completed(futures):
        c = todo[i]
        if exc is not None:
            ctx.result.unfinished.append((c.key, f"task failed: {exc}"))
            ctx.log(f"  sweep {c.path.client_name} {c.scheme} {c.file_bytes} B: task failed ({exc}); runs again")
            continue
        rows = _dist.unpack_unit(ctx.raw_dir, c.key, res)
        _record(ctx, c, rows[0], ctx.raw_dir, os.path.join("units", c.key))


def _run_pass(ctx: _RunContext, todo: List[Cell], attempt: int) -> None:
    from .errors import RunError
    from ..topology.namespaces import TopologyError

    spec, log = ctx.spec, ctx.log
    by_path: Dict[str, List[Cell]] = {}
    for c in todo:
        by_path.setdefault(c.path.id, []).append(c)
    path_order = list(by_path)
    batches = [path_order[i:i + spec.batch_paths] for i in range(0, len(path_order), spec.batch_paths)]
    failures = 0
    for ids in batches:
        b = ctx.batches_run
        ctx.batches_run += 1
        batch_cells = [c for pid in ids for c in by_path[pid]]
        batch_paths = list({c.path.id: c.path for c in batch_cells}.values())
        sc = batch_scenario(spec, batch_paths, b)
        if not ctx.checked:
            from .environment import check_agent_schemes

            check_agent_schemes(sc)
            ctx.checked = True
        clients = {c.name: c for c in sc.clients}
        schemes = {s.label: s for s in sc.schemes}
        schedule = [(c.rep - 1, clients[c.path.client_name], schemes[c.scheme], c.file_bytes) for c in batch_cells]
        lookup = {(c.path.client_name, c.scheme, c.file_bytes, c.rep): c for c in batch_cells}
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = os.path.join(ctx.raw_dir, f"batch-{stamp}-{b:04d}")
        raw_rel = os.path.relpath(out, ctx.raw_dir)

        def on_row(row, out=out, raw_rel=raw_rel, lookup=lookup):
            cell = lookup[(row["client"], row["scheme"], row["file_bytes"], row["repetition"])]
            _record(ctx, cell, row, out, raw_rel)

        r = ctx.runner_factory(sc, out, schedule, on_row)
        try:
            r.run()
            failures = 0
        except (RunError, TopologyError) as e:
            failures += 1
            log(f"batch {b} (pass {attempt}) stopped: {e}")
            if failures >= MAX_BATCH_FAILURES:
                raise
