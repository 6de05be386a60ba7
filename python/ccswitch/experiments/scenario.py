"""Scenario files: what to run (clients, links, file sizes, schemes, repetitions).

A scenario is a TOML file; see experiments/README.md for the format. `load_scenario` parses
and validates it and returns a `Scenario`. Validation does not stop at the first problem: every
key is checked (a client or scheme whose value is unusable is left out, and the rest is still
checked), and one `ScenarioError` lists them all, one line "KEY: message" each, e.g.
``clients[1].delay_ms: must be an integer >= 0, got -3``; its `.problems` holds the lines.

Schemes that run on the agent (`kernel:ALG`, `ovs:ALG`) are judged by the agent itself
(`check_schemes`); `load_scenario_report` joins its refusals to the file's own problems, so a
user sees everything wrong with a file at once.

A client carries, besides its path (link, delay, loss, queue):
- nothing more: one flow of the scheme under test per unit (transfer);
- `flows`: several flows on its bottleneck, competing `native:ALG` flows among them (`Flow`);
- `workload`: web requests arriving as a Poisson process with heavy-tailed sizes (`Workload`);
- `schedule`: delay and loss that change while the flows run (`ScheduleStep`), applied by an
  element of ccswitch's own in series with mahimahi's static shells. Its loss is drawn per
  packet, or with `loss_draws = "segment"` per TCP segment (`LOSS_DRAWS`), so that every
  scheme of a repetition loses the same bytes.
"""

from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

# old spellings of schemes and keys: refused in a scenario, read in a stored run's copy
from .compat import RENAMED_KINDS, canonical_scheme, renamed_scenario_keys, renamed_scheme_message

try:
    import tomllib  # Python >= 3.11
except ModuleNotFoundError:  # pragma: no cover
    tomllib = None

#: Kernel congestion controls built into this kernel (ENVIRONMENT.md).
NATIVE_ALGORITHMS = ("reno", "cubic", "bbr")
#: What `kernel:ALG` / `ovs:ALG` may hold before the agent judges it: one word without
#: spaces or control characters. Names, parameters (`cubic:beta=0.8`) and Python classes
#: (`py:MODULE:CLASS`) are checked by the agent itself before the first transfer
#: (`check_schemes`), so the harness never keeps its own copy of the agent's list.
_ALG_TEXT_RE = re.compile(r"^[!-~]{1,200}$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
#: `policy:TARGET[:PARAM=VALUE,...]`: TARGET is a built-in name or a TOML file; the parameters
#: override the policy's [params] (values are numbers or names). Built-in names, like
#: algorithms, are the agent's to judge (`check_schemes`).
_POLICY_PARAMS = r"[a-z][a-z0-9_.]*=[A-Za-z0-9_.+-]+(,[a-z][a-z0-9_.]*=[A-Za-z0-9_.+-]+)*"
_POLICY_RE = re.compile(r"^(?P<target>[^:]+)(:(?P<params>" + _POLICY_PARAMS + "))?$")
POLICY_PREFIX = "policy:"
#: What `Scenario.analysis` may name (analysis/handover.py) and what `plots` may ask for.
ANALYSES = ("smoothness", "mix", "mcc")
PLOTS = ("flows",)

DEFAULT_TIMEOUT_S = 120.0
#: Link rates a scenario may ask for, Mbit/s. mahimahi's mm-link moves every packet through
#: user space: on this kind of machine (2 cores, nested VM) a 100 MB download through a
#: constant-rate link measured 192 Mbit/s asked 200, 900 asked 1000 and 785 asked 5000, so
#: above 1000 the figure is the CPU's, not the link's (and the trace for 100000 Mbit/s has 25
#: million lines). Below one 1500-byte packet per second (0.012 Mbit/s) a SYN waits longer
#: than TCP's initial 1 s retransmission timeout for its delivery opportunity.
MIN_LINK_MBPS = 0.012
MAX_LINK_MBPS = 1000.0
#: Bounds of a path that scenario files and sweep specs (sweep.py) share. One-way delay in ms
#: (a round trip of 20 s is no path a TCP connection survives to measure); a loss rate is a
#: probability below 1 (a link that drops everything carries no flow); droptail queue in packets;
#: one file, bytes.
MAX_DELAY_MS = 10_000
MAX_LOSS_RATE = 1.0  # exclusive
MAX_QUEUE_PACKETS = 1_000_000
MAX_FILE_BYTES = 4 * 2**30
#: What sits between the server's namespace and the clients (see `topology/bridges.py`): nothing (the
#: root namespace routes to the server's veth), an Open vSwitch bridge or a Linux bridge.
BRIDGES = ("none", "ovs", "linux")
SCHEME_KINDS = ("native", "kernel", "ovs")


def format_problems(problems: List[str], source: Optional[str] = None) -> str:
    """One problem: the line itself, after the file's name; several: "N problems in FILE:" and
    one line each. A problem of the command line (`--schemes: ...`) is not the file's."""
    if len(problems) == 1:
        p = problems[0]
        if source and not p.startswith(source) and not p.startswith("--"):
            return f"{source}: {p}"
        return p
    return f"{len(problems)} problems in {source or 'the scenario'}:\n" + "\n".join(problems)


class ScenarioError(ValueError):
    """Invalid scenario. `problems`: one line "KEY: message" per problem (a plain
    `ScenarioError(message)` has that one); `source`: the file, if any; `partial_schemes`: the
    schemes of the file that parsed, when the file as a whole did not (so that the agent can
    still judge them, `with_agent_problems`); None when the file could not be read at all."""

    def __init__(self, message: Optional[str] = None, *, problems: Optional[List[str]] = None,
                 source: Optional[str] = None, partial_schemes: Optional[List["Scheme"]] = None,
                 schemes_end: Optional[int] = None):
        self.problems: List[str] = list(problems) if problems is not None else [message or ""]
        self.source = source
        self.partial_schemes = partial_schemes
        #: index in `problems` just after the problems of the `schemes` key (where the agent's
        #: refusals of schemes belong in the report)
        self.schemes_end = schemes_end
        super().__init__(message if problems is None else format_problems(self.problems, source))


@dataclass(frozen=True)
class Scheme:
    """`native:ALG` (kernel CC in the server namespace), `kernel:ALG` (agent algorithm on
    the kernel datapath) or `ovs:ALG` (agent algorithm enforced from the bridge port in
    front of a server that keeps its stock congestion control). `kernel:policy:SPEC` and
    `ovs:policy:SPEC` let the agent's selector choose each flow's algorithm (and hand it over)
    by a policy: a built-in name or a TOML file, with optional `:PARAM=VALUE,...`."""

    kind: str  # one of SCHEME_KINDS
    algorithm: str  # as written; `policy:SPEC` for a policy scheme
    #: for `kernel:policy:SPEC` / `ovs:policy:SPEC`: what the agent's --policy gets (SPEC
    #: with a policy file's path made absolute); None for a fixed algorithm
    policy: Optional[str] = None
    #: where the scheme was written (`schemes[2]`, `--schemes`), for error messages
    where: str = field(default="schemes", compare=False)

    @property
    def label(self) -> str:
        return f"{self.kind}:{self.algorithm}"

    @property
    def is_policy(self) -> bool:
        return self.policy is not None

    @property
    def kernel_cc(self) -> Optional[str]:
        """Name of the congestion control to set in the server namespace; None for `ovs:`
        schemes, whose server keeps the scenario's `ovs_server_cc` (Scenario.server_cc)."""
        if self.kind == "ovs":
            return None
        return self.algorithm if self.kind == "native" else "ccswitch"

    @property
    def uses_agent(self) -> bool:
        return self.kind in ("kernel", "ovs")


@dataclass(frozen=True)
class Link:
    """Either a constant rate (mbps, possibly asymmetric) or a pair of trace files."""

    uplink_mbps: Optional[float] = None
    downlink_mbps: Optional[float] = None
    uplink_trace: Optional[str] = None
    downlink_trace: Optional[str] = None

    @property
    def is_constant(self) -> bool:
        return self.uplink_trace is None

    @property
    def downlink_mbps_or_none(self) -> Optional[float]:
        return self.downlink_mbps if self.is_constant else None

    def describe(self) -> str:
        if self.is_constant:
            if self.uplink_mbps == self.downlink_mbps:
                return f"{self.downlink_mbps:g} Mbit/s"
            return f"{self.uplink_mbps:g}/{self.downlink_mbps:g} Mbit/s up/down"
        return f"traces {os.path.basename(self.uplink_trace)} / {os.path.basename(self.downlink_trace)}"


@dataclass(frozen=True)
class Flow:
    """An entry of a client's `flows`: `count` flows starting `start_s` after the unit's start.
    `scheme` None: flows of the scheme under test; else a competing `native:ALG` flow, served
    from a server namespace of its own whose default congestion control is ALG.
    `file_bytes` None: the unit's file size (the client's file_bytes / file_sizes)."""

    scheme: Optional[Scheme]
    start_s: float = 0.0
    count: int = 1
    file_bytes: Optional[int] = None


#: Size distributions a workload may draw from.
WORKLOAD_DISTRIBUTIONS = ("pareto",)
#: Bounded Pareto defaults (experiments/README.md, "Web workloads", for the source and the
#: resulting mean and shares).
PARETO_SHAPE = 1.2
PARETO_MIN_BYTES = 10_000
PARETO_MAX_BYTES = 10_000_000
#: Seconds a workload's last requests get after its arrivals stop (its duration_s plus this
#: must fit in the run's timeout_s).
WORKLOAD_TAIL_S = 30.0


@dataclass(frozen=True)
class Workload:
    """Web requests on one client: arrivals as a Poisson process during [0, duration_s) at an
    offered load `load` (a fraction of the downlink rate `downlink_mbps`, so at the rate
    load * link bytes/s / mean size), sizes from a bounded Pareto distribution on
    [min_bytes, max_bytes] with shape `pareto_shape` (heavy-tailed web transfer sizes)."""

    kind: str
    load: float
    duration_s: float
    downlink_mbps: float
    sizes: str = "pareto"
    seed: int = 1
    pareto_shape: float = PARETO_SHAPE
    min_bytes: int = PARETO_MIN_BYTES
    max_bytes: int = PARETO_MAX_BYTES

    def mean_bytes(self) -> float:
        """Mean of the bounded Pareto: for shape a on [L, H],
        E[X] = a L^a / (1 - (L/H)^a) * (H^(1-a) - L^(1-a)) / (1 - a), and for a = 1
        L H / (H - L) * ln(H / L)."""
        a, lo, hi = self.pareto_shape, float(self.min_bytes), float(self.max_bytes)
        if a == 1.0:
            return lo * hi / (hi - lo) * math.log(hi / lo)
        return a * lo ** a / (1.0 - (lo / hi) ** a) * (hi ** (1.0 - a) - lo ** (1.0 - a)) / (1.0 - a)

    def arrival_rate(self) -> float:
        """Requests per second: offered load / mean size."""
        return self.load * self.downlink_mbps * 1e6 / 8 / self.mean_bytes()

    def sample(self, rng_seed: int) -> List[Tuple[float, int]]:
        """The requests of one unit, (t_s, size) in arrival order: exponential gaps at
        `arrival_rate`, sizes by the inverse CDF of the bounded Pareto,
        x = L (1 - u (1 - (L/H)^a))^(-1/a) for u uniform in [0, 1), from numpy's
        default_rng(rng_seed). The same seed gives the same requests."""
        import numpy as np

        rng = np.random.default_rng(rng_seed)
        mean_gap_s = 1.0 / self.arrival_rate()
        times: List[float] = []
        t = rng.exponential(mean_gap_s)
        while t < self.duration_s:
            times.append(float(t))
            t += rng.exponential(mean_gap_s)
        a, lo, hi = self.pareto_shape, float(self.min_bytes), float(self.max_bytes)
        u = rng.random(len(times))
        x = lo * (1.0 - u * (1.0 - (lo / hi) ** a)) ** (-1.0 / a)
        sizes = np.clip(np.rint(x), self.min_bytes, self.max_bytes).astype(np.int64)
        return [(t_s, int(n)) for t_s, n in zip(times, sizes)]

    def describe(self) -> str:
        return f"web load {100 * self.load:g}%"


@dataclass(frozen=True)
class ScheduleStep:
    """From `at_s` after the unit's start on: `delay_ms` added one way in each direction to the
    client's static delay, and these loss rates (ccswitch-schedule's element)."""

    at_s: float
    delay_ms: float = 0.0
    loss_downlink: float = 0.0
    loss_uplink: float = 0.0


def describe_schedule(steps: Tuple[ScheduleStep, ...]) -> str:
    """"schedule: 20 ms -> 150 ms +1% loss at 5 s": the first step's delay, then each later
    step's changes and when they happen."""
    first = steps[0]
    text = f"schedule: {first.delay_ms:g} ms"
    for d, rate in (("", first.loss_downlink), (" up", first.loss_uplink)):
        if rate > 0:
            text += f" {100 * rate:g}% loss{d}"
    prev = first
    for step in steps[1:]:
        changes = []
        if step.delay_ms != prev.delay_ms:
            changes.append(f"-> {step.delay_ms:g} ms")
        for d, old, new in (("", prev.loss_downlink, step.loss_downlink), (" up", prev.loss_uplink, step.loss_uplink)):
            if new != old:
                changes.append(f"+{100 * new:g}% loss{d}" if old == 0 else f"loss{d} {100 * old:g}% -> {100 * new:g}%")
        text += f" {' '.join(changes) or 'unchanged'} at {step.at_s:g} s"
        prev = step
    return text


@dataclass(frozen=True)
class Client:
    name: str
    link: Link
    delay_ms: int = 0
    loss_uplink: float = 0.0
    loss_downlink: float = 0.0
    queue_packets: Optional[int] = None  # droptail both directions; None = mahimahi's unbounded
    #: the unit sizes: one unit per size (scheme, repetition); (0,) for a workload, whose one
    #: unit per scheme and repetition draws its sizes from the distribution
    file_sizes: Tuple[int, ...] = ()
    #: the flows on this client's bottleneck; empty = one flow of the scheme under test
    flows: Tuple[Flow, ...] = ()
    workload: Optional[Workload] = None
    schedule: Tuple[ScheduleStep, ...] = ()
    #: how the schedule's loss is drawn (`LOSS_DRAWS`)
    loss_draws: str = "packet"

    @property
    def n_flows(self) -> int:
        return sum(f.count for f in self.flows) if self.flows else 1

    def describe_path(self) -> str:
        """The path in words, e.g. "RTT 50 ms, 24 Mbit/s, loss 1% down, queue 100 pkts", with
        the traffic when it is more than one flow ("2 flows", "web load 50%") and a schedule."""
        parts = [f"RTT {2 * self.delay_ms} ms", self.link.describe()]
        for d, rate in (("down", self.loss_downlink), ("up", self.loss_uplink)):
            if rate > 0:
                parts.append(f"loss {100 * rate:g}% {d}")
        parts.append(f"queue {self.queue_packets} pkts" if self.queue_packets is not None else "unbounded queue")
        if self.schedule:
            parts.append(describe_schedule(self.schedule))
            if self.loss_draws != "packet" and any(s.loss_downlink or s.loss_uplink for s in self.schedule):
                parts.append(f"loss drawn per {self.loss_draws}")
        if self.flows and self.n_flows > 1:
            parts.append(f"{self.n_flows} flows")
        if self.workload is not None:
            parts.append(self.workload.describe())
        return ", ".join(parts)

    def path_fields(self) -> Dict[str, Any]:
        """The path's parameters as columns of a transfer row (transfers.jsonl/.parquet)."""
        link = self.link
        return {
            "rtt_ms": 2 * self.delay_ms, "delay_ms": self.delay_ms,
            "loss_downlink": self.loss_downlink, "loss_uplink": self.loss_uplink,
            "downlink_mbps": link.downlink_mbps, "uplink_mbps": link.uplink_mbps,
            "downlink_trace": link.downlink_trace, "uplink_trace": link.uplink_trace,
            "queue_packets": self.queue_packets,
            "schedule": [asdict(step) for step in self.schedule] if self.schedule else None,
            "loss_draws": self.loss_draws if self.schedule else None,
            "path": self.describe_path(),
        }


@dataclass
class Scenario:
    name: str
    schemes: List[Scheme]
    clients: List[Client]
    repetitions: int = 1
    timeout_s: float = DEFAULT_TIMEOUT_S
    agent_settle_s: float = 1.0
    bridge: Optional[str] = None  # as written; None = automatic (see bridge_kind)
    ovs_server_cc: str = "cubic"
    #: the analysis of analysis/handover.py that runs at the end ("smoothness", "mix", "mcc"), if any
    analysis: Optional[str] = None
    #: extra outputs: "flows" = window/throughput plots of the transfers of policy schemes and
    #: of `plot_schemes`
    plots: Tuple[str, ...] = ()
    plot_schemes: Tuple[str, ...] = ()
    #: per-destination memory of policy schemes. Off unless asked for: every client reaches the
    #: server from the one NAT address of the root namespace, so the memory would carry one
    #: path's choice over to the next path's flows.
    destination_memory: bool = False
    #: what "better" means in the summary (learner/objectives.py, canonical form), if named
    objective: Optional[str] = None
    #: the pairs of schemes (A, B) whose ratio of mean TCT the summary gives; empty = the
    #: default pairs (every kernel:ALG and ovs:ALG against native:ALG, `stats.default_pairs`)
    compare: Tuple[Tuple[str, str], ...] = ()
    source: Optional[str] = None  # path of the TOML file
    raw: Dict[str, Any] = field(default_factory=dict)

    @property
    def bridge_kind(self) -> str:
        """The bridge the run builds: the scenario's `bridge`, else "ovs" as soon as a
        `ovs:` scheme is present (so that every scheme, baselines included, crosses the same
        bridge), else "none"."""
        if self.bridge is not None:
            return self.bridge
        return "ovs" if self.uses_ovs else "none"

    def server_cc(self, scheme: Scheme) -> str:
        """Congestion control of the server namespace while `scheme` runs (for `kernel:`
        the generic name; the runner substitutes the name its shim registered)."""
        return self.ovs_server_cc if scheme.kind == "ovs" else scheme.kernel_cc

    def bridge_problems(self) -> List[str]:
        """`ovs:` schemes need a bridge port to act on."""
        if self.uses_ovs and self.bridge_kind == "none":
            ovs_scheme = next(s.label for s in self.schemes if s.kind == "ovs")
            return [f'bridge: {ovs_scheme!r} needs a bridge ("ovs" or "linux"), got "none"']
        return []

    def check_bridge(self) -> None:
        _raise_if(self.bridge_problems(), self.source)

    def timeout_problems(self) -> List[str]:
        """What cannot happen within `timeout_s`: a file that cannot arrive at its client's
        constant link rate (a certain failure after a long silence), flows together carrying
        more than the link can in the time, a flow or schedule step starting after the run, a
        workload whose arrivals and their tail outlast it."""
        out: List[str] = []
        t_max = self.timeout_s
        for i, c in enumerate(self.clients):
            w = f"clients[{i}]."
            for j, f in enumerate(c.flows):
                if f.start_s >= t_max:
                    out.append(f"{w}flows[{j}].start_s: {f.start_s:g} s is beyond the run (timeout_s = {t_max:g})")
            for j, step in enumerate(c.schedule):
                if step.at_s >= t_max:
                    out.append(f"{w}schedule[{j}].at_s: {step.at_s:g} s is beyond the run (timeout_s = {t_max:g})")
            if c.workload is not None:
                need_s = c.workload.duration_s + WORKLOAD_TAIL_S
                if need_s > t_max:
                    out.append(f"{w}workload.duration_s: {c.workload.duration_s:g} s of arrivals plus "
                               f"{WORKLOAD_TAIL_S:g} s for the last requests exceed timeout_s = {t_max:g}")
            rate = c.link.downlink_mbps_or_none
            if rate is None or c.workload is not None:
                continue
            bytes_per_s = rate * 1e6 / 8
            if not c.flows:
                biggest = max(c.file_sizes)
                need_s = biggest / bytes_per_s
                if need_s > t_max:
                    out.append(
                        f"{w}file_bytes: {biggest} bytes take at least {need_s:.0f} s at {rate:g} Mbit/s, "
                        f"more than timeout_s = {t_max:g}; raise timeout_s or shrink the file")
                continue
            # the flows share the bottleneck: the last byte arrives no sooner than the
            # earliest start plus all bytes at the link rate, nor than any flow's own start
            # plus its file at the full rate
            size = max(c.file_sizes)
            total = sum(f.count * (f.file_bytes or size) for f in c.flows)
            need_s = max(min(f.start_s for f in c.flows) + total / bytes_per_s,
                         max(f.start_s + (f.file_bytes or size) / bytes_per_s for f in c.flows))
            if need_s > t_max:
                out.append(f"{w}flows: {c.n_flows} flows of {total} bytes in all end at least {need_s:.0f} s "
                           f"after the start at {rate:g} Mbit/s, more than timeout_s = {t_max:g}; raise "
                           "timeout_s or shrink the files")
        return out

    def check_timeouts(self) -> None:
        """Raises ScenarioError listing `timeout_problems` (run again after --timeout)."""
        _raise_if(self.timeout_problems(), self.source)

    def agent_specs(self) -> List[Tuple[Optional[str], Optional[str], List[Scheme]]]:
        """The distinct agent command lines of the run: (algorithm, policy, schemes using it);
        exactly one of algorithm/policy is set."""
        return agent_specs(self.schemes)

    def scheme_order(self, repetition: int) -> List[Scheme]:
        """Scheme order for a repetition (0-based): rotated by one each repetition."""
        n = len(self.schemes)
        k = repetition % n
        return self.schemes[k:] + self.schemes[:k]

    def transfers(self):
        """The schedule: (repetition, client, scheme, file_bytes), in run order."""
        for rep in range(self.repetitions):
            for client in self.clients:
                for scheme in self.scheme_order(rep):
                    for size in client.file_sizes:
                        yield rep, client, scheme, size

    @property
    def n_transfers(self) -> int:
        return self.repetitions * len(self.schemes) * sum(len(c.file_sizes) for c in self.clients)

    @property
    def uses_kernel(self) -> bool:
        """Some scheme runs on the kernel datapath."""
        return any(s.kind == "kernel" for s in self.schemes)

    @property
    def uses_ovs(self) -> bool:
        """Some scheme runs on the ovs datapath."""
        return any(s.kind == "ovs" for s in self.schemes)

    @property
    def uses_agent(self) -> bool:
        return any(s.uses_agent for s in self.schemes)


def agent_specs(schemes: List[Scheme]) -> List[Tuple[Optional[str], Optional[str], List[Scheme]]]:
    """The distinct agent command lines of `schemes`: (algorithm, policy, schemes using it)."""
    out: Dict[Tuple[Optional[str], Optional[str]], List[Scheme]] = {}
    for s in schemes:
        if s.uses_agent:
            key = (None, s.policy) if s.is_policy else (s.algorithm, None)
            out.setdefault(key, []).append(s)
    return [(a, p, ss) for (a, p), ss in out.items()]


def _raise_if(problems: List[str], source: Optional[str]) -> None:
    if problems:
        raise ScenarioError(problems=problems, source=source)


# ------------------------------------------------------------------ validation helpers

_TOP_KEYS = {"name", "description", "repetitions", "schemes", "clients", "timeout_s", "agent_settle_s",
             "bridge", "ovs_server_cc", "analysis", "plots", "plot_schemes", "destination_memory",
             "objective",
             "compare"}
_CLIENT_KEYS = {
    "name", "delay_ms", "loss_downlink", "loss_uplink", "link", "queue_packets", "file_bytes",
    "file_sizes", "description", "flows", "workload", "schedule", "loss_draws",
}

#: How a schedule's loss is drawn. "packet": one seeded draw per packet in arrival order (two
#: schemes lose different data once they send in a different order). "segment": each TCP
#: segment's draw depends only on the seed (the repetition), its offset in its flow and which
#: transmission of it this is, so every scheme of a repetition loses the same bytes on the same
#: transmissions and a comparison of two schemes is not blurred by which bytes each happened to
#: lose (common random numbers; under 1% loss, per-packet draws spread a 10 MB transfer's time
#: by about +-12%). Packets without data (SYNs, pure ACKs) are then never dropped.
LOSS_DRAWS = ("packet", "segment")
_LINK_KEYS = {"mbps", "uplink_mbps", "downlink_mbps", "uplink", "downlink"}


def _unknown_problems(keys, allowed, where: str) -> List[str]:
    """One problem per key that is not one of `allowed`."""
    prefix = f"{where}." if where else ""
    return [f"{prefix}{k}: unknown key (allowed: {', '.join(sorted(allowed))})" for k in sorted(set(keys) - allowed)]


def _unknown(keys, allowed, where: str) -> None:
    _raise_if(_unknown_problems(keys, allowed, where), None)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(d, key, where, *, minimum, default=None, required=False):
    if key not in d:
        if required:
            raise ScenarioError(f"{where}{key}: required")
        return default
    v = d[key]
    if not _is_int(v) or v < minimum:
        raise ScenarioError(f"{where}{key}: must be an integer >= {minimum}, got {v!r}")
    return v


def _float(d, key, where, *, lo, hi, default, lo_open=False, hi_open=False):
    if key not in d:
        return default
    v = d[key]
    bad = not _is_num(v) or v != v
    if not bad:
        bad = (v <= lo if lo_open else v < lo) or (v >= hi if hi_open else v > hi)
    if bad:
        if hi == math.inf:
            raise ScenarioError(f"{where}{key}: must be a number {'>' if lo_open else '>='} {lo:g}, got {v!r}")
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise ScenarioError(f"{where}{key}: must be a number in {lb}{lo}, {hi}{rb}, got {v!r}")
    return float(v)


def parse_scheme(text: Any, where: str = "schemes", *, base_dir: Optional[str] = None,
                 check_files: bool = True, stored: bool = False) -> Scheme:
    """One scheme. A policy file (`kernel:policy:FILE`) is relative to `base_dir` (the
    scenario's directory; the current directory if None) and must exist if `check_files`.
    `stored`: the scheme comes from a stored run (its copy of the scenario), whose old
    spellings (`ccswitch:ALG`, `switch:ALG`) are read as today's; otherwise they are refused."""
    if stored:
        text = canonical_scheme(text)
    if not isinstance(text, str) or ":" not in text:
        raise ScenarioError(
            f"{where}: {text!r} is not a scheme; expected native:ALG, kernel:ALG, ovs:ALG, "
            "kernel:policy:NAME|FILE or ovs:policy:NAME|FILE"
        )
    kind, alg = text.split(":", 1)
    policy = None
    if kind == "native":
        if alg not in NATIVE_ALGORITHMS:
            raise ScenarioError(
                f"{where}: {text!r}: native algorithm must be one of {', '.join(NATIVE_ALGORITHMS)}"
                " (the only built-in congestion controls of this kernel)"
            )
    elif kind in RENAMED_KINDS:
        raise ScenarioError(renamed_scheme_message(text, where))
    elif kind in ("kernel", "ovs"):
        if alg.startswith(POLICY_PREFIX):
            policy = parse_policy_spec(alg[len(POLICY_PREFIX):], f"{where}: {text!r}", base_dir=base_dir,
                                       check_files=check_files)
        elif not _ALG_TEXT_RE.match(alg):
            raise ScenarioError(
                f"{where}: {text!r}: bad algorithm {alg!r}; expected NAME, NAME:PARAM=VALUE,..., "
                "py:MODULE:CLASS, pyportus:FILE.py[:CLASS] or policy:NAME|FILE (see `ccswitch algorithms`)"
            )
    else:
        raise ScenarioError(f"{where}: {text!r}: kind must be 'native', 'kernel' or 'ovs', got {kind!r}")
    return Scheme(kind, alg, policy, where=where)


def is_policy_file(target: str) -> bool:
    """The agent's rule: a policy target naming a file contains '/' or ends in .toml."""
    return "/" in target or target.endswith(".toml")


#: Where stored labels' relative policy files are looked for besides the current directory:
#: the repository's experiments/ (the scenarios there write `../learner/models/X.policy.toml`).
_EXPERIMENTS_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                 "..", "..", "..", "experiments"))


def display_label(label: str, base_dir: Optional[str] = None) -> str:
    """A scheme as tables, plots and progress lines show it: a policy file by its policy's name.

    `kernel:policy:../learner/models/paths-v2.policy.toml:margin=0.1` -> `kernel:policy:paths-v2:margin=0.1`:
    the file's own `name` key when the file can be read (relative paths are tried against
    `base_dir`, the current directory and the repository's experiments/), else the file name
    without `.policy.toml` / `.toml`. Any other label is returned unchanged; the stored `scheme`
    column always keeps the full label."""
    kind, sep, alg = str(label).partition(":")
    if not sep or not alg.startswith(POLICY_PREFIX):
        return label
    target, _, params = alg[len(POLICY_PREFIX):].partition(":")
    if not is_policy_file(target):
        return label
    return f"{kind}:{POLICY_PREFIX}{_policy_name(target, base_dir)}" + (f":{params}" if params else "")


@functools.lru_cache(maxsize=256)
def _policy_name(target: str, base_dir: Optional[str]) -> str:
    stem = re.sub(r"(\.policy)?\.toml$", "", os.path.basename(target)) or target
    if os.path.isabs(target):
        candidates = [target]
    else:
        candidates = [os.path.join(d, target) for d in (base_dir, os.getcwd(), _EXPERIMENTS_DIR) if d]
    for path in candidates:
        try:
            with open(path, "rb") as f:
                name = tomllib.load(f).get("name") if tomllib is not None else None
        except (OSError, ValueError):
            continue
        # a name that reads as one word; anything else (a table, a sentence) falls back to the stem
        return name if isinstance(name, str) and _NAME_RE.match(name) else stem
    return stem


def parse_policy_spec(spec: str, where: str, *, base_dir: Optional[str] = None, check_files: bool = True) -> str:
    """`NAME[:PARAMS]` or `FILE[:PARAMS]` -> the agent's --policy argument (FILE absolute)."""
    m = _POLICY_RE.match(spec)
    if not spec or not m:
        raise ScenarioError(
            f"{where}: bad policy {spec!r}; expected policy:NAME, policy:FILE.toml, optionally "
            "followed by :PARAM=VALUE,..."
        )
    target, params = m.group("target"), m.group("params")
    if is_policy_file(target):
        path = target if os.path.isabs(target) else os.path.normpath(os.path.join(base_dir or os.getcwd(), target))
        if check_files:
            _check_policy_file(path, where)
        target = path
    return f"{target}:{params}" if params else target


def _check_policy_file(path: str, where: str) -> None:
    """The file exists and is TOML (its rules are the agent's to validate)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise ScenarioError(f"{where}: policy file not found: {path}") from None
    except OSError as e:
        raise ScenarioError(f"{where}: cannot read policy file {path}: {e.strerror}") from None
    if tomllib is not None:
        try:
            tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ScenarioError(f"{where}: policy file {path}: TOML syntax error: {e}") from None


def _parse_link(v, where: str, base_dir: Optional[str], check_files: bool) -> Link:
    if not isinstance(v, dict):
        raise ScenarioError(
            f"{where}: must be a table, e.g. {{ mbps = 24 }} or {{ uplink = \"FILE\", downlink = \"FILE\" }}"
        )
    _unknown(v.keys(), _LINK_KEYS, where)
    has_rate = any(k in v for k in ("mbps", "uplink_mbps", "downlink_mbps"))
    has_trace = any(k in v for k in ("uplink", "downlink"))
    if has_rate and has_trace:
        raise ScenarioError(f"{where}: give either a rate (mbps) or trace files (uplink/downlink), not both")
    if not has_rate and not has_trace:
        raise ScenarioError(f"{where}: empty; give mbps = N or uplink = FILE, downlink = FILE")
    w = where + "."
    if has_rate:
        if "mbps" in v and ("uplink_mbps" in v or "downlink_mbps" in v):
            raise ScenarioError(f"{w}mbps: give either mbps or uplink_mbps/downlink_mbps, not both")
        rates = {}
        for k in ("uplink_mbps", "downlink_mbps"):
            key = "mbps" if "mbps" in v else k
            if key not in v:
                raise ScenarioError(f"{w}{k}: required when the other direction is given")
            r = v[key]
            if not _is_num(r) or r != r:
                raise ScenarioError(f"{w}{key}: must be a rate in Mbit/s, got {r!r}")
            if not MIN_LINK_MBPS <= r <= MAX_LINK_MBPS:
                raise ScenarioError(
                    f"{w}{key}: {r!r} Mbit/s is outside what mahimahi can emulate here "
                    f"({MIN_LINK_MBPS:g} to {MAX_LINK_MBPS:g} Mbit/s)"
                )
            rates[k] = float(r)
        return Link(uplink_mbps=rates["uplink_mbps"], downlink_mbps=rates["downlink_mbps"])
    paths = {}
    for k in ("uplink", "downlink"):
        if k not in v:
            raise ScenarioError(f"{w}{k}: required (a mahimahi trace file)")
        p = v[k]
        if not isinstance(p, str) or not p:
            raise ScenarioError(f"{w}{k}: must be a file path, got {p!r}")
        if not os.path.isabs(p) and base_dir:
            p = os.path.normpath(os.path.join(base_dir, p))
        if check_files and not os.path.isfile(p):
            raise ScenarioError(f"{w}{k}: trace file not found: {p}")
        paths[k] = p
    return Link(uplink_trace=paths["uplink"], downlink_trace=paths["downlink"])


class _Problems:
    """The problems found so far, one line "KEY: message" each. `take` runs a check that
    raises ScenarioError and returns its value, or BAD after recording its problems, so the
    caller carries on with the other keys."""

    BAD = object()

    def __init__(self) -> None:
        self.lines: List[str] = []

    def add(self, line: str) -> None:
        self.lines.append(line)

    def take(self, check: Callable[..., Any], *args, **kwargs) -> Any:
        try:
            return check(*args, **kwargs)
        except ScenarioError as e:
            self.lines.extend(e.problems)
            return self.BAD


_BAD = _Problems.BAD


def _parse_client(c, index: int, base_dir, check_files, problems: _Problems) -> Optional[Client]:
    """A client, or None after recording its problems (every key is checked)."""
    where = f"clients[{index}]"
    if not isinstance(c, dict):
        problems.add(f"{where}: must be a table ([[clients]])")
        return None
    before = len(problems.lines)
    for line in _unknown_problems(c.keys(), _CLIENT_KEYS, where):
        problems.add(line)
    w = where + "."
    name = c.get("name")
    if name is None:
        problems.add(f"{w}name: required")
    elif not isinstance(name, str) or not _NAME_RE.match(name):
        problems.add(f"{w}name: must match {_NAME_RE.pattern}, got {name!r}")
    link = None
    if "link" not in c:
        problems.add(f"{w}link: required")
    else:
        link = problems.take(_parse_link, c["link"], f"{w}link", base_dir, check_files)
    delay = problems.take(_int, c, "delay_ms", w, minimum=0, default=0)
    if delay is not _BAD and delay > MAX_DELAY_MS:
        problems.add(f"{w}delay_ms: {delay} ms is implausible (max {MAX_DELAY_MS})")
    loss_up = problems.take(_float, c, "loss_uplink", w, lo=0.0, hi=MAX_LOSS_RATE, default=0.0, hi_open=True)
    loss_down = problems.take(_float, c, "loss_downlink", w, lo=0.0, hi=MAX_LOSS_RATE, default=0.0, hi_open=True)
    queue = problems.take(_int, c, "queue_packets", w, minimum=1, default=None)
    if queue not in (None, _BAD) and queue > MAX_QUEUE_PACKETS:
        problems.add(f"{w}queue_packets: {queue} packets is implausible (max {MAX_QUEUE_PACKETS})")
    workload = None
    if "workload" in c:
        if "flows" in c:
            problems.add(f"{w}workload: give either flows (competing flows) or workload (web requests), not both")
        workload = problems.take(_parse_workload, c["workload"], f"{w}workload", link)
        sizes = [0]  # one unit per scheme and repetition; the sizes come from the distribution
        for k in ("file_bytes", "file_sizes"):
            if k in c:
                problems.add(f"{w}{k}: not with a workload (its request sizes come from the distribution)")
    else:
        sizes = problems.take(_file_sizes, c, w)
    flows: Any = ()
    if "flows" in c:
        flows = problems.take(_parse_flows, c["flows"], f"{w}flows", base_dir)
    schedule: Any = ()
    if "schedule" in c:
        schedule = problems.take(_parse_schedule, c["schedule"], f"{w}schedule")
    loss_draws = c.get("loss_draws", "packet")
    if loss_draws not in LOSS_DRAWS:
        problems.add(f"{w}loss_draws: must be one of {', '.join(map(repr, LOSS_DRAWS))}, got {loss_draws!r}")
    elif loss_draws != "packet" and "schedule" not in c:
        problems.add(f"{w}loss_draws: {loss_draws!r} needs a schedule (ccswitch's element draws the loss; "
                     "mahimahi's loss_downlink/loss_uplink draw per packet), e.g. "
                     "schedule = [{ at_s = 0, loss_downlink = 0.01 }]")
    if len(problems.lines) > before:
        return None
    return Client(
        name=name, link=link, delay_ms=delay, loss_uplink=loss_up, loss_downlink=loss_down,
        queue_packets=queue, file_sizes=tuple(sizes), flows=tuple(flows), workload=workload,
        schedule=tuple(schedule), loss_draws=loss_draws,
    )


def _file_sizes(c: Dict[str, Any], w: str) -> List[int]:
    """`file_bytes = N` or `file_sizes = [N, ...]`; every size in [1, MAX_FILE_BYTES]."""
    if "file_bytes" in c and "file_sizes" in c:
        raise ScenarioError(f"{w}file_sizes: give either file_bytes or file_sizes, not both")
    if "file_bytes" in c:
        sizes = [_int(c, "file_bytes", w, minimum=1)]
    elif "file_sizes" in c:
        fs = c["file_sizes"]
        if not isinstance(fs, list) or not fs:
            raise ScenarioError(f"{w}file_sizes: must be a non-empty list of integers, got {fs!r}")
        bad = [f"{w}file_sizes[{i}]: must be an integer >= 1, got {s!r}" for i, s in enumerate(fs)
               if not _is_int(s) or s < 1]
        if bad:
            raise ScenarioError(problems=bad)
        if len(set(fs)) != len(fs):
            raise ScenarioError(f"{w}file_sizes: duplicate sizes {fs!r}")
        sizes = list(fs)
    else:
        raise ScenarioError(f"{w}file_bytes: required (or file_sizes = [...])")
    for s in sizes:
        problem = file_size_problem(s)
        if problem:
            raise ScenarioError(f"{w}file_bytes: {problem}")
    return sizes


def file_size_problem(size: int) -> Optional[str]:
    """Why a file of `size` bytes cannot be served (scenario files and sweep specs)."""
    if size > MAX_FILE_BYTES:
        return f"{size} bytes is too large (max 4 GiB)"
    return None


def _parse_objective(v: Any) -> Optional[str]:
    """`objective = "power"`: the summary judges every scheme by it (its canonical form). Harm
    needs a reference unit per competitor, which a per-transfer cost has not: `ccswitch
    evaluate` judges it on a sweep's paths."""
    if v is None:
        return None
    from ..learner.objectives import ObjectiveError, parse

    if not isinstance(v, str):
        raise ScenarioError(f'objective: must be a string such as "power" or "tct_delay_budget:budget_ms=100", got {v!r}')
    try:
        obj = parse(v)
    except ObjectiveError as e:
        raise ScenarioError(f"objective: {e}") from None
    if obj.name == "harm" or obj.params.get("harm", 0) > 0:
        raise ScenarioError(f"objective: {obj.canonical}: harm is judged against a reference run of the "
                            "competitor's own algorithm, which a scenario's summary does not pair; judge it "
                            "with `ccswitch evaluate` on a sweep's paths")
    return obj.canonical


_FLOW_KEYS = {"scheme", "start_s", "count", "file_bytes"}


def _parse_flows(v: Any, where: str, base_dir: Optional[str]) -> Tuple[Flow, ...]:
    """`flows = [{ scheme = "native:cubic", start_s = 0 }, { start_s = 2, count = 1 }]`."""
    if not isinstance(v, list) or not v:
        raise ScenarioError(f"{where}: must be a non-empty list of tables, e.g. "
                            '[{ scheme = "native:cubic", start_s = 0 }, { start_s = 2 }]')
    problems = _Problems()
    flows: List[Flow] = []
    any_under_test = False
    for j, entry in enumerate(v):
        w = f"{where}[{j}]"
        if not isinstance(entry, dict):
            problems.add(f"{w}: must be a table, e.g. {{ start_s = 2, count = 1 }}")
            continue
        before = len(problems.lines)
        for line in _unknown_problems(entry.keys(), _FLOW_KEYS, w):
            problems.add(line)
        scheme = None
        if "scheme" in entry:
            scheme = problems.take(parse_scheme, entry["scheme"], f"{w}.scheme", base_dir=base_dir, check_files=False)
            if scheme is not _BAD and scheme.kind != "native":
                problems.add(f"{w}.scheme: {scheme.label!r}: a competing flow must be native:ALG (it needs a server "
                             "namespace of its own; only the scheme under test runs on the agent)")
        else:
            any_under_test = True
        start = problems.take(_float, entry, "start_s", w + ".", lo=0.0, hi=math.inf, default=0.0)
        count = problems.take(_int, entry, "count", w + ".", minimum=1, default=1)
        nbytes = problems.take(_int, entry, "file_bytes", w + ".", minimum=1, default=None)
        if nbytes not in (None, _BAD) and file_size_problem(nbytes):
            problems.add(f"{w}.file_bytes: {file_size_problem(nbytes)}")
        if len(problems.lines) == before:
            flows.append(Flow(scheme=scheme, start_s=start, count=count, file_bytes=nbytes))
    if not any_under_test:
        problems.add(f"{where}: no flow of the scheme under test (an entry without `scheme`)")
    _raise_if(problems.lines, None)
    return tuple(flows)


_WORKLOAD_KEYS = {"kind", "load", "duration_s", "sizes", "seed", "pareto_shape", "min_bytes", "max_bytes"}
#: The offered load a workload may ask for, a fraction of the downlink rate: above 1 the
#: queue grows without bound; up to 1.5 shows how a scheme behaves in overload.
MAX_WORKLOAD_LOAD = 1.5


def _parse_workload(v: Any, where: str, link: Any) -> Workload:
    """`workload = { kind = "poisson", load = 0.5, duration_s = 30, sizes = "pareto", seed = 1 }`;
    `link`: the client's parsed link (or None / BAD when that was unusable)."""
    if not isinstance(v, dict):
        raise ScenarioError(f'{where}: must be a table, e.g. {{ kind = "poisson", load = 0.5, duration_s = 30, '
                            'sizes = "pareto" }')
    problems = _Problems()
    for line in _unknown_problems(v.keys(), _WORKLOAD_KEYS, where):
        problems.add(line)
    w = where + "."
    kind = v.get("kind")
    if kind is None:
        problems.add(f'{w}kind: required ("poisson")')
    elif kind != "poisson":
        problems.add(f'{w}kind: must be "poisson" (requests arrive as a Poisson process), got {kind!r}')
    if "load" not in v:
        problems.add(f"{w}load: required (offered load, a fraction of the downlink rate)")
    load = problems.take(_float, v, "load", w, lo=0.0, hi=MAX_WORKLOAD_LOAD, default=None, lo_open=True)
    if isinstance(link, Link) and not link.is_constant:
        problems.add(f"{w}load: needs a constant-rate link (the load is a fraction of its downlink rate); "
                     "this client's link is a trace")
    if "duration_s" not in v:
        problems.add(f"{w}duration_s: required (requests start during [0, duration_s))")
    duration = problems.take(_float, v, "duration_s", w, lo=0.0, hi=86400.0, default=None, lo_open=True)
    sizes = v.get("sizes", "pareto")
    if sizes not in WORKLOAD_DISTRIBUTIONS:
        problems.add(f"{w}sizes: unknown workload distribution {sizes!r} (known: {', '.join(WORKLOAD_DISTRIBUTIONS)})")
    seed = v.get("seed", 1)
    if not _is_int(seed):
        problems.add(f"{w}seed: must be an integer, got {seed!r}")
    shape = problems.take(_float, v, "pareto_shape", w, lo=0.0, hi=10.0, default=PARETO_SHAPE, lo_open=True)
    lo = problems.take(_int, v, "min_bytes", w, minimum=1, default=PARETO_MIN_BYTES)
    hi = problems.take(_int, v, "max_bytes", w, minimum=1, default=PARETO_MAX_BYTES)
    if hi is not _BAD and file_size_problem(hi):
        problems.add(f"{w}max_bytes: {file_size_problem(hi)}")
    elif _BAD not in (lo, hi) and not hi > lo:
        problems.add(f"{w}max_bytes: must be greater than min_bytes ({lo}), got {hi}")
    _raise_if(problems.lines, None)
    rate = link.downlink_mbps if isinstance(link, Link) and link.is_constant else 0.0
    return Workload(kind=kind, load=load, duration_s=duration, downlink_mbps=rate or 0.0, sizes=sizes, seed=seed,
                    pareto_shape=shape, min_bytes=lo, max_bytes=hi)


_STEP_KEYS = {"at_s", "delay_ms", "loss_downlink", "loss_uplink"}


def _parse_schedule(v: Any, where: str) -> Tuple[ScheduleStep, ...]:
    """`schedule = [{ at_s = 0, delay_ms = 20 }, { at_s = 5, delay_ms = 150, loss_downlink = 0.01 }]`:
    steps from at_s = 0 on, strictly increasing; a key a step leaves out keeps the previous
    step's value (0 in the first)."""
    if not isinstance(v, list) or not v:
        raise ScenarioError(f"{where}: must be a non-empty list of steps, e.g. "
                            "[{ at_s = 0, delay_ms = 20 }, { at_s = 5, delay_ms = 150 }]")
    problems = _Problems()
    steps: List[ScheduleStep] = []
    prev = ScheduleStep(at_s=0.0)
    prev_at: Optional[float] = None
    for j, step in enumerate(v):
        w = f"{where}[{j}]"
        if not isinstance(step, dict):
            problems.add(f"{w}: must be a table, e.g. {{ at_s = 5, delay_ms = 150 }}")
            continue
        before = len(problems.lines)
        for line in _unknown_problems(step.keys(), _STEP_KEYS, w):
            problems.add(line)
        if "at_s" not in step:
            problems.add(f"{w}.at_s: required (seconds after the start)")
        at = problems.take(_float, step, "at_s", w + ".", lo=0.0, hi=math.inf, default=None)
        if at not in (None, _BAD):
            if j == 0 and at != 0:
                problems.add(f"{w}.at_s: the first step must be at 0, got {at:g}")
            elif prev_at is not None and not at > prev_at:
                problems.add(f"{w}.at_s: steps out of order or overlapping: {at:g} after {prev_at:g}")
            prev_at = at
        delay = problems.take(_float, step, "delay_ms", w + ".", lo=0.0, hi=float(MAX_DELAY_MS),
                              default=prev.delay_ms)
        loss_down = problems.take(_float, step, "loss_downlink", w + ".", lo=0.0, hi=MAX_LOSS_RATE,
                                  default=prev.loss_downlink, hi_open=True)
        loss_up = problems.take(_float, step, "loss_uplink", w + ".", lo=0.0, hi=MAX_LOSS_RATE,
                                default=prev.loss_uplink, hi_open=True)
        if len(problems.lines) == before:
            prev = ScheduleStep(at_s=at, delay_ms=delay, loss_downlink=loss_down, loss_uplink=loss_up)
            steps.append(prev)
    _raise_if(problems.lines, None)
    return tuple(steps)


def parse_scenario(data: Dict[str, Any], *, source: Optional[str] = None, check_files: bool = True,
                   stored: bool = False) -> Scenario:
    """Validate a parsed TOML document; raises one ScenarioError listing every problem, each
    naming its key (see the module's docstring). `stored`: the document is a stored run's copy
    of its scenario, whose old spellings (schemes `ccswitch:` and `switch:`, key
    `switch_server_cc`) are read as today's instead of refused."""
    if not isinstance(data, dict):
        raise ScenarioError(problems=["scenario: must be a TOML table"], source=source)
    problems = _Problems()
    data, renamed = renamed_scenario_keys(data, stored)
    for line in renamed:
        problems.add(line)
    for line in _unknown_problems(data.keys(), _TOP_KEYS, ""):
        problems.add(line)
    name = data.get("name")
    if name is None:
        problems.add("name: required")
    elif not isinstance(name, str) or not _NAME_RE.match(name):
        problems.add(f"name: must match {_NAME_RE.pattern}, got {name!r}")
    reps = problems.take(_int, data, "repetitions", "", minimum=1, default=1)
    timeout = problems.take(_float, data, "timeout_s", "", lo=0.0, hi=86400.0, default=DEFAULT_TIMEOUT_S,
                            lo_open=True)
    settle = problems.take(_float, data, "agent_settle_s", "", lo=0.0, hi=60.0, default=1.0)
    objective = problems.take(_parse_objective, data.get("objective"))
    memory = data.get("destination_memory", False)
    if not isinstance(memory, bool):
        problems.add(f"destination_memory: must be true or false, got {memory!r}")
    bridge = data.get("bridge")
    if bridge is not None and bridge not in BRIDGES:
        problems.add(f"bridge: must be one of {', '.join(repr(b) for b in BRIDGES)}, got {bridge!r}")
        bridge = _BAD
    server_cc = data.get("ovs_server_cc", "cubic")
    if server_cc not in NATIVE_ALGORITHMS:
        problems.add(f"ovs_server_cc: must be one of {', '.join(NATIVE_ALGORITHMS)} "
                     f"(the server's own congestion control under ovs: schemes), got {server_cc!r}")
    base_dir = os.path.dirname(os.path.abspath(source)) if source else None
    schemes: List[Scheme] = []
    #: labels the other keys may name: the parsed schemes' and, so that one bad scheme is not
    #: reported again by every key naming it, the unusable ones as written
    labels: List[str] = []
    schemes_raw = data.get("schemes")
    if schemes_raw is None:
        problems.add("schemes: required, e.g. [\"native:cubic\", \"kernel:reno\"]")
    elif not isinstance(schemes_raw, list) or not schemes_raw:
        problems.add(f"schemes: must be a non-empty list of strings, got {schemes_raw!r}")
    else:
        for i, text in enumerate(schemes_raw):
            s = problems.take(parse_scheme, text, f"schemes[{i}]", base_dir=base_dir, check_files=check_files,
                              stored=stored)
            if s is not _BAD:
                schemes.append(s)
                labels.append(s.label)
            elif isinstance(text, str):
                labels.append(canonical_scheme(text) if stored else text)
        parsed = [s.label for s in schemes]
        dups = sorted({x for x in parsed if parsed.count(x) > 1})
        if dups:
            problems.add(f"schemes: duplicate scheme {dups[0]!r}")
    schemes_end = len(problems.lines)
    if stored and isinstance(data.get("plot_schemes"), list):
        data = dict(data, plot_schemes=[canonical_scheme(p) for p in data["plot_schemes"]])
    outputs = problems.take(_parse_outputs, data, labels)
    compare = problems.take(_parse_compare, data.get("compare", []), labels, stored)
    clients: List[Client] = []
    clients_raw = data.get("clients")
    if clients_raw is None:
        problems.add("clients: required (one or more [[clients]] tables)")
    elif not isinstance(clients_raw, list) or not clients_raw:
        problems.add("clients: must be a non-empty array of tables ([[clients]])")
    else:
        for i, c in enumerate(clients_raw):
            client = _parse_client(c, i, base_dir, check_files, problems)
            if client is not None:
                clients.append(client)
        names = [c.name for c in clients]
        dups = sorted({x for x in names if names.count(x) > 1})
        if dups:
            problems.add(f"clients: duplicate client name {dups[0]!r}")
    analysis, plots, plot_schemes = outputs if outputs is not _BAD else (None, (), ())
    sc = Scenario(
        name=name if isinstance(name, str) else "", schemes=schemes, clients=clients,
        repetitions=reps if reps is not _BAD else 1,
        timeout_s=timeout if timeout is not _BAD else DEFAULT_TIMEOUT_S,
        agent_settle_s=settle if settle is not _BAD else 1.0,
        bridge=bridge if bridge is not _BAD else None, ovs_server_cc=server_cc, analysis=analysis, plots=plots,
        plot_schemes=plot_schemes, source=source, raw=data, destination_memory=memory is True,
        objective=objective if objective is not _BAD else None,
        compare=compare if compare is not _BAD else (),
    )
    # checks across keys, on the parts that parsed
    if bridge is not _BAD:
        for line in sc.bridge_problems():
            problems.add(line)
    if timeout is not _BAD:
        for line in sc.timeout_problems():
            problems.add(line)
    if problems.lines:
        raise ScenarioError(problems=problems.lines, source=source, partial_schemes=schemes,
                            schemes_end=schemes_end)
    return sc


def _parse_compare(value: Any, labels: List[str], stored: bool) -> Tuple[Tuple[str, str], ...]:
    """`compare = [["ovs:bbr", "native:bbr"], ...]`: pairs (A, B) of the run's schemes whose ratio
    of mean TCT A / B the summary gives."""
    if not isinstance(value, list):
        raise ScenarioError(f'compare: must be a list of scheme pairs, e.g. [["ovs:bbr", "native:bbr"]], got {value!r}')
    pairs = []
    for i, pair in enumerate(value):
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise ScenarioError(f'compare[{i}]: must be a pair of schemes ["A", "B"], got {pair!r}')
        if stored:
            pair = [canonical_scheme(x) for x in pair]
        for x in pair:
            if x not in labels:
                raise ScenarioError(f"compare[{i}]: {x!r} is not one of the schemes ({', '.join(labels)})")
        if pair[0] == pair[1]:
            raise ScenarioError(f"compare[{i}]: compares {pair[0]!r} with itself")
        pairs.append((pair[0], pair[1]))
    return tuple(pairs)


def _parse_outputs(data: Dict[str, Any], labels: List[str]):
    """`analysis`, `plots` and `plot_schemes` (each plotted scheme must be one of the run's)."""
    analysis = data.get("analysis")
    if analysis is not None and analysis not in ANALYSES:
        raise ScenarioError(f"analysis: must be one of {', '.join(repr(a) for a in ANALYSES)}, got {analysis!r}")
    plots = data.get("plots", [])
    if not isinstance(plots, list) or any(p not in PLOTS for p in plots):
        raise ScenarioError(f"plots: must be a list of {', '.join(repr(p) for p in PLOTS)}, got {plots!r}")
    plot_schemes = data.get("plot_schemes", [])
    if not isinstance(plot_schemes, list):
        raise ScenarioError(f"plot_schemes: must be a list of scheme labels, got {plot_schemes!r}")
    for i, p in enumerate(plot_schemes):
        if p not in labels:
            raise ScenarioError(f"plot_schemes[{i}]: {p!r} is not one of the schemes ({', '.join(labels)})")
    return analysis, tuple(plots), tuple(plot_schemes)


def loads_scenario(text: str, *, source: Optional[str] = None, check_files: bool = True,
                   stored: bool = False) -> Scenario:
    if tomllib is None:  # pragma: no cover
        raise ScenarioError("reading scenarios needs Python >= 3.11 (tomllib)")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{source or 'scenario'}: TOML syntax error: {e}") from None
    return parse_scenario(data, source=source, check_files=check_files, stored=stored)


def load_scenario(path, *, check_files: bool = True, stored: bool = False) -> Scenario:
    """A scenario file; `stored=True` for a run directory's copy (see `parse_scenario`). Its
    problems are named with the file (`ScenarioError.source`)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read scenario: {e.strerror}") from None
    return loads_scenario(text, source=path, check_files=check_files, stored=stored)


#: `checker(algorithm, policy)` -> None if the agent accepts that command line, else its error.
AgentChecker = Callable[[Optional[str], Optional[str]], Optional[str]]


def agent_problems(schemes: List[Scheme], checker: AgentChecker) -> List[str]:
    """The agent's refusals of `schemes`, one line each: where the scheme was written, the
    scheme, the agent's reason. Every distinct agent command line is asked once, all of them."""
    out = []
    for algorithm, policy, using in agent_specs(schemes):
        error = checker(algorithm, policy)
        if error is not None:
            for s in using:
                out.append(f"{s.where}: {s.label!r}: {error}")
    # in the order the schemes were written
    order = {s.where: i for i, s in enumerate(schemes)}
    return sorted(out, key=lambda line: order.get(line.split(": ", 1)[0], len(order)))


def check_schemes(sc: Scenario, checker: AgentChecker) -> None:
    """Ask the agent whether it accepts every `kernel:`/`ovs:` scheme of the run, as it
    will be started for it (`--algorithm ALG` or `--policy SPEC`; `checker` starts it, see
    `topology.daemons.check_agent_spec`), before any transfer. Raises one ScenarioError naming
    every refused scheme, where it was written, and the agent's own reason, e.g.
    ``schemes[2]: 'kernel:cubic:beta=abc': parameter beta: "abc" is not a number``."""
    problems = agent_problems(sc.schemes, checker)
    # a scheme of the file is named with the file, like every key of it
    in_file = any(line.startswith("schemes") for line in problems)
    _raise_if(problems, sc.source if in_file else None)


def with_agent_problems(error: ScenarioError, checker: AgentChecker) -> ScenarioError:
    """`error` (a file's own problems) with the agent's refusals of the schemes that parsed
    added among the problems of the `schemes` key; `error` itself when the file could not be
    read or parsed as TOML (no schemes to ask about) or the agent refuses none."""
    if not error.partial_schemes:
        return error
    refused = agent_problems(error.partial_schemes, checker)
    if not refused:
        return error
    at = error.schemes_end if error.schemes_end is not None else 0
    head, tail = error.problems[:at], error.problems[at:]

    def scheme_index(line: str) -> int:
        m = re.match(r"schemes\[(\d+)\]", line)
        return int(m.group(1)) if m else -1

    # the schemes' lines in the order of the file (a duplicate's line, without index, last)
    schemes_lines = [ln for ln in head if ln.startswith("schemes")] + refused
    schemes_lines.sort(key=lambda ln: (scheme_index(ln) < 0, scheme_index(ln)))
    others = [ln for ln in head if not ln.startswith("schemes")]
    merged = others + schemes_lines + tail
    return ScenarioError(problems=merged, source=error.source, partial_schemes=error.partial_schemes,
                         schemes_end=len(others) + len(schemes_lines))


def load_scenario_report(path, checker: AgentChecker, *, check_files: bool = True) -> Scenario:
    """`load_scenario` whose ScenarioError lists everything wrong with the file, the agent's
    refusals of its schemes included (also when other keys are wrong), so a user fixes the file
    in one go."""
    try:
        sc = load_scenario(path, check_files=check_files)
    except ScenarioError as e:
        raise with_agent_problems(e, checker) from None
    check_schemes(sc, checker)
    return sc
