"""Scenario files: what to run (clients, links, file sizes, schemes, repetitions).

A scenario is a TOML file; see experiments/README.md for the format. `load_scenario` parses
and validates it and returns a `Scenario`; any problem raises `ScenarioError` whose message
names the offending key, e.g. ``clients[1].delay_ms: must be an integer >= 0, got -3``.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

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
#: What sits between the server's namespace and the clients (see `topology/bridges.py`): nothing (the
#: root namespace routes to the server's veth), an Open vSwitch bridge or a Linux bridge.
BRIDGES = ("none", "ovs", "linux")
SCHEME_KINDS = ("native", "kernel", "ovs")
#: Scheme kinds of earlier versions and what they are called now (`ccswitch:ALG` ran on the
#: kernel datapath, `switch:ALG` on the Open vSwitch one). A scenario or command line that
#: writes them is refused with the new spelling; stored results that carry them are read
#: with `canonical_scheme`.
RENAMED_KINDS = {"ccswitch": "kernel", "switch": "ovs"}
#: Python modules of `py:` algorithms that moved (dotted prefix as stored -> today's).
RENAMED_PY_MODULES = {"ccswitch.examples.": "ccswitch.authoring.examples."}


class ScenarioError(ValueError):
    """Invalid scenario; the message names the key."""


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
class Client:
    name: str
    link: Link
    delay_ms: int = 0
    loss_uplink: float = 0.0
    loss_downlink: float = 0.0
    queue_packets: Optional[int] = None  # droptail both directions; None = mahimahi's unbounded
    file_sizes: Tuple[int, ...] = ()

    def describe_path(self) -> str:
        """The path in words, e.g. "RTT 50 ms, 24 Mbit/s, loss 1% down, queue 100 pkts"."""
        parts = [f"RTT {2 * self.delay_ms} ms", self.link.describe()]
        for d, rate in (("down", self.loss_downlink), ("up", self.loss_uplink)):
            if rate > 0:
                parts.append(f"loss {100 * rate:g}% {d}")
        parts.append(f"queue {self.queue_packets} pkts" if self.queue_packets is not None else "unbounded queue")
        return ", ".join(parts)

    def path_fields(self) -> Dict[str, Any]:
        """The path's parameters as columns of a transfer row (transfers.jsonl/.parquet)."""
        link = self.link
        return {
            "rtt_ms": 2 * self.delay_ms, "delay_ms": self.delay_ms,
            "loss_downlink": self.loss_downlink, "loss_uplink": self.loss_uplink,
            "downlink_mbps": link.downlink_mbps, "uplink_mbps": link.uplink_mbps,
            "downlink_trace": link.downlink_trace, "uplink_trace": link.uplink_trace,
            "queue_packets": self.queue_packets, "path": self.describe_path(),
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

    def check_bridge(self) -> None:
        """`ovs:` schemes need a bridge port to act on."""
        if self.uses_ovs and self.bridge_kind == "none":
            ovs_scheme = next(s.label for s in self.schemes if s.kind == "ovs")
            raise ScenarioError(f'bridge: {ovs_scheme!r} needs a bridge ("ovs" or "linux"), got "none"')

    def check_timeouts(self) -> None:
        """Every file can arrive within `timeout_s` at its client's constant link rate (a
        transfer that cannot is a certain failure after a long silence)."""
        for i, c in enumerate(self.clients):
            rate = c.link.downlink_mbps_or_none
            if rate is None:
                continue
            biggest = max(c.file_sizes)
            need_s = biggest * 8 / (rate * 1e6)
            if need_s > self.timeout_s:
                raise ScenarioError(
                    f"clients[{i}].file_bytes: {biggest} bytes take at least {need_s:.0f} s at {rate:g} Mbit/s, "
                    f"more than timeout_s = {self.timeout_s:g}; raise timeout_s or shrink the file"
                )

    def agent_specs(self) -> List[Tuple[Optional[str], Optional[str], List[Scheme]]]:
        """The distinct agent command lines of the run: (algorithm, policy, schemes using it);
        exactly one of algorithm/policy is set."""
        out: Dict[Tuple[Optional[str], Optional[str]], List[Scheme]] = {}
        for s in self.schemes:
            if s.uses_agent:
                key = (None, s.policy) if s.is_policy else (s.algorithm, None)
                out.setdefault(key, []).append(s)
        return [(a, p, ss) for (a, p), ss in out.items()]

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


# ------------------------------------------------------------------ validation helpers

_TOP_KEYS = {"name", "description", "repetitions", "schemes", "clients", "timeout_s", "agent_settle_s",
             "bridge", "ovs_server_cc", "analysis", "plots", "plot_schemes", "destination_memory",
             "compare"}
_CLIENT_KEYS = {
    "name", "delay_ms", "loss_downlink", "loss_uplink", "link", "queue_packets", "file_bytes",
    "file_sizes", "description",
}
_LINK_KEYS = {"mbps", "uplink_mbps", "downlink_mbps", "uplink", "downlink"}


def _unknown(keys, allowed, where: str) -> None:
    extra = sorted(set(keys) - allowed)
    if extra:
        prefix = f"{where}." if where else ""
        raise ScenarioError(
            f"{prefix}{extra[0]}: unknown key (allowed: {', '.join(sorted(allowed))})"
        )


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
                "py:MODULE:CLASS or policy:NAME|FILE (see `ccswitch algorithms`)"
            )
    else:
        raise ScenarioError(f"{where}: {text!r}: kind must be 'native', 'kernel' or 'ovs', got {kind!r}")
    return Scheme(kind, alg, policy, where=where)


def renamed_scheme_message(text: str, where: str = "schemes") -> str:
    """Why an old spelling (`ccswitch:bbr`, `switch:policy:mystique`) is refused, naming the new one."""
    kind, rest = text.split(":", 1)
    return (f'{where}: scheme "{text}": renamed, write "{canonical_scheme(text)}" '
            '(the kernel datapath is "kernel:", the Open vSwitch one "ovs:")')


def canonical_scheme(text: Any) -> Any:
    """A scheme as stored by any version, in today's spelling: `ccswitch:ALG` -> `kernel:ALG`,
    `switch:ALG` -> `ovs:ALG`, `py:ccswitch.examples.M:C` -> `py:ccswitch.authoring.examples.M:C`;
    anything else unchanged. For readers of stored results and
    events (runs in experiments/measured/ were written with the old spellings)."""
    if isinstance(text, str) and ":" in text:
        for old, new in RENAMED_PY_MODULES.items():
            text = text.replace(f"py:{old}", f"py:{new}")
        kind, rest = text.split(":", 1)
        if kind in RENAMED_KINDS:
            return f"{RENAMED_KINDS[kind]}:{rest}"
    return text


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


def _parse_client(c, index: int, base_dir, check_files) -> Client:
    where = f"clients[{index}]"
    if not isinstance(c, dict):
        raise ScenarioError(f"{where}: must be a table ([[clients]])")
    _unknown(c.keys(), _CLIENT_KEYS, where)
    w = where + "."
    name = c.get("name")
    if name is None:
        raise ScenarioError(f"{w}name: required")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ScenarioError(f"{w}name: must match {_NAME_RE.pattern}, got {name!r}")
    if "link" not in c:
        raise ScenarioError(f"{w}link: required")
    link = _parse_link(c["link"], f"{w}link", base_dir, check_files)
    delay = _int(c, "delay_ms", w, minimum=0, default=0)
    if delay > 10_000:
        raise ScenarioError(f"{w}delay_ms: {delay} ms is implausible (max 10000)")
    loss_up = _float(c, "loss_uplink", w, lo=0.0, hi=1.0, default=0.0, hi_open=True)
    loss_down = _float(c, "loss_downlink", w, lo=0.0, hi=1.0, default=0.0, hi_open=True)
    queue = _int(c, "queue_packets", w, minimum=1, default=None)
    if "file_bytes" in c and "file_sizes" in c:
        raise ScenarioError(f"{w}file_sizes: give either file_bytes or file_sizes, not both")
    if "file_bytes" in c:
        sizes = [_int(c, "file_bytes", w, minimum=1)]
    elif "file_sizes" in c:
        fs = c["file_sizes"]
        if not isinstance(fs, list) or not fs:
            raise ScenarioError(f"{w}file_sizes: must be a non-empty list of integers, got {fs!r}")
        for i, s in enumerate(fs):
            if not _is_int(s) or s < 1:
                raise ScenarioError(f"{w}file_sizes[{i}]: must be an integer >= 1, got {s!r}")
        if len(set(fs)) != len(fs):
            raise ScenarioError(f"{w}file_sizes: duplicate sizes {fs!r}")
        sizes = list(fs)
    else:
        raise ScenarioError(f"{w}file_bytes: required (or file_sizes = [...])")
    for s in sizes:
        if s > 4 * 2**30:
            raise ScenarioError(f"{w}file_bytes: {s} bytes is too large (max 4 GiB)")
    return Client(
        name=name, link=link, delay_ms=delay, loss_uplink=loss_up, loss_downlink=loss_down,
        queue_packets=queue, file_sizes=tuple(sizes),
    )


#: Scenario keys of earlier versions and what they are called now.
RENAMED_KEYS = {"switch_server_cc": "ovs_server_cc"}


def parse_scenario(data: Dict[str, Any], *, source: Optional[str] = None, check_files: bool = True,
                   stored: bool = False) -> Scenario:
    """Validate a parsed TOML document; raises ScenarioError naming the bad key. `stored`: the
    document is a stored run's copy of its scenario, whose old spellings (schemes `ccswitch:`
    and `switch:`, key `switch_server_cc`) are read as today's instead of refused."""
    if not isinstance(data, dict):
        raise ScenarioError("scenario: must be a TOML table")
    for old, new in RENAMED_KEYS.items():
        if old in data:
            if not stored:
                raise ScenarioError(f"{old}: renamed, write {new} (the datapath in front of the server is \"ovs\")")
            data = dict(data)
            data.setdefault(new, data.pop(old))
    _unknown(data.keys(), _TOP_KEYS, "")
    name = data.get("name")
    if name is None:
        raise ScenarioError("name: required")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ScenarioError(f"name: must match {_NAME_RE.pattern}, got {name!r}")
    reps = _int(data, "repetitions", "", minimum=1, default=1)
    timeout = _float(data, "timeout_s", "", lo=0.0, hi=86400.0, default=DEFAULT_TIMEOUT_S, lo_open=True)
    settle = _float(data, "agent_settle_s", "", lo=0.0, hi=60.0, default=1.0)
    memory = data.get("destination_memory", False)
    if not isinstance(memory, bool):
        raise ScenarioError(f"destination_memory: must be true or false, got {memory!r}")
    bridge = data.get("bridge")
    if bridge is not None and bridge not in BRIDGES:
        raise ScenarioError(f"bridge: must be one of {', '.join(repr(b) for b in BRIDGES)}, got {bridge!r}")
    server_cc = data.get("ovs_server_cc", "cubic")
    if server_cc not in NATIVE_ALGORITHMS:
        raise ScenarioError(f"ovs_server_cc: must be one of {', '.join(NATIVE_ALGORITHMS)} "
                            f"(the server's own congestion control under ovs: schemes), got {server_cc!r}")
    schemes_raw = data.get("schemes")
    if schemes_raw is None:
        raise ScenarioError("schemes: required, e.g. [\"native:cubic\", \"kernel:reno\"]")
    if not isinstance(schemes_raw, list) or not schemes_raw:
        raise ScenarioError(f"schemes: must be a non-empty list of strings, got {schemes_raw!r}")
    base_dir = os.path.dirname(os.path.abspath(source)) if source else None
    schemes = [parse_scheme(s, f"schemes[{i}]", base_dir=base_dir, check_files=check_files, stored=stored)
               for i, s in enumerate(schemes_raw)]
    labels = [s.label for s in schemes]
    dups = sorted({x for x in labels if labels.count(x) > 1})
    if dups:
        raise ScenarioError(f"schemes: duplicate scheme {dups[0]!r}")
    if stored and isinstance(data.get("plot_schemes"), list):
        data = dict(data, plot_schemes=[canonical_scheme(p) for p in data["plot_schemes"]])
    analysis, plots, plot_schemes = _parse_outputs(data, labels)
    compare = _parse_compare(data.get("compare", []), labels, stored)
    clients_raw = data.get("clients")
    if clients_raw is None:
        raise ScenarioError("clients: required (one or more [[clients]] tables)")
    if not isinstance(clients_raw, list) or not clients_raw:
        raise ScenarioError("clients: must be a non-empty array of tables ([[clients]])")
    clients = [_parse_client(c, i, base_dir, check_files) for i, c in enumerate(clients_raw)]
    names = [c.name for c in clients]
    dups = sorted({x for x in names if names.count(x) > 1})
    if dups:
        raise ScenarioError(f"clients: duplicate client name {dups[0]!r}")
    sc = Scenario(
        name=name, schemes=schemes, clients=clients, repetitions=reps, timeout_s=timeout,
        agent_settle_s=settle, bridge=bridge, ovs_server_cc=server_cc, analysis=analysis, plots=plots,
        plot_schemes=plot_schemes, source=source, raw=data, destination_memory=memory, compare=compare,
    )
    sc.check_bridge()
    sc.check_timeouts()
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
    """A scenario file; `stored=True` for a run directory's copy (see `parse_scenario`)."""
    path = os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read scenario: {e.strerror}") from None
    try:
        return loads_scenario(text, source=path, check_files=check_files, stored=stored)
    except ScenarioError as e:
        msg = str(e)
        if not msg.startswith(path):
            msg = f"{path}: {msg}"
        raise ScenarioError(msg) from None


#: `checker(algorithm, policy)` -> None if the agent accepts that command line, else its error.
AgentChecker = Callable[[Optional[str], Optional[str]], Optional[str]]


def check_schemes(sc: Scenario, checker: AgentChecker) -> None:
    """Ask the agent whether it accepts every `kernel:`/`ovs:` scheme of the run, as it
    will be started for it (`--algorithm ALG` or `--policy SPEC`; `checker` starts it, see
    `topology.daemons.check_agent_spec`), before any transfer. Raises ScenarioError naming the first
    refused scheme, where it was written, and the agent's own reason, e.g.
    ``schemes[2]: 'kernel:cubic:beta=abc': parameter beta: "abc" is not a number``."""
    for algorithm, policy, schemes in sc.agent_specs():
        error = checker(algorithm, policy)
        if error is not None:
            s = schemes[0]
            # a scheme of the file is named with the file, like every key of it
            in_file = f"{sc.source}: " if sc.source and s.where.startswith("schemes") else ""
            raise ScenarioError(f"{in_file}{s.where}: {s.label!r}: {error}")
