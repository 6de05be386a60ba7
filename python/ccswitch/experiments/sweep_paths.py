"""A sweep's paths and cells. Path `i` is drawn from its own generator seeded with (seed, i),
so the same spec gives the same paths and asking for more keeps the first ones. A path's
*parameters* are what its scenario client carries (`Client.path_fields` without the words);
they name the path (`path_id`) and, with the scheme, file size and repetition, each cell
(`cell_key`). A path equal to a client of a held-out scenario, or on which the slowest
candidate is not expected to finish the smallest file well within the timeout
(`estimate_slowest_tct_s`), is drawn again and the fact logged."""

from __future__ import annotations

import hashlib
import json
import math
import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import scenario as _scenario
from .environment import repo_root
from .scenario import MAX_LINK_MBPS, MIN_LINK_MBPS, Client, ScenarioError
from .sweep_spec import DATAPATH_SCHEME, Component, Spec, SweepError, _weighted_index, load_spec


#: Where the default held-out scenarios live, relative to the repository.
HELD_OUT_SCENARIOS = ("experiments/mystique-mix.toml", "experiments/mcc-wifi.toml")


#: Draws of one path before the sweep gives up (a component whose every draw is held out or
#: too slow is a spec error, not an endless loop).
MAX_DRAWS = 200


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


def path_params(client: Client) -> Dict[str, Any]:
    """The parameters that make a path, as the scenario loader's client carries them: mm-delay,
    mm-loss each way, constant rates or trace files, droptail queue."""
    f = client.path_fields()
    out = {k: f[k] for k in ("delay_ms", "loss_downlink", "loss_uplink", "downlink_mbps", "uplink_mbps",
                             "downlink_trace", "uplink_trace", "queue_packets")}
    # only when present, so the ids of static lone-flow paths stay what they were
    if client.schedule:
        out["schedule"] = f["schedule"]
    if client.flows:
        out["flows"] = [{"scheme": fl.scheme.label if fl.scheme else None, "start_s": fl.start_s, "count": fl.count,
                         "file_bytes": fl.file_bytes} for fl in client.flows]
    return out


def params_from_row(row: Dict[str, Any]) -> Dict[str, Any]:
    """`path_params` from a transfer row (transfers.jsonl carries the client's path fields)."""
    out = {k: row.get(k) for k in ("delay_ms", "loss_downlink", "loss_uplink", "downlink_mbps", "uplink_mbps",
                                    "downlink_trace", "uplink_trace", "queue_packets")}
    if row.get("schedule"):
        out["schedule"] = row["schedule"]
    return out


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
    for k in ("schedule", "flows"):
        if k in out:
            out[k] = json.dumps(out[k], sort_keys=True)
    return tuple(sorted(out.items()))


def held_out_paths(spec: Spec) -> Dict[Tuple, str]:
    """Every client of the held-out scenarios (the defaults plus the spec's `held_out`), by its
    comparable parameters -> "scenario.toml clients[i] (name)"."""
    files = [os.path.join(repo_root(), f) for f in HELD_OUT_SCENARIOS] + list(spec.held_out)
    out: Dict[Tuple, str] = {}
    for f in files:
        if _is_sweep_spec(f):
            # a test sweep: every path it draws is held out from this one
            for p in sample_paths(load_spec(f)):
                out.setdefault(_comparable(p.params), f"{os.path.basename(f)} path {p.index} ({p.client_name})")
            continue
        try:
            sc = _scenario.load_scenario(f, check_files=False)
        except ScenarioError as e:
            raise SweepError(f"held-out scenario: {e}") from None
        for i, c in enumerate(sc.clients):
            out.setdefault(_comparable(path_params(c)), f"{os.path.basename(f)} clients[{i}] ({c.name})")
    return out


def _is_sweep_spec(path: str) -> bool:
    """Whether a held-out file is a sweep spec (it has [[mix]]) rather than a scenario."""
    try:
        with open(path, encoding="utf-8") as f:
            return "mix" in _scenario.tomllib.loads(f.read())
    except (OSError, ValueError, AttributeError):
        return False  # the scenario loader names the problem


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
    # drawn after the static parameters, and only for components that declare them, so
    # specs without them draw the paths they always drew
    step = comp.step
    if step is not None and rng.random() < step.share:
        loss = step.loss_downlink.draw(rng)
        table["schedule"] = [{"at_s": 0, "delay_ms": 0},
                             {"at_s": round(step.at_s.draw(rng), 1), "delay_ms": int(round(step.delay_ms.draw(rng))),
                              "loss_downlink": loss if step.loss_downlink.kind in ("const", "choice") else float(f"{loss:.2g}")}]
    rival = comp.competitor
    if rival is not None and rng.random() < rival.share:
        nbytes = int(float(f"{mean * 1e6 / 8 * (rival.lead_s + rival.seconds):.2g}"))
        table["flows"] = [{"scheme": rival.scheme, "start_s": 0, "file_bytes": max(nbytes, 100_000)},
                          {"start_s": rival.lead_s}]
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
            fixed_sizes = comp.fixed_sizes or spec.fixed_sizes
            client = client_of(table, "draw", fixed_sizes)
            params = path_params(client)
            key = _comparable(params)
            if key in held or key in drawn:
                why = f"held-out path of {held[key]}" if key in held else f"same path as path {drawn[key]}"
                redraws.append(why)
                log(f"path {i}: drew {client.describe_path()}, the {why}; drawing again")
                continue
            # a step path is judged by its worse phase, a shared one by its share of the link
            steps = params.get("schedule") or [{}]
            rtt = 2 * (params["delay_ms"] + max(st.get("delay_ms", 0) for st in steps))
            loss = max([params["loss_downlink"] or 0] + [st.get("loss_downlink", 0) for st in steps])
            share_mbps = mean / 2 if params.get("flows") else mean
            qb = queue_bdp(params["queue_packets"], share_mbps, rtt)
            est = {s: round(estimate_slowest_tct_s(rtt, share_mbps, loss, qb, s), 2)
                   for s in fixed_sizes + spec.large_sizes}
            slow = [s for s in fixed_sizes if est[s] > spec.max_est_s]
            if slow:
                why = (f"too slow: {slow[0]} bytes estimated at {est[slow[0]]:g} s for the slowest candidate "
                       f"(sizes.max_est_s = {spec.max_est_s:g})")
                redraws.append(why)
                log(f"path {i}: drew {client.describe_path()}, {why}; drawing again")
                continue
            fitting = [s for s in spec.large_sizes if est[s] <= spec.max_est_s]
            sizes = list(fixed_sizes) + ([fitting[-1]] if fitting else [])
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
