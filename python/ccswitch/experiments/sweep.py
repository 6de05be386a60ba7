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

The cells run on the experiment runner itself (`runner.Runner`: nginx, mahimahi, curl,
SHA-256), one topology set-up per batch of paths, the candidates of a path one after the
other in an order rotated from path to path. A finished cell is written at once, gzipped
JSON under `STORE/cells/<path_id>/<cell key>.json.gz`: the transfer's verdict, TCT, load
average at its start, and for the `initial` algorithm the flow's agent events (its `flow`
event and the first `MAX_STORED_REPORTS` reports, in columns) from which `ccswitch dataset`
computes the features. A rerun skips every cell whose file exists. Raw run directories (logs,
full event files) go to `results/sweep-NAME/` (not committed). With a Dask cluster
(`--cluster`, `--local-workers`: distributed.py) every cell is a task of its own, in the same
rotated order; its raw directory comes back under `results/sweep-NAME/units/<cell key>/`.
"""

from __future__ import annotations

import datetime as _dt
import glob as _glob
import gzip
import hashlib
import json
import math
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import traces as _traces
from . import results, scenario as _scenario
# the bounds of a path are the scenario loader's (one set of checks for both file kinds)
from .scenario import (MAX_DELAY_MS, MAX_LINK_MBPS, MAX_LOSS_RATE, MAX_QUEUE_PACKETS, MIN_LINK_MBPS, Client,
                       ScenarioError, file_size_problem)

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None

#: Where the default held-out scenarios live, relative to the repository.
HELD_OUT_SCENARIOS = ("experiments/mystique-mix.toml", "experiments/mcc-wifi.toml")
#: Trace files whose name starts with this (any case) are held out for evaluation.
HELD_OUT_TRACE_PREFIX = "verizon"
#: Draws of one path before the sweep gives up (a component whose every draw is held out or
#: too slow is a spec error, not an endless loop).
MAX_DRAWS = 200
#: Reports of the initial algorithm's flow kept in a cell: windows of up to this many samples
#: can be recomputed from the store; a flow's later reports add nothing to a first-N window.
MAX_STORED_REPORTS = 600
#: Report fields kept in a cell (the features need the first six).
STORED_REPORT_FIELDS = ("t_us", "dp_us", "rtt_us", "acked_bytes", "lost_packets", "delivery_rate_bps",
                        "timeout", "cwnd_bytes", "bytes_in_flight", "pacing_rate_bps")
#: Row fields kept in a cell.
STORED_ROW_FIELDS = ("tct_s", "ttfb_s", "connect_s", "bytes", "http_code", "sha256_ok", "cc_observed",
                     "started_at", "wall_s", "load1", "error", "curl_exit", "algorithms", "on_report_errors")
#: A spec's datapaths and the scheme kind each runs (the datapath's name is its scheme's).
DATAPATH_SCHEME = {"kernel": "kernel", "ovs": "ovs"}
#: Datapath names of earlier versions (cells stored by them say "switch").
DATAPATH_RENAMED = {"switch": "ovs"}
#: TCP payload per packet assumed by the TCT estimate (1500-byte MTU with timestamps).
EST_MSS_BYTES = 1448
#: Delayed ACKs: packets acknowledged per ACK in the PFTK throughput model.
EST_PACKETS_PER_ACK = 2
#: Linux's minimum retransmission timeout, added to the RTT for the model's timeout.
EST_MIN_RTO_S = 0.2
#: Initial window, packets.
EST_INITIAL_WINDOW = 10
#: Share of the link a loss-based sender keeps with a queue below one BDP.
EST_SHALLOW_QUEUE_UTILISATION = 0.75
#: What `--dry-run` charges per cell beyond its transfer for the agent restart, mahimahi and
#: curl, seconds (measured 1.6 s in the small sweep; rounded up), and the share of the slowest
#: candidate's estimated TCT it charges for the transfer (the estimate is the slowest of the
#: candidates and runs about twice the measured times on lossy paths).
EST_OVERHEAD_PER_CELL_S = 2.0
EST_TCT_SHARE = 0.6


class SweepError(ValueError):
    """Invalid sweep spec or store; the message names the key or file."""


# ----------------------------------------------------------------------- distributions


@dataclass(frozen=True)
class Dist:
    """A number drawn from `kind`: "const" (values[0]), "uniform" / "loguniform" (lo, hi), or
    "choice" (values with weights)."""

    kind: str
    lo: float = 0.0
    hi: float = 0.0
    values: Tuple[float, ...] = ()
    weights: Tuple[float, ...] = ()

    def draw(self, rng: random.Random) -> float:
        if self.kind == "const":
            return self.values[0]
        if self.kind == "uniform":
            return self.lo + (self.hi - self.lo) * rng.random()
        if self.kind == "loguniform":
            return math.exp(math.log(self.lo) + (math.log(self.hi) - math.log(self.lo)) * rng.random())
        return self.values[_weighted_index(rng, self.weights)]

    def support(self) -> Tuple[float, float]:
        if self.kind in ("uniform", "loguniform"):
            return self.lo, self.hi
        return min(self.values), max(self.values)


def _weighted_index(rng: random.Random, weights: Sequence[float]) -> int:
    x = rng.random() * sum(weights)
    acc = 0.0
    for i, w in enumerate(weights):
        acc += w
        if x < acc:
            return i
    return len(weights) - 1


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _unknown(d: dict, allowed, where: str) -> None:
    extra = sorted(set(d) - set(allowed))
    if extra:
        raise SweepError(f"{where}{extra[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")


def parse_dist(v, where: str, *, lo: float, hi: float, hi_open: bool = False) -> Dist:
    """A number, or {dist = "uniform"|"loguniform", min, max}, or {dist = "choice", values,
    weights (optional)}; every value within [lo, hi] (or [lo, hi))."""

    def check(x, w):
        if not _is_num(x) or x < lo or (x >= hi if hi_open else x > hi):
            rb = ")" if hi_open else "]"
            raise SweepError(f"{w}: must be a number in [{lo:g}, {hi:g}{rb}, got {x!r}")
        return float(x)

    if _is_num(v):
        return Dist("const", values=(check(v, where),))
    if not isinstance(v, dict):
        raise SweepError(f"{where}: must be a number or a table {{ dist = \"uniform\"|\"loguniform\"|\"choice\", ... }}, "
                         f"got {v!r}")
    kind = v.get("dist")
    if kind in ("uniform", "loguniform"):
        _unknown(v, ("dist", "min", "max"), where + ".")
        for k in ("min", "max"):
            if k not in v:
                raise SweepError(f"{where}.{k}: required for dist = {kind!r}")
        a, b = check(v["min"], f"{where}.min"), check(v["max"], f"{where}.max")
        if not b > a:
            raise SweepError(f"{where}.max: must be greater than min ({a:g}), got {b:g}")
        if kind == "loguniform" and a <= 0:
            raise SweepError(f"{where}.min: must be > 0 for dist = \"loguniform\", got {a:g}")
        return Dist(kind, lo=a, hi=b)
    if kind == "choice":
        _unknown(v, ("dist", "values", "weights"), where + ".")
        values = v.get("values")
        if not isinstance(values, list) or not values:
            raise SweepError(f"{where}.values: required, a non-empty list of numbers")
        vals = tuple(check(x, f"{where}.values[{i}]") for i, x in enumerate(values))
        weights = v.get("weights", [1.0] * len(vals))
        if not isinstance(weights, list) or len(weights) != len(vals):
            raise SweepError(f"{where}.weights: must be a list of {len(vals)} numbers (one per value), got {weights!r}")
        for i, w in enumerate(weights):
            if not _is_num(w) or w < 0:
                raise SweepError(f"{where}.weights[{i}]: must be a number >= 0, got {w!r}")
        if not sum(weights) > 0:
            raise SweepError(f"{where}.weights: at least one must be > 0")
        return Dist("choice", values=vals, weights=tuple(float(w) for w in weights))
    raise SweepError(f"{where}.dist: must be \"uniform\", \"loguniform\" or \"choice\", got {kind!r}")


# ----------------------------------------------------------------------- the spec


@dataclass(frozen=True)
class TracePair:
    up: str
    down: str
    down_mbps: float  # mean rate of the downlink trace

    @property
    def name(self) -> str:
        return os.path.basename(self.down)[: -len(".down")]


@dataclass
class Component:
    """One part of the path mixture."""

    name: str
    weight: float
    kind: str  # "constant" | "trace"
    rtt_ms: Dist
    loss_downlink: Dist
    loss_uplink: Dist
    mbps: Optional[Dist] = None
    traces: Tuple[TracePair, ...] = ()
    queue_bdp: Optional[Dist] = None
    queue_packets: Optional[Dist] = None
    min_queue_packets: int = 8


@dataclass
class Spec:
    name: str
    seed: int
    paths: int
    candidates: List[str]
    initial: str
    components: List[Component]
    fixed_sizes: List[int]
    large_sizes: List[int] = field(default_factory=list)
    max_est_s: float = 25.0
    datapaths: List[str] = field(default_factory=lambda: ["kernel"])
    repetitions: int = 1
    timeout_s: float = 90.0
    agent_settle_s: float = 0.5
    batch_paths: int = 8
    window_kind: str = "first"
    window_samples: int = 20
    window_min_samples: int = 8
    held_out: List[str] = field(default_factory=list)
    description: str = ""
    source: Optional[str] = None
    text: str = ""

    def schemes(self) -> List[str]:
        """Every scheme a path runs: each candidate on each datapath."""
        return [f"{DATAPATH_SCHEME[dp]}:{c}" for dp in self.datapaths for c in self.candidates]


_TOP = {"name", "description", "seed", "paths", "repetitions", "timeout_s", "agent_settle_s", "batch_paths",
        "datapaths", "candidates", "initial", "held_out", "window", "sizes", "mix"}
_MIX = {"name", "weight", "kind", "rtt_ms", "mbps", "traces", "loss_downlink", "loss_uplink", "queue_bdp",
        "queue_packets", "min_queue_packets"}


def repo_root() -> str:
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def is_held_out_trace(path: str) -> bool:
    return os.path.basename(path).lower().startswith(HELD_OUT_TRACE_PREFIX)


_TRACE_RATES: Dict[str, float] = {}


def trace_mean_mbps(path: str) -> float:
    """Mean rate of a trace as mahimahi replays it, Mbit/s (cached per file)."""
    real = os.path.realpath(path)
    if real not in _TRACE_RATES:
        _TRACE_RATES[real] = _traces.average_mbps(_traces.read_trace(real))
    return _TRACE_RATES[real]


def _parse_traces(v, where: str, base_dir: str) -> Tuple[TracePair, ...]:
    if not isinstance(v, list) or not v:
        raise SweepError(f"{where}: required for kind = \"trace\": a non-empty list of .down trace files or globs "
                         "(each with its .up beside it)")
    pairs: Dict[str, TracePair] = {}
    for i, pat in enumerate(v):
        w = f"{where}[{i}]"
        if not isinstance(pat, str) or not pat.endswith(".down"):
            raise SweepError(f"{w}: must be a .down trace file or a glob ending in .down, got {pat!r}")
        full = pat if os.path.isabs(pat) else os.path.normpath(os.path.join(base_dir, pat))
        named = sorted(_glob.glob(full)) if _glob.has_magic(full) else [full]
        held = sorted({os.path.basename(p) for p in named + [full] if is_held_out_trace(p)})
        if held:
            raise SweepError(f"{w}: {pat!r} names held-out trace(s) {', '.join(held)}: the Verizon traces are "
                             "held out for evaluation and no sweep may train on them")
        if not named or not all(os.path.isfile(p) for p in named):
            raise SweepError(f"{w}: no trace file matches {full}")
        for down in named:
            up = down[: -len(".down")] + ".up"
            if not os.path.isfile(up):
                raise SweepError(f"{w}: {down} has no uplink trace {up} beside it")
            try:
                rate = trace_mean_mbps(down)
            except (OSError, _traces.TraceError) as e:
                raise SweepError(f"{w}: cannot read {down}: {e}") from None
            pairs[down] = TracePair(up=up, down=down, down_mbps=rate)
    return tuple(pairs[k] for k in sorted(pairs))


def _parse_component(m, i: int, base_dir: str) -> Component:
    where = f"mix[{i}]."
    if not isinstance(m, dict):
        raise SweepError(f"mix[{i}]: must be a table ([[mix]])")
    _unknown(m, _MIX, where)
    name = m.get("name")
    if not isinstance(name, str) or not name:
        raise SweepError(f"{where}name: required, a non-empty string")
    weight = m.get("weight")
    if not _is_num(weight) or weight <= 0:
        raise SweepError(f"{where}weight: required, a number > 0, got {weight!r}")
    kind = m.get("kind")
    if kind not in ("constant", "trace"):
        raise SweepError(f"{where}kind: must be \"constant\" or \"trace\", got {kind!r}")
    if "rtt_ms" not in m:
        raise SweepError(f"{where}rtt_ms: required (a number or a distribution)")
    rtt = parse_dist(m["rtt_ms"], where + "rtt_ms", lo=0, hi=2 * MAX_DELAY_MS)
    loss_down = parse_dist(m.get("loss_downlink", 0), where + "loss_downlink", lo=0, hi=MAX_LOSS_RATE, hi_open=True)
    loss_up = parse_dist(m.get("loss_uplink", 0), where + "loss_uplink", lo=0, hi=MAX_LOSS_RATE, hi_open=True)
    mbps = None
    pairs: Tuple[TracePair, ...] = ()
    if kind == "constant":
        if "traces" in m:
            raise SweepError(f"{where}traces: only for kind = \"trace\"")
        if "mbps" not in m:
            raise SweepError(f"{where}mbps: required for kind = \"constant\"")
        mbps = parse_dist(m["mbps"], where + "mbps", lo=MIN_LINK_MBPS, hi=MAX_LINK_MBPS)
    else:
        if "mbps" in m:
            raise SweepError(f"{where}mbps: only for kind = \"constant\" (a trace brings its own rate)")
        pairs = _parse_traces(m.get("traces"), where + "traces", base_dir)
    if ("queue_bdp" in m) == ("queue_packets" in m):
        raise SweepError(f"{where}queue_bdp: give exactly one of queue_bdp (bandwidth-delay products of the "
                         "link's mean rate) and queue_packets")
    qb = parse_dist(m["queue_bdp"], where + "queue_bdp", lo=0.01, hi=1000) if "queue_bdp" in m else None
    qp = parse_dist(m["queue_packets"], where + "queue_packets", lo=1, hi=MAX_QUEUE_PACKETS) if "queue_packets" in m else None
    minq = m.get("min_queue_packets", 8)
    if not _is_int(minq) or minq < 1:
        raise SweepError(f"{where}min_queue_packets: must be an integer >= 1, got {minq!r}")
    return Component(name=name, weight=float(weight), kind=kind, rtt_ms=rtt, loss_downlink=loss_down,
                     loss_uplink=loss_up, mbps=mbps, traces=pairs, queue_bdp=qb, queue_packets=qp,
                     min_queue_packets=minq)


def _int_key(d, key, where, *, minimum, default=None):
    if key not in d:
        if default is None:
            raise SweepError(f"{where}{key}: required")
        return default
    v = d[key]
    if not _is_int(v) or v < minimum:
        raise SweepError(f"{where}{key}: must be an integer >= {minimum}, got {v!r}")
    return v


def _sizes(v, where: str, *, required: bool) -> List[int]:
    if v is None and not required:
        return []
    if not isinstance(v, list) or (required and not v):
        raise SweepError(f"{where}: must be a {'non-empty ' if required else ''}list of file sizes in bytes, got {v!r}")
    for i, s in enumerate(v):
        if not _is_int(s) or s < 1 or file_size_problem(s):
            raise SweepError(f"{where}[{i}]: must be an integer from 1 to 4 GiB, got {s!r}")
    if len(set(v)) != len(v):
        raise SweepError(f"{where}: duplicate sizes {v!r}")
    return list(v)


def parse_spec(data: Dict[str, Any], *, source: Optional[str] = None, text: str = "") -> Spec:
    """Validate a parsed sweep spec; raises SweepError naming the bad key."""
    if not isinstance(data, dict):
        raise SweepError("spec: must be a TOML table")
    _unknown(data, _TOP, "")
    name = data.get("name")
    if not isinstance(name, str) or not _scenario._NAME_RE.match(name):
        raise SweepError(f"name: required, must match {_scenario._NAME_RE.pattern}, got {name!r}")
    seed = _int_key(data, "seed", "", minimum=0)
    n_paths = _int_key(data, "paths", "", minimum=1)
    reps = _int_key(data, "repetitions", "", minimum=1, default=1)
    batch = _int_key(data, "batch_paths", "", minimum=1, default=8)
    timeout = data.get("timeout_s", 90.0)
    if not _is_num(timeout) or not 0 < timeout <= 3600:
        raise SweepError(f"timeout_s: must be a number in (0, 3600], got {timeout!r}")
    settle = data.get("agent_settle_s", 0.5)
    if not _is_num(settle) or not 0 <= settle <= 60:
        raise SweepError(f"agent_settle_s: must be a number in [0, 60], got {settle!r}")
    dps = data.get("datapaths", ["kernel"])
    if not isinstance(dps, list) or not dps or len(set(map(str, dps))) != len(dps):
        raise SweepError(f"datapaths: must be a non-empty list of distinct datapaths, got {dps!r}")
    for i, dp in enumerate(dps):
        if dp in DATAPATH_RENAMED:
            raise SweepError(f'datapaths[{i}]: "{dp}": renamed, write "{DATAPATH_RENAMED[dp]}" '
                             '(the datapaths are "kernel" and "ovs")')
        if dp not in DATAPATH_SCHEME:
            raise SweepError(f"datapaths[{i}]: must be \"kernel\" (kernel:ALG) or \"ovs\" (ovs:ALG), got {dp!r}")
    cands = data.get("candidates")
    if not isinstance(cands, list) or not cands:
        raise SweepError(f"candidates: required, a non-empty list of algorithms (e.g. [\"bbr\", \"cubic\"]), got {cands!r}")
    for i, c in enumerate(cands):
        if not isinstance(c, str) or not _scenario._ALG_TEXT_RE.match(c):
            raise SweepError(f"candidates[{i}]: must be an algorithm (NAME or NAME:PARAM=VALUE,...), got {c!r}")
        if c.startswith(_scenario.POLICY_PREFIX):
            raise SweepError(f"candidates[{i}]: {c!r}: a policy is not a candidate (labels are fixed algorithms)")
        if dataset_column_name(c) in {dataset_column_name(x) for x in cands[:i]}:
            raise SweepError(f"candidates[{i}]: {c!r} repeats an earlier candidate (or its column name)")
    initial = data.get("initial")
    if initial not in cands:
        raise SweepError(f"initial: must be one of the candidates ({', '.join(cands)}): its transfers are the "
                         f"observations; got {initial!r}")
    win = data.get("window", {})
    if not isinstance(win, dict):
        raise SweepError("window: must be a table")
    _unknown(win, ("kind", "samples", "min_samples"), "window.")
    kind = win.get("kind", "first")
    if kind not in ("first", "sliding"):
        raise SweepError(f"window.kind: must be \"first\" or \"sliding\", got {kind!r}")
    samples = _int_key(win, "samples", "window.", minimum=1, default=20)
    min_samples = _int_key(win, "min_samples", "window.", minimum=1, default=min(8, samples))
    if min_samples > samples:
        raise SweepError(f"window.min_samples: must be at most samples ({samples}), got {min_samples}")
    sizes = data.get("sizes")
    if not isinstance(sizes, dict):
        raise SweepError("sizes: required table: fixed = [BYTES, ...], optional large = [...] and max_est_s")
    _unknown(sizes, ("fixed", "large", "max_est_s"), "sizes.")
    fixed = _sizes(sizes.get("fixed"), "sizes.fixed", required=True)
    large = _sizes(sizes.get("large"), "sizes.large", required=False)
    if set(fixed) & set(large):
        raise SweepError(f"sizes.large: {sorted(set(fixed) & set(large))[0]} is also a fixed size")
    max_est = sizes.get("max_est_s", round(0.3 * timeout, 3))
    if not _is_num(max_est) or not 0 < max_est <= timeout:
        raise SweepError(f"sizes.max_est_s: must be a number in (0, timeout_s = {timeout:g}], got {max_est!r}")
    base_dir = os.path.dirname(os.path.abspath(source)) if source else os.getcwd()
    held = data.get("held_out", [])
    if not isinstance(held, list) or not all(isinstance(h, str) for h in held):
        raise SweepError(f"held_out: must be a list of scenario files, got {held!r}")
    held = [h if os.path.isabs(h) else os.path.normpath(os.path.join(base_dir, h)) for h in held]
    mix = data.get("mix")
    if not isinstance(mix, list) or not mix:
        raise SweepError("mix: required, one or more [[mix]] tables")
    comps = [_parse_component(m, i, base_dir) for i, m in enumerate(mix)]
    names = [c.name for c in comps]
    if len(set(names)) != len(names):
        raise SweepError(f"mix: duplicate component name {sorted(n for n in names if names.count(n) > 1)[0]!r}")
    desc = data.get("description", "")
    if not isinstance(desc, str):
        raise SweepError("description: must be a string")
    return Spec(name=name, seed=seed, paths=n_paths, candidates=list(cands), initial=initial, components=comps,
                fixed_sizes=fixed, large_sizes=sorted(large), max_est_s=float(max_est), datapaths=list(dps),
                repetitions=reps, timeout_s=float(timeout), agent_settle_s=float(settle), batch_paths=batch,
                window_kind=kind, window_samples=samples, window_min_samples=min_samples, held_out=held,
                description=desc, source=source, text=text)


def loads_spec(text: str, *, source: Optional[str] = None) -> Spec:
    if tomllib is None:  # pragma: no cover
        raise SweepError("reading sweep specs needs Python >= 3.11 (tomllib)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SweepError(f"TOML syntax error: {e}") from None
    return parse_spec(data, source=source, text=text)


def load_spec(path) -> Spec:
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SweepError(f"{path}: cannot read the sweep spec: {e.strerror}") from None
    try:
        return loads_spec(text, source=os.path.abspath(path))
    except SweepError as e:
        raise SweepError(f"{path}: {e}") from None


def dataset_column_name(alg: str) -> str:
    """What a candidate is called in dataset columns (`tct_<this>`): anything but letters,
    digits and '_' becomes '_' (`cubic:beta=0.8` -> `cubic_beta_0_8`)."""
    return "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in alg)


# ----------------------------------------------------------------------- paths


def path_params(client: Client) -> Dict[str, Any]:
    """The parameters that make a path, as the scenario loader's client carries them: mm-delay,
    mm-loss each way, constant rates or trace files, droptail queue."""
    f = client.path_fields()
    return {k: f[k] for k in ("delay_ms", "loss_downlink", "loss_uplink", "downlink_mbps", "uplink_mbps",
                              "downlink_trace", "uplink_trace", "queue_packets")}


def params_from_row(row: Dict[str, Any]) -> Dict[str, Any]:
    """`path_params` from a transfer row (transfers.jsonl carries the client's path fields)."""
    return {k: row.get(k) for k in ("delay_ms", "loss_downlink", "loss_uplink", "downlink_mbps", "uplink_mbps",
                                     "downlink_trace", "uplink_trace", "queue_packets")}


def _digest(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def path_id(params: Dict[str, Any]) -> str:
    """A path's name: a hash of its parameters (16 hex digits)."""
    return _digest({"path": params})[:16]


def cell_key(params: Dict[str, Any], scheme: str, file_bytes: int, rep: int) -> str:
    """A cell's name: a hash of its path's parameters, the scheme (datapath and algorithm), the
    file size and the repetition (1-based), 20 hex digits. The timeout is not part of it."""
    return _digest({"path": params, "scheme": scheme, "file_bytes": int(file_bytes), "rep": int(rep)})[:20]


def _comparable(params: Dict[str, Any]) -> Tuple:
    """Parameters compared for hold-out: trace files by their real path."""
    out = dict(params)
    for k in ("downlink_trace", "uplink_trace"):
        if out.get(k):
            out[k] = os.path.realpath(out[k])
    return tuple(sorted(out.items()))


def held_out_paths(spec: Spec) -> Dict[Tuple, str]:
    """Every client of the held-out scenarios (the defaults plus the spec's `held_out`), by its
    comparable parameters -> "scenario.toml clients[i] (name)"."""
    files = [os.path.join(repo_root(), f) for f in HELD_OUT_SCENARIOS] + list(spec.held_out)
    out: Dict[Tuple, str] = {}
    for f in files:
        try:
            sc = _scenario.load_scenario(f, check_files=False)
        except ScenarioError as e:
            raise SweepError(f"held-out scenario: {e}") from None
        for i, c in enumerate(sc.clients):
            out.setdefault(_comparable(path_params(c)), f"{os.path.basename(f)} clients[{i}] ({c.name})")
    return out


@dataclass
class Path:
    index: int
    component: str
    client_table: Dict[str, Any]  # the [[clients]] table (without name and file sizes)
    params: Dict[str, Any]
    mean_mbps: float
    sizes: List[int]
    est_slowest_s: Dict[int, float]
    redraws: List[str] = field(default_factory=list)

    @property
    def id(self) -> str:
        return path_id(self.params)

    @property
    def client_name(self) -> str:
        return f"p{self.index:05d}-{self.id[:8]}"

    @property
    def rtt_ms(self) -> int:
        return 2 * self.params["delay_ms"]

    @property
    def queue_bdp(self) -> Optional[float]:
        return queue_bdp(self.params["queue_packets"], self.mean_mbps, self.rtt_ms)

    def describe(self) -> str:
        c = client_of(self.client_table, self.client_name, self.sizes)
        return c.describe_path()


def queue_bdp(queue_packets: Optional[int], mean_mbps: Optional[float], rtt_ms: float) -> Optional[float]:
    if queue_packets is None or not mean_mbps or not rtt_ms:
        return None
    return queue_packets / (mean_mbps * 1e6 * rtt_ms / 1000 / 12000)


def client_of(table: Dict[str, Any], name: str, sizes: Sequence[int]) -> Client:
    """The scenario loader's client for a path table."""
    doc = {"name": "path", "schemes": ["native:cubic"], "timeout_s": 3600,
           "clients": [dict(table, name=name, file_sizes=list(sizes))]}
    return _scenario.parse_scenario(doc, check_files=False).clients[0]


def estimate_slowest_tct_s(rtt_ms: float, mean_mbps: float, loss: float, queue_bdp_: Optional[float],
                           size: int) -> float:
    """A deliberately rough estimate of the slowest candidate's TCT, used only to keep paths
    where every candidate finishes well within the timeout: a loss-based sender (the slowest
    kind on lossy or shallow-buffered paths) at the PFTK model's throughput (Padhye et al.,
    with retransmission timeouts) capped by the link, plus slow start and two RTTs of
    handshake and request."""
    rtt = max(rtt_ms, 1.0) / 1000
    link_bps = mean_mbps * 1e6
    if queue_bdp_ is not None and queue_bdp_ < 1:
        link_bps *= EST_SHALLOW_QUEUE_UTILISATION
    rate = link_bps
    if loss > 0:
        b, p = EST_PACKETS_PER_ACK, loss
        t0 = rtt + EST_MIN_RTO_S
        denom = rtt * math.sqrt(2 * b * p / 3) + t0 * min(1.0, 3 * math.sqrt(3 * b * p / 8)) * p * (1 + 32 * p * p)
        rate = min(rate, EST_MSS_BYTES * 8 / denom)
    bdp_bytes = link_bps / 8 * rtt
    rounds = max(0.0, math.log2(max(1.0, min(size, bdp_bytes) / (EST_INITIAL_WINDOW * EST_MSS_BYTES)))) + 1
    return 2 * rtt + rounds * rtt + size * 8 / rate


def _draw_table(comp: Component, rng: random.Random) -> Tuple[Dict[str, Any], float]:
    """One draw of a component: the client table and the link's mean downlink rate."""
    rtt = comp.rtt_ms.draw(rng)
    delay = max(0, int(round(rtt / 2)))
    table: Dict[str, Any] = {"delay_ms": delay}
    if comp.kind == "constant":
        mbps = float(f"{comp.mbps.draw(rng):.2g}") if comp.mbps.kind != "const" else comp.mbps.values[0]
        mbps = min(max(mbps, MIN_LINK_MBPS), MAX_LINK_MBPS)
        table["link"] = {"mbps": mbps}
        mean = mbps
    else:
        pair = comp.traces[int(rng.random() * len(comp.traces)) % len(comp.traces)]
        table["link"] = {"uplink": pair.up, "downlink": pair.down}
        mean = pair.down_mbps
    for k, d in (("loss_downlink", comp.loss_downlink), ("loss_uplink", comp.loss_uplink)):
        x = d.draw(rng)
        x = x if d.kind in ("const", "choice") else float(f"{x:.2g}")
        if x > 0:
            table[k] = x
    if comp.queue_bdp is not None:
        bdp = mean * 1e6 * (2 * delay) / 1000 / 12000
        table["queue_packets"] = max(comp.min_queue_packets, int(round(comp.queue_bdp.draw(rng) * bdp)))
    else:
        table["queue_packets"] = max(comp.min_queue_packets, int(round(comp.queue_packets.draw(rng))))
    return table, mean


def sample_paths(spec: Spec, *, held_out: Optional[Dict[Tuple, str]] = None,
                 log: Callable[[str], None] = lambda m: None) -> List[Path]:
    """The spec's paths, in order. Path i comes from its own generator, seeded with (seed, i):
    the component by weight, then each parameter from its distribution; a draw equal to a
    held-out path or to an earlier path of the sweep (the cellular component, with few traces
    and rounded RTTs, draws the same path twice; the two would share cell keys), or on which the
    slowest candidate is not expected to fetch the smallest file within `sizes.max_est_s`, is
    drawn again (logged, and recorded in `Path.redraws`)."""
    held = held_out_paths(spec) if held_out is None else held_out
    weights = [c.weight for c in spec.components]
    out = []
    drawn: Dict[Tuple, int] = {}
    for i in range(spec.paths):
        rng = random.Random(f"ccswitch-sweep/{spec.seed}/{i}")
        redraws: List[str] = []
        for _ in range(MAX_DRAWS):
            comp = spec.components[_weighted_index(rng, weights)]
            table, mean = _draw_table(comp, rng)
            client = client_of(table, "draw", spec.fixed_sizes)
            params = path_params(client)
            key = _comparable(params)
            if key in held or key in drawn:
                why = f"held-out path of {held[key]}" if key in held else f"same path as path {drawn[key]}"
                redraws.append(why)
                log(f"path {i}: drew {client.describe_path()}, the {why}; drawing again")
                continue
            qb = queue_bdp(params["queue_packets"], mean, 2 * params["delay_ms"])
            loss = params["loss_downlink"]
            est = {s: round(estimate_slowest_tct_s(2 * params["delay_ms"], mean, loss, qb, s), 2)
                   for s in spec.fixed_sizes + spec.large_sizes}
            slow = [s for s in spec.fixed_sizes if est[s] > spec.max_est_s]
            if slow:
                why = (f"too slow: {slow[0]} bytes estimated at {est[slow[0]]:g} s for the slowest candidate "
                       f"(sizes.max_est_s = {spec.max_est_s:g})")
                redraws.append(why)
                log(f"path {i}: drew {client.describe_path()}, {why}; drawing again")
                continue
            fitting = [s for s in spec.large_sizes if est[s] <= spec.max_est_s]
            sizes = list(spec.fixed_sizes) + ([fitting[-1]] if fitting else [])
            drawn[key] = i
            out.append(Path(index=i, component=comp.name, client_table=table, params=params, mean_mbps=mean,
                            sizes=sizes, est_slowest_s={s: est[s] for s in sizes}, redraws=redraws))
            break
        else:
            raise SweepError(f"path {i}: {MAX_DRAWS} draws in a row were held out or too slow (last: {redraws[-1]}); "
                             "widen the mix's distributions or raise sizes.max_est_s")
    return out


@dataclass(frozen=True)
class Cell:
    path: Path
    scheme: str  # "kernel:bbr"
    file_bytes: int
    rep: int  # 1-based

    @property
    def datapath(self) -> str:
        return next(dp for dp, k in DATAPATH_SCHEME.items() if self.scheme.startswith(k + ":"))

    @property
    def candidate(self) -> str:
        return self.scheme.split(":", 1)[1]

    @property
    def key(self) -> str:
        return cell_key(self.path.params, self.scheme, self.file_bytes, self.rep)

    def __hash__(self):
        return hash(self.key)


def cells_of(spec: Spec, paths: Sequence[Path]) -> List[Cell]:
    """Every cell, in run order: path by path; within a path, by repetition, then file size,
    then scheme, the schemes rotated by one from path to path (no candidate always runs first
    after a topology set-up or always next to the same neighbour)."""
    schemes = spec.schemes()
    out = []
    for p in paths:
        k = p.index % len(schemes)
        order = schemes[k:] + schemes[:k]
        for rep in range(1, spec.repetitions + 1):
            for size in p.sizes:
                for s in order:
                    out.append(Cell(p, s, size, rep))
    return out


# ----------------------------------------------------------------------- the cell store


def cell_path(store: str, cell: Cell) -> str:
    return os.path.join(store, "cells", cell.path.id, cell.key + ".json.gz")


def write_gz_json_atomic(path: str, doc: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    data = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    with results.atomic_path(path) as tmp:
        # mtime=0: the same cell gives the same bytes (clean diffs when committed)
        with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0) as f:
            f.write(data)


def read_gz_json(path: str) -> dict:
    try:
        with gzip.open(path, "rb") as f:
            return json.loads(f.read())
    except (OSError, ValueError) as e:
        raise SweepError(f"{path}: not a readable cell: {e}") from None


def compact_reports(reports: Sequence[dict], limit: int = MAX_STORED_REPORTS) -> Dict[str, Any]:
    """The first `limit` reports as columns (times as differences from the previous report)."""
    kept = list(reports[:limit])
    cols: Dict[str, Any] = {"n": len(kept), "total": len(reports)}
    for k in STORED_REPORT_FIELDS:
        vals = [r.get(k) for r in kept]
        if k == "timeout":
            vals = [1 if v else 0 for v in vals]
        if k in ("t_us", "dp_us") and all(isinstance(v, int) for v in vals):
            vals = [v - (vals[i - 1] if i else 0) for i, v in enumerate(vals)]
            cols[k + "_delta"] = vals
            continue
        cols[k] = vals
    return cols


def expand_reports(cols: Dict[str, Any]) -> List[dict]:
    """The reports `compact_reports` stored, as the agent's report events (without `event`)."""
    n = cols["n"]
    out = [{"event": "report"} for _ in range(n)]
    for k in STORED_REPORT_FIELDS:
        if k + "_delta" in cols:
            acc = 0
            for r, d in zip(out, cols[k + "_delta"]):
                acc += d
                r[k] = acc
        elif k in cols:
            for r, v in zip(out, cols[k]):
                r[k] = bool(v) if k == "timeout" else v
    return out


class CellStore:
    """`STORE/spec.toml`, `STORE/paths.jsonl` and `STORE/cells/<path_id>/<key>.json.gz`."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)

    def has(self, cell: Cell) -> bool:
        return os.path.exists(cell_path(self.root, cell))

    def write_spec(self, spec: Spec, paths: Sequence[Path]) -> Optional[str]:
        """Keep the spec and its paths; returns a note if an earlier spec differed."""
        os.makedirs(self.root, exist_ok=True)
        note = None
        old = os.path.join(self.root, "spec.toml")
        if os.path.exists(old):
            with open(old, encoding="utf-8") as f:
                if f.read() != spec.text:
                    note = ("the spec differs from the one this store was made with; finished cells whose "
                            "parameters still occur are kept, the others are not used")
        results.write_text_atomic(old, spec.text)
        lines = []
        for p in paths:
            lines.append(json.dumps({"index": p.index, "path_id": p.id, "component": p.component,
                                     "path": p.describe(), "params": p.params, "mean_mbps": round(p.mean_mbps, 4),
                                     "queue_bdp": None if p.queue_bdp is None else round(p.queue_bdp, 4),
                                     "sizes": p.sizes, "est_slowest_s": {str(k): v for k, v in p.est_slowest_s.items()},
                                     "redraws": p.redraws}, sort_keys=True))
        results.write_text_atomic(os.path.join(self.root, "paths.jsonl"), "".join(line + "\n" for line in lines))
        return note

    def write_cell(self, spec: Spec, cell: Cell, row: dict, flow_events: Optional[List[dict]], raw_dir: str) -> str:
        doc: Dict[str, Any] = {
            "format": "ccswitch-sweep-cell", "version": 1, "sweep": spec.name, "key": cell.key,
            "path_id": cell.path.id, "path": cell.path.params, "datapath": cell.datapath,
            "candidate": cell.candidate, "scheme": cell.scheme, "file_bytes": cell.file_bytes, "rep": cell.rep,
            "mean_mbps": cell.path.mean_mbps, "component": cell.path.component,
            "row": {k: row.get(k) for k in STORED_ROW_FIELDS},
            "raw": {"run": raw_dir, "transfer": row.get("transfer"), "events": row.get("events")},
        }
        if flow_events is not None:
            flow = next((e for e in flow_events if e.get("event") == "flow"), None)
            reports = [e for e in flow_events if e.get("event") == "report"]
            close = next((e for e in flow_events if e.get("event") == "close"), None)
            doc["flow"] = {"flow": flow, "close": close, "reports": compact_reports(reports)}
        path = cell_path(self.root, cell)
        write_gz_json_atomic(path, doc)
        return path

    def cells(self) -> List[dict]:
        """Every stored cell, in a stable order."""
        out = []
        for f in sorted(_glob.glob(os.path.join(self.root, "cells", "*", "*.json.gz"))):
            out.append(read_gz_json(f))
        return out


# ----------------------------------------------------------------------- running


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
