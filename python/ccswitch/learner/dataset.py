"""`ccswitch dataset RUN_DIR... -o FILE.parquet`: one training row per transfer observed under a
policy's `initial` algorithm, with the features the agent saw at its first decision, the
path's parameters and every candidate's TCT, throughput, delay p95 and harm on the same path
and file size.

Sources:
- a sweep's cell store (`ccswitch sweep`, a directory with `spec.toml` and `cells/`): the
  candidates, the initial algorithm and the window are the spec's;
- a run directory of `ccswitch run` whose agent schemes collected events (every agent scheme
  does): a transfer's path is its row's path fields, the candidates are the run's fixed agent
  algorithms (`kernel:ALG`, `ovs:ALG`; native and policy schemes are not candidates) and
  the initial algorithm is `--initial` (default bbr).

The features come from `ccswitch._native.decision_features`, the agent's own implementation,
fed with the flow's report events and the MSS of its `flow` event: training and serving
compute them with the same code. Beside each candidate's TCT a row carries what the
objectives (`objectives.py`) read: its throughput, delay p95 and harm to a competing flow, and
the path's schedule step and competitor. The schema is in learner/README.md ("Dataset").

Runs of the scenarios held out for evaluation (`sweep_paths.HELD_OUT_SCENARIOS`:
experiments/mystique-mix.toml and mcc-wifi.toml) are refused, found by the run's scenario name
and by any transfer on one of their clients' paths; `training.load_dataset` refuses a dataset
whose metadata names such a source.
"""

from __future__ import annotations

import datetime as _dt
import functools
import json
import math
import os
import re
import statistics
import sys
import tomllib
import types
from collections import defaultdict
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..experiments import results, sweep_paths as _sweep_paths, sweep_spec as _sweep_spec, sweep_store as _sweep_store
from ..experiments.compat import DATAPATH_RENAMED
from ..experiments.environment import repo_root
from ..experiments.measurements import harm as _harm
from ..experiments.rundir import RunDirectory, RunDirectoryError
from .labels import DP95_PREFIX, FEATURE_PREFIX, HARM_PREFIX, RUNS_PREFIX, TCT_PREFIX, THR_PREFIX

#: MSS assumed for a flow whose `flow` event does not carry one (agents from before the field
#: was added); counted and reported by the builder.
DEFAULT_MSS = 1448
WINDOW_KINDS = ("first", "sliding")

#: The per-candidate metric columns (besides `tct_`, `n_`) and the row field each is the median of.
METRICS = {THR_PREFIX: "throughput_mbps", DP95_PREFIX: "delay_p95_ms"}

#: What the dataset's metadata says of its per-candidate columns (the settings the objectives
#: depend on).
METRIC_NOTES = {
    TCT_PREFIX: "tct_s", THR_PREFIX: "throughput_mbps", DP95_PREFIX: "delay_p95_ms",
    "aggregate": "median over the candidate's successful repetitions on the path, datapath and size",
    HARM_PREFIX: "harm (Ware et al., throughput, higher is better) of the median competitor_mbps against the "
                 "candidate named like the competitor's algorithm",
}

#: Scheme kinds that prefix an algorithm in a competitor's scheme (`native:cubic` -> `cubic`).
SCHEME_KINDS = ("native", "kernel", "ovs")


class DatasetError(ValueError):
    """A source cannot be read or the options are invalid; the message names which."""


def native_features():
    """The native module, checked for the feature API."""
    try:
        from .. import _native
    except ImportError as e:
        raise DatasetError(f"cannot import ccswitch._native ({e}); build the package (make setup)") from None
    if not hasattr(_native, "decision_features") or not hasattr(_native, "FEATURE_NAMES"):
        raise DatasetError("ccswitch._native has no decision_features/FEATURE_NAMES: the package was built "
                           "without the agent's feature code; rebuild it (make setup)")
    return _native


# ----------------------------------------------------------------------- observations


class Observation:
    """One transfer of a source: its path, candidate, verdict and (for the initial
    algorithm's) the flow's events."""

    __slots__ = ("source", "sweep", "path_id", "params", "datapath", "candidate", "file_bytes", "rep", "tct_s",
                 "ok", "load1", "started_at", "flow", "reports", "mean_mbps",
                 # the probe's figures (None when the cell or row predates them)
                 "throughput_mbps", "delay_p95_ms", "competitor_mbps",
                 # the algorithms of the path's competing flows (`cubic` for `native:cubic`); empty: none
                 "competitors")

    def __init__(self, **kw):
        for k in self.__slots__:
            setattr(self, k, kw.get(k))


def _ok(row: Dict[str, Any]) -> bool:
    return row.get("error") is None and bool(row.get("sha256_ok")) and row.get("tct_s") is not None


def _number(v: Any) -> Optional[float]:
    """A finite number, else None (absent in old cells, null, NaN, or not a number at all)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(v) else None


def competitor_algorithm(scheme: str) -> str:
    """The algorithm of a competing flow's scheme, as a candidate would be named:
    `native:cubic` -> `cubic`, `kernel:cubic:beta=0.8` -> `cubic:beta=0.8`."""
    kind, sep, rest = scheme.partition(":")
    return rest if sep and DATAPATH_RENAMED.get(kind, kind) in SCHEME_KINDS else scheme


def _competitors(params: Dict[str, Any], row: Dict[str, Any]) -> Tuple[str, ...]:
    """The algorithms of the path's competing flows: the path's `flows` entries with a scheme
    (a sweep cell), else the row's flows whose role is not the test flow's (a run)."""
    if params.get("flows"):
        schemes = [f["scheme"] for f in params["flows"] if f.get("scheme")]
    else:
        schemes = [f["scheme"] for f in row.get("flows") or [] if f.get("role") != "test" and f.get("scheme")]
    return tuple(sorted({competitor_algorithm(s) for s in schemes}))


def _metrics(row: Dict[str, Any], params: Dict[str, Any]) -> Dict[str, Any]:
    return {"throughput_mbps": _number(row.get("throughput_mbps")), "delay_p95_ms": _number(row.get("delay_p95_ms")),
            "competitor_mbps": _number(row.get("competitor_mbps")), "competitors": _competitors(params, row)}


# ----------------------------------------------------------------------- held out


@functools.lru_cache(maxsize=None)
def held_out_scenarios() -> Dict[str, str]:
    """The held-out scenarios' names -> their file names (`mystique-mix` -> `mystique-mix.toml`)."""
    out = {}
    for f in _sweep_paths.HELD_OUT_SCENARIOS:
        with open(os.path.join(repo_root(), f), "rb") as fh:
            out[tomllib.load(fh)["name"]] = os.path.basename(f)
    return out


@functools.lru_cache(maxsize=None)
def held_out_clients() -> Dict[Tuple, str]:
    """Every client path of the held-out scenarios, comparable form -> "file clients[i] (name)"."""
    return _sweep_paths.held_out_paths(types.SimpleNamespace(held_out=()))


def held_out_source(source: str, scenario: Optional[str] = None) -> Optional[str]:
    """The held-out scenario file a dataset source is a run of, by its recorded scenario name
    or by its directory's name (`ccswitch run` names it SCENARIO-YYYYMMDD-HHMMSS), else None."""
    names = held_out_scenarios()
    if scenario in names:
        return names[scenario]
    base = os.path.basename(os.path.normpath(str(source)))
    for name, file in names.items():
        if re.fullmatch(re.escape(name) + r"(-\d{8}-\d{6})?", base):
            return file
    return None


def check_not_held_out(run_dir: str, run: RunDirectory) -> None:
    """Refuse a run of a held-out scenario: by its scenario's name, by a client of its scenario
    or by any transfer whose path equals a held-out scenario's client."""
    try:
        scenario = run.scenario
    except RunDirectoryError:
        scenario = None  # a trimmed run without its scenario: its transfers still say their paths
    held = held_out_source(run_dir, scenario.name if scenario else None)
    if held:
        raise DatasetError(f"{run_dir}: a run of {held}, held out for evaluation: training may not use it")
    clients = held_out_clients()
    paths = [_sweep_paths.path_params(c) for c in scenario.clients] if scenario else []
    paths += [_sweep_paths.params_from_row(row) for row in run.rows]
    for params in paths:
        where = clients.get(_sweep_paths._comparable(params))
        if where:
            raise DatasetError(f"{run_dir}: a run on the path of {where}, held out for evaluation: "
                               "training may not use it")


def _mean_mbps(params: Dict[str, Any]) -> Optional[float]:
    if params.get("downlink_mbps") is not None:
        return float(params["downlink_mbps"])
    trace = params.get("downlink_trace")
    if trace and os.path.isfile(trace):
        return _sweep_spec.trace_mean_mbps(trace)
    return None


def read_store(store: str, initial: Optional[str]) -> Tuple[List[Observation], Dict[str, Any]]:
    """A sweep's cells. Returns the observations and the spec's settings."""
    spec_path = os.path.join(store, "spec.toml")
    try:
        spec = _sweep_spec.load_spec(spec_path)
    except _sweep_spec.SweepError as e:
        raise DatasetError(f"{store}: {e}") from None
    if initial is not None and initial != spec.initial:
        raise DatasetError(f"--initial {initial}: the sweep {spec.name} observed flows under {spec.initial}")
    obs = []
    for doc in _sweep_store.CellStore(store).cells():
        row = doc["row"]
        flow = doc.get("flow") or {}
        reports = _sweep_store.expand_reports(flow["reports"]) if flow.get("reports") else None
        obs.append(Observation(
            source=store, sweep=doc["sweep"], path_id=doc["path_id"], params=doc["path"],
            datapath=DATAPATH_RENAMED.get(doc["datapath"], doc["datapath"]),
            candidate=doc["candidate"], file_bytes=doc["file_bytes"], rep=doc["rep"], tct_s=row.get("tct_s"),
            ok=_ok(row), load1=row.get("load1"), started_at=row.get("started_at"), flow=flow.get("flow"),
            reports=reports, mean_mbps=doc.get("mean_mbps"), **_metrics(row, doc["path"])))
    settings = {"initial": spec.initial, "candidates": list(spec.candidates), "sweep": spec.name,
                "window": (spec.window_kind, spec.window_samples, spec.window_min_samples), "scenario": spec.name}
    return obs, settings


def read_run(run_dir: str, initial: str) -> Tuple[List[Observation], Dict[str, Any]]:
    """A `ccswitch run` directory's transfers of fixed agent algorithms (RunDirectory's rows,
    so in today's scheme names), with the events of the initial algorithm's. A run of a
    held-out scenario is refused (`check_not_held_out`)."""
    run = RunDirectory(run_dir)
    check_not_held_out(run_dir, run)
    try:
        scenario = run.scenario.name
    except RunDirectoryError:
        scenario = None
    obs = []
    candidates: List[str] = []
    name = os.path.basename(os.path.normpath(run_dir))
    for row in run.rows:
        kind, _, alg = row["scheme"].partition(":")
        if kind not in ("kernel", "ovs") or alg.startswith("policy:"):
            continue
        if alg not in candidates:
            candidates.append(alg)
        params = _sweep_paths.params_from_row(row)
        flow, reports = None, None
        if alg == initial and row.get("events"):
            events = run.events_of(row)
            flow = next((e for e in events if e["event"] == "flow"), None)
            reports = [e for e in events if e["event"] == "report"]
        obs.append(Observation(
            source=run_dir, sweep=name, path_id=_sweep_paths.path_id(params), params=params,
            datapath=kind, candidate=alg, file_bytes=row["file_bytes"],
            rep=row["repetition"], tct_s=row.get("tct_s"), ok=_ok(row), load1=row.get("load1"),
            started_at=row.get("started_at"), flow=flow, reports=reports, mean_mbps=_mean_mbps(params),
            **_metrics(row, params)))
    if initial not in candidates:
        raise DatasetError(f"{run_dir}: no transfer ran the initial algorithm {initial!r} as a fixed agent scheme "
                           f"(candidates here: {', '.join(candidates) or 'none'}); pass --initial")
    return obs, {"initial": initial, "candidates": candidates, "sweep": name, "window": None, "scenario": scenario}


def is_store(path: str) -> bool:
    """Whether a source is a sweep's cell store (else a run directory)."""
    return os.path.isfile(os.path.join(path, "spec.toml")) and os.path.isdir(os.path.join(path, "cells"))


def read_source(path: str, initial: Optional[str]) -> Tuple[List[Observation], Dict[str, Any]]:
    """A sweep's cell store or a run directory; an unreadable one raises DatasetError naming
    the file at fault."""
    if is_store(path):
        return read_store(path, initial)
    if not os.path.isdir(path):
        raise DatasetError(f"{path}: no such directory")
    try:
        if not RunDirectory(path).has_transfers:
            raise DatasetError(f"{path}: neither a sweep store (spec.toml, cells/) nor a run directory "
                               "(transfers.jsonl or transfers.parquet)")
        return read_run(path, initial or "bbr")
    except RunDirectoryError as e:
        raise DatasetError(str(e)) from None


# ----------------------------------------------------------------------- rows


def _median(values) -> Optional[float]:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def candidate_metrics(by_cand: Dict[str, List[Observation]], candidates: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """Per candidate of one (path, datapath, size): the medians over its successful
    repetitions of each `METRICS` field and of the competitor's throughput, and its harm.

    Harm (Ware et al.; `measurements.harm`, higher is better) compares the competitor's median
    throughput while this candidate ran with the same while the *reference* ran: the candidate
    named like the competitor's algorithm (`native:cubic` -> `cubic`). None without a
    competitor, with competitors of different algorithms, without the reference among the
    candidates or without both throughputs."""
    everyone = [o for os_ in by_cand.values() for o in os_]
    rivals = {o.competitors for o in everyone if o.competitors}
    out: Dict[str, Dict[str, Any]] = {}
    for c in candidates:
        done = [o for o in by_cand.get(c, []) if o.ok]
        out[c] = {field: _median(getattr(o, field) for o in done) for field in METRICS.values()}
        out[c]["competitor_mbps"] = _median(o.competitor_mbps for o in done)
    reference = next(iter(rivals))[0] if len(rivals) == 1 and len(next(iter(rivals))) == 1 else None
    ref_mbps = out[reference]["competitor_mbps"] if reference in out else None
    for c in candidates:
        mbps = out[c]["competitor_mbps"]
        out[c]["harm"] = (_harm(ref_mbps, mbps, higher_is_better=True)
                          if ref_mbps is not None and ref_mbps > 0 and mbps is not None else None)
    return out


def path_columns(params: Dict[str, Any], competing: bool) -> Dict[str, Any]:
    """`has_schedule`, `has_competitor` and the last schedule step's time, added one-way delay
    and downlink loss (None without a schedule)."""
    steps = params.get("schedule") or []
    last = steps[-1] if steps else None
    return {"has_schedule": bool(steps), "has_competitor": competing,
            "step_at_s": _number(last.get("at_s")) if last else None,
            "step_delay_ms": _number(last.get("delay_ms", 0.0)) if last else None,
            "step_loss": _number(last.get("loss_downlink", 0.0)) if last else None}


def build_rows(sources: Sequence[Tuple[List[Observation], Dict[str, Any]]], window: Tuple[str, int, int],
               native=None, warn=lambda msg: None) -> Tuple[List[Dict[str, Any]], List[str], List[str]]:
    """The dataset's rows, the candidates (in first-seen order) and the feature names."""
    native = native if native is not None else native_features()
    names = list(native.FEATURE_NAMES)
    kind, samples, min_samples = window
    candidates: List[str] = []
    initials = {s[1]["initial"] for s in sources}
    if len(initials) > 1:
        raise DatasetError(f"the sources observed flows under different initial algorithms ({', '.join(sorted(initials))}); "
                           "a dataset has one")
    initial = initials.pop()
    for _, settings in sources:
        for c in settings["candidates"]:
            if c not in candidates:
                candidates.append(c)
    cols = {c: _sweep_spec.dataset_column_name(c) for c in candidates}
    if len(set(cols.values())) != len(cols):
        raise DatasetError(f"candidates {candidates} share a column name")
    # (source, path_id, datapath, file_bytes) -> candidate -> observations
    groups: Dict[Tuple, Dict[str, List[Observation]]] = defaultdict(lambda: defaultdict(list))
    for obs, settings in sources:
        for o in obs:
            groups[(settings["sweep"], o.path_id, o.datapath, o.file_bytes)][o.candidate].append(o)
    rows = []
    no_mss = no_events = 0
    for (sweep_name, pid, datapath, size), by_cand in sorted(groups.items(), key=lambda kv: kv[0]):
        tct, runs = {}, {}
        for c in candidates:
            done = [o.tct_s for o in by_cand.get(c, []) if o.ok]
            tct[c] = statistics.median(done) if done else None
            runs[c] = len(done)
        everyone = [o for os_ in by_cand.values() for o in os_]
        load_max = max((o.load1 for o in everyone if o.load1 is not None), default=None)
        metrics = candidate_metrics(by_cand, candidates)
        competing = any(o.competitors for o in everyone)
        for o in sorted(by_cand.get(initial, []), key=lambda o: o.rep):
            if not o.reports:
                no_events += 1
                continue
            mss = (o.flow or {}).get("mss")
            if not mss:
                no_mss += 1
                mss = DEFAULT_MSS
            res = native.decision_features(list(o.reports), int(mss), kind, samples, min_samples)
            feats = res["features"]
            decision_at_s = None
            if res.get("decided") and res.get("report_index") is not None:
                rep_ev = o.reports[res["report_index"]]
                start = (o.flow or {}).get("t_us", o.reports[0].get("t_us"))
                if rep_ev.get("t_us") is not None and start is not None:
                    decision_at_s = round((rep_ev["t_us"] - start) / 1e6, 6)
            p = o.params
            rtt = 2 * (p.get("delay_ms") or 0)
            trace_down, trace_up = p.get("downlink_trace"), p.get("uplink_trace")
            row = {
                "path_id": pid, "sweep": sweep_name, "datapath": datapath,
                "link_kind": "trace" if trace_down else "constant", "rtt_ms": float(rtt),
                "loss_downlink": float(p.get("loss_downlink") or 0.0), "loss_uplink": float(p.get("loss_uplink") or 0.0),
                "mbps": None if trace_down else p.get("downlink_mbps"),
                "downlink_trace": os.path.basename(trace_down) if trace_down else None,
                "uplink_trace": os.path.basename(trace_up) if trace_up else None,
                "queue_packets": p.get("queue_packets"),
                "queue_bdp": _sweep_paths.queue_bdp(p.get("queue_packets"), o.mean_mbps, rtt),
                "mean_mbps": o.mean_mbps, **path_columns(p, competing),
                "file_bytes": int(size), "rep": int(o.rep), "initial": initial,
            }
            for name in names:
                v = feats.get(name)
                row[FEATURE_PREFIX + name] = None if v is None else float(v)
            row["decision_at_s"] = decision_at_s
            for c in candidates:
                row[TCT_PREFIX + cols[c]] = tct[c]
                row[RUNS_PREFIX + cols[c]] = runs[c]
                for prefix, field in METRICS.items():
                    row[prefix + cols[c]] = metrics[c][field]
                row[HARM_PREFIX + cols[c]] = metrics[c]["harm"]
            row.update(mss=int(mss), reports=len(o.reports), load1=o.load1, load1_max=load_max,
                       started_at=o.started_at)
            rows.append(row)
    if no_events:
        warn(f"{no_events} transfer(s) of {initial} without agent report events were left out")
    if no_mss:
        warn(f"{no_mss} flow(s) without an mss in their flow event: assumed {DEFAULT_MSS} bytes")
    return rows, candidates, names


def arrow_table(rows: List[Dict[str, Any]], candidates: Sequence[str], names: Sequence[str], meta: Dict[str, Any]):
    import pyarrow as pa

    fields = [("path_id", pa.string()), ("sweep", pa.string()), ("datapath", pa.string()), ("link_kind", pa.string()),
              ("rtt_ms", pa.float64()), ("loss_downlink", pa.float64()), ("loss_uplink", pa.float64()),
              ("mbps", pa.float64()), ("downlink_trace", pa.string()), ("uplink_trace", pa.string()),
              ("queue_packets", pa.int64()), ("queue_bdp", pa.float64()), ("mean_mbps", pa.float64()),
              ("has_schedule", pa.bool_()), ("has_competitor", pa.bool_()), ("step_at_s", pa.float64()),
              ("step_delay_ms", pa.float64()), ("step_loss", pa.float64()),
              ("file_bytes", pa.int64()), ("rep", pa.int32()), ("initial", pa.string()),
              ("phase", pa.int32()), ("phase_at_s", pa.float64())]
    fields += [(FEATURE_PREFIX + n, pa.float64()) for n in names]
    fields += [("decision_at_s", pa.float64())]
    for c in candidates:
        col = _sweep_spec.dataset_column_name(c)
        fields += [(TCT_PREFIX + col, pa.float64()), (RUNS_PREFIX + col, pa.int32())]
        fields += [(prefix + col, pa.float64()) for prefix in METRICS]
        fields += [(HARM_PREFIX + col, pa.float64())]
    fields += [("mss", pa.int32()), ("reports", pa.int32()), ("load1", pa.float64()), ("load1_max", pa.float64()),
               ("started_at", pa.string())]
    schema = pa.schema(fields, metadata={b"ccswitch.dataset": json.dumps(meta).encode()})
    return pa.Table.from_pydict({n: [r.get(n) for r in rows] for n, _ in fields}, schema=schema)


def write_dataset(path: str, table) -> None:
    import pyarrow.parquet as pq

    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with results.atomic_path(path) as tmp:
        pq.write_table(table, tmp, compression="zstd")


def with_phase_rows(rows: List[Dict[str, Any]], stores: Sequence[str], samples: int) -> List[Dict[str, Any]]:
    """The rows with every step path's transfer rows replaced by one row per phase
    (learner/temporal.py): what a temporal policy learns from."""
    # temporal.py builds on this module's observations and native features
    from .temporal import phase_rows

    phased = [r for store in stores for r in phase_rows(store, samples)]
    stepped = {r["path_id"] for r in phased}
    out = [r for r in rows if r["path_id"] not in stepped]
    for r in phased:
        r.update(link_kind="constant", has_schedule=True, has_competitor=False, rep=1)
        for k in [k for k in r if k.startswith(TCT_PREFIX)]:
            r[RUNS_PREFIX + k[len(TCT_PREFIX):]] = 1 if r[k] is not None else 0
    return out + phased


def build_dataset(paths: Sequence[str], out: str, *, window: Optional[Tuple[str, int, int]] = None,
                  initial: Optional[str] = None, native=None, warn=lambda msg: None,
                  phases: bool = False) -> Dict[str, Any]:
    """Read the sources, compute the rows and write the Parquet file; returns a summary. With
    `phases`, a sweep's step paths give one row per phase instead of one per transfer."""
    if not paths:
        raise DatasetError("no source given")
    sources = [read_source(p, initial) for p in paths]
    if window is None:
        wins = {s[1]["window"] for s in sources if s[1]["window"] is not None}
        if len(wins) > 1:
            raise DatasetError(f"the sweeps declare different windows {sorted(wins)}: choose one with --window, "
                               "--samples and --min-samples")
        window = wins.pop() if wins else ("first", 20, 8)
    kind, samples, min_samples = window
    if kind not in WINDOW_KINDS:
        raise DatasetError(f"--window: must be one of {', '.join(WINDOW_KINDS)}, got {kind!r}")
    if not 1 <= min_samples <= samples:
        raise DatasetError(f"--min-samples: must be between 1 and --samples ({samples}), got {min_samples}")
    rows, candidates, names = build_rows(sources, window, native=native, warn=warn)
    if phases:
        rows = with_phase_rows(rows, [p for p in paths if is_store(p)], samples)
    meta = {"window": {"kind": kind, "samples": samples, "min_samples": min_samples}, "phases": phases,
            "initial": sources[0][1]["initial"], "candidates": candidates, "features": names,
            "sources": [os.path.relpath(os.path.abspath(p)) for p in paths],
            "scenarios": [s[1].get("scenario") for s in sources],
            "metrics": METRIC_NOTES,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    table = arrow_table(rows, candidates, names, meta)
    write_dataset(out, table)
    return {"rows": len(rows), "paths": len({r["path_id"] for r in rows}), "candidates": candidates,
            "bytes": os.path.getsize(out), "window": window}


# ----------------------------------------------------------------------- CLI


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "dataset", help="turn sweeps and runs (with agent events) into one Parquet training table",
        description="One row per transfer observed under the initial algorithm: the features the agent saw at "
                    "its first decision, the path's parameters and every candidate's TCT, throughput, delay p95 "
                    "and harm on that path and size (schema: learner/README.md). Runs of the held-out scenarios "
                    "(experiments/mystique-mix.toml, mcc-wifi.toml) are refused.")
    p.add_argument("sources", nargs="+", metavar="RUN_DIR",
                   help="a sweep's cell store (learner/sweeps/NAME) or a `ccswitch run` results directory")
    p.add_argument("-o", "--output", required=True, help="Parquet file to write")
    p.add_argument("--initial", help="the algorithm whose transfers are the observations (run directories; "
                                     "default bbr; a sweep's is its spec's)")
    p.add_argument("--window", choices=WINDOW_KINDS, help="feature window (default: the sweep spec's, else first)")
    p.add_argument("--samples", type=int, help="window samples (default: the spec's, else 20)")
    p.add_argument("--min-samples", type=int, help="samples before the first decision (default: the spec's, else 8)")
    p.add_argument("--phases", action="store_true",
                   help="a sweep's paths with a schedule give one row per phase (features from the window "
                        "before the phase ends, each candidate's figures in the phase): for temporal policies")
    p.set_defaults(func=_cli_dataset, parser=p)


def _cli_dataset(args) -> int:
    window = None
    if args.window or args.samples or args.min_samples:
        if args.samples is not None and args.samples < 1:
            args.parser.error("--samples: must be >= 1")
        samples = args.samples or 20
        window = (args.window or "first", samples, args.min_samples or min(8, samples))
    try:
        res = build_dataset(args.sources, args.output, window=window, initial=args.initial,
                            warn=lambda m: print(f"warning: {m}", file=sys.stderr), phases=args.phases)
    except (DatasetError, _sweep_spec.SweepError) as e:
        print(f"ccswitch dataset: error: {e}", file=sys.stderr)
        return 2
    kind, samples, min_samples = res["window"]
    print(f"{args.output}: {res['rows']} rows, {res['paths']} paths, candidates {', '.join(res['candidates'])}; "
          f"window {kind} {samples} (decide after {min_samples}); {res['bytes']} bytes", file=sys.stderr)
    return 0
