"""A sweep spec (learner/README.md, "Sweep spec"), parsed and checked: a mixture of path
components (constant-rate links or cellular traces, each with distributions of RTT, rate,
loss and queue depth: `Dist`), the candidate algorithms, the file sizes, the seed. Every
problem names its key; a spec naming a held-out (Verizon) trace is refused."""

from __future__ import annotations

import glob as _glob
import math
import os
import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import scenario as _scenario, traces as _traces
from .compat import DATAPATH_RENAMED
# the bounds of a path are the scenario loader's (one set of checks for both file kinds)
from .scenario import (MAX_DELAY_MS, MAX_LINK_MBPS, MAX_LOSS_RATE, MAX_QUEUE_PACKETS, MIN_LINK_MBPS,
                       file_size_problem)

try:
    import tomllib
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None


#: Trace files whose name starts with this (any case) are held out for evaluation.
HELD_OUT_TRACE_PREFIX = "verizon"


#: A spec's datapaths and the scheme kind each runs (the datapath's name is its scheme's).
DATAPATH_SCHEME = {"kernel": "kernel", "ovs": "ovs"}




class SweepError(ValueError):
    """Invalid sweep spec or store; the message names the key or file."""


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


@dataclass(frozen=True)
class TracePair:
    up: str
    down: str
    down_mbps: float  # mean rate of the downlink trace

    @property
    def name(self) -> str:
        return os.path.basename(self.down)[: -len(".down")]


@dataclass
class StepDraw:
    """`step = {...}` of a component: with probability `share`, the path changes once while
    the flow runs: from `at_s` on, the schedule element adds `delay_ms` one way and drops
    `loss_downlink` of the downlink's packets."""

    share: float
    at_s: Dist
    delay_ms: Dist
    loss_downlink: Dist


@dataclass
class CompetitorDraw:
    """`competitor = {...}` of a component: with probability `share`, a competing flow of
    `scheme` (native:ALG) starts `lead_s` before the flow under test and fetches what the
    link carries at its mean rate in `lead_s + seconds`."""

    share: float
    scheme: str
    lead_s: float
    seconds: float


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
    step: Optional[StepDraw] = None
    competitor: Optional[CompetitorDraw] = None
    #: the component's own sizes.fixed (a step path needs a flow that outlasts its step)
    fixed_sizes: Optional[List[int]] = None


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
        "queue_packets", "min_queue_packets", "step", "competitor", "sizes"}


def _share(d: dict, where: str) -> float:
    v = d.get("share")
    if not _is_num(v) or not 0 < v <= 1:
        raise SweepError(f"{where}share: required, the fraction of the component's paths that get it, in (0, 1]; "
                         f"got {v!r}")
    return float(v)


def _parse_step(v, where: str) -> StepDraw:
    if not isinstance(v, dict):
        raise SweepError(f"{where}: must be a table, e.g. {{ share = 0.5, at_s = {{ dist = \"uniform\", min = 1, "
                         "max = 3 }, delay_ms = 40, loss_downlink = 0.01 }")
    _unknown(v, ("share", "at_s", "delay_ms", "loss_downlink"), where + ".")
    for k in ("at_s", "delay_ms", "loss_downlink"):
        if k not in v:
            raise SweepError(f"{where}.{k}: required (a number or a distribution)")
    return StepDraw(share=_share(v, where + "."), at_s=parse_dist(v["at_s"], where + ".at_s", lo=0.1, hi=600),
                    delay_ms=parse_dist(v["delay_ms"], where + ".delay_ms", lo=0, hi=MAX_DELAY_MS),
                    loss_downlink=parse_dist(v["loss_downlink"], where + ".loss_downlink", lo=0, hi=MAX_LOSS_RATE,
                                             hi_open=True))


def _parse_competitor(v, where: str) -> CompetitorDraw:
    if not isinstance(v, dict):
        raise SweepError(f"{where}: must be a table, e.g. {{ share = 0.3, scheme = \"native:cubic\", lead_s = 1, "
                         "seconds = 6 }")
    _unknown(v, ("share", "scheme", "lead_s", "seconds"), where + ".")
    scheme = v.get("scheme", "native:cubic")
    if not isinstance(scheme, str) or not scheme.startswith("native:"):
        raise SweepError(f"{where}.scheme: a competing flow must be native:ALG (it runs on a server namespace of "
                         f"its own), got {scheme!r}")
    lead, secs = v.get("lead_s", 1.0), v.get("seconds", 6.0)
    if not _is_num(lead) or not 0 <= lead <= 60:
        raise SweepError(f"{where}.lead_s: must be a number of seconds in [0, 60], got {lead!r}")
    if not _is_num(secs) or not 0 < secs <= 600:
        raise SweepError(f"{where}.seconds: must be a number of seconds in (0, 600], got {secs!r}")
    return CompetitorDraw(share=_share(v, where + "."), scheme=scheme, lead_s=float(lead), seconds=float(secs))


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
    step = _parse_step(m["step"], where + "step") if "step" in m else None
    comp = _parse_competitor(m["competitor"], where + "competitor") if "competitor" in m else None
    sizes = _sizes(m["sizes"], where + "sizes", required=True) if "sizes" in m else None
    return Component(name=name, weight=float(weight), kind=kind, rtt_ms=rtt, loss_downlink=loss_down,
                     loss_uplink=loss_up, mbps=mbps, traces=pairs, queue_bdp=qb, queue_packets=qp,
                     min_queue_packets=minq, step=step, competitor=comp, fixed_sizes=sizes)


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
