"""Metrics of one unit (a lone flow, competing flows or a web workload) from its raw files.

The model (experiments/README.md, "Metrics"; the field's practice as in Pantheon and Ware et
al.): `ccswitch-probe` stamps every data segment a server sends at the server's egress and
matches it at the client's ingress, so each delivered segment carries its arrival time and,
when the match succeeded, its one-way delay (propagation + queueing). From these records:

- per flow: percentiles of the one-way delay of delivered, matched packets; segments the path
  dropped (sent minus received at the two ends); and the server kernel's TCP_INFO at the end of
  the connection (retransmissions, smoothed and minimum RTT), so native schemes have them too;
- over time: the bytes arriving at the client per flow in 100 ms bins (Mbit/s per bin);
- between flows: Jain's index of their mean throughputs over the interval where all of them
  are active (from each one's first to its last delivered byte), and the harm a scheme does to
  a competitor (Ware et al., HotNets 2019) relative to the competitor sharing the path with its
  own algorithm;
- for a web workload: flow completion time and slowdown (FCT over the ideal FCT of an empty
  path) per size bucket.

File layouts are the data contract of issue 19 (PACKET_DTYPE, `read_probe`); times are
CLOCK_MONOTONIC nanoseconds, the clock of Python's `time.monotonic()`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

#: One record of `probe/NNNNNN.packets.bin` (little-endian, 24 bytes, no header).
PACKET_DTYPE = np.dtype([("t_ns", "<u8"), ("owd_us", "<u4"), ("flow", "<u4"), ("bytes", "<u4"), ("flags", "<u4")])
assert PACKET_DTYPE.itemsize == 24
#: flags bit 0: the packet matched a sender timestamp (its owd_us is meaningful).
FLAG_MATCHED = 1
#: The flows file's format version this module reads.
FLOWS_VERSION = 1
#: Width of a throughput bin.
BIN_S = 0.1

#: The per-flow figures a row and each of its `flows` carry (throughput_mbps from curl, the
#: rest from `flow_metrics`).
FLOW_METRICS = ("throughput_mbps", "delay_p50_ms", "delay_p95_ms", "delay_p99_ms", "delay_samples",
                "retrans_segs", "retrans_bytes", "srtt_ms", "min_rtt_ms", "path_drops")

#: Size buckets of a web workload: name, smallest size (bytes, inclusive), largest (inclusive; None = no bound).
SIZE_BUCKETS = (("lt100k", 0, 99_999), ("100k-1m", 100_000, 1_000_000), ("gt1m", 1_000_001, None))

#: Bootstrap of a median harm: resamples, the fixed seed, and the fewest pairs worth an interval.
HARM_RESAMPLES = 2000
HARM_SEED = 19
HARM_MIN_PAIRS = 5


@dataclass
class Probe:
    """One transfer's probe files: `packets` (a structured array of PACKET_DTYPE in file order),
    `meta` (the flows file as parsed) and `flows` (its flow entries by flow id)."""

    prefix: str
    packets: np.ndarray
    meta: dict
    flows: Dict[int, dict]

    def of_flow(self, flow_id: int) -> np.ndarray:
        """The packet records of one flow."""
        return self.packets[self.packets["flow"] == flow_id]


def read_probe(prefix: str) -> Probe:
    """Read PREFIX.packets.bin and PREFIX.flows.json (written by `ccswitch-probe`)."""
    packets_path, flows_path = prefix + ".packets.bin", prefix + ".flows.json"
    size = os.path.getsize(packets_path)
    if size % PACKET_DTYPE.itemsize:
        raise ValueError(f"{packets_path}: {size} bytes is not a whole number of "
                         f"{PACKET_DTYPE.itemsize}-byte packet records")
    packets = np.fromfile(packets_path, dtype=PACKET_DTYPE)
    with open(flows_path, encoding="utf-8") as f:
        try:
            meta = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{flows_path}: not JSON ({e})") from None
    if meta.get("version") != FLOWS_VERSION:
        raise ValueError(f"{flows_path}: version {meta.get('version')!r}, this reader knows {FLOWS_VERSION}")
    flows = {}
    for entry in meta.get("flows") or []:
        fid = int(entry["flow"])
        if fid in flows:
            raise ValueError(f"{flows_path}: flow {fid} listed twice")
        flows[fid] = entry
    return Probe(prefix=prefix, packets=packets, meta=meta, flows=flows)


def _percentiles(values: np.ndarray, qs: Sequence[float]) -> List[Optional[float]]:
    if values.size == 0:
        return [None] * len(qs)
    return [float(v) for v in np.percentile(values, qs)]


def flow_metrics(probe: Probe, flow_id: int) -> dict:
    """One flow's figures: delay_p50/p95/p99_ms (one-way delay of its delivered packets that
    matched a sender timestamp; None without any), delay_samples, path_drops (segments sent
    minus received, at least 0), and from the server's TCP_INFO retrans_segs, retrans_bytes,
    srtt_ms, min_rtt_ms (None when the probe caught no TCP_INFO)."""
    if flow_id not in probe.flows:
        raise KeyError(f"{probe.prefix}: no flow {flow_id} in the flows file (flows: {sorted(probe.flows)})")
    entry = probe.flows[flow_id]
    pk = probe.of_flow(flow_id)
    owd_ms = pk["owd_us"][(pk["flags"] & FLAG_MATCHED) != 0].astype(np.float64) / 1000.0
    p50, p95, p99 = _percentiles(owd_ms, (50, 95, 99))
    info = entry.get("tcp_info")
    out = {"delay_p50_ms": p50, "delay_p95_ms": p95, "delay_p99_ms": p99, "delay_samples": int(owd_ms.size),
           "path_drops": max(0, int(entry["segments_sent"]) - int(entry["segments_received"])),
           "retrans_segs": None, "retrans_bytes": None, "srtt_ms": None, "min_rtt_ms": None}
    if info:
        out["retrans_segs"] = int(info["total_retrans"])
        out["retrans_bytes"] = int(info["bytes_retrans"])
        out["srtt_ms"] = info["srtt_us"] / 1000.0
        out["min_rtt_ms"] = info["min_rtt_us"] / 1000.0
    return out


def match_flows(probe: Probe, client_ports: Mapping[object, int]) -> Dict[object, int]:
    """The probe's flow id of each of the unit's flows, matched by client port (curl reports
    `%{local_port}`): {key: flow_id} for every key whose port the probe saw. Should a port
    appear on several probe flows (a port reused within one unit), the one that delivered the
    most bytes is taken."""
    by_port: Dict[int, int] = {}
    for fid, entry in probe.flows.items():
        port = int(entry["client_port"])
        if port not in by_port or entry.get("bytes_received", 0) > probe.flows[by_port[port]].get("bytes_received", 0):
            by_port[port] = fid
    return {key: by_port[int(port)] for key, port in client_ports.items() if port is not None and int(port) in by_port}


def throughput_bins(probe: Probe, t0_ns: int, bin_s: float = BIN_S) -> Dict[int, np.ndarray]:
    """Mbit/s of TCP payload arriving at the client per flow and bin: bin i covers
    [t0 + i*bin_s, t0 + (i+1)*bin_s). Every flow of the flows file gets an array, all of one
    length (up to the bin of the last packet of any flow); packets before t0 are not binned."""
    bin_ns = int(round(bin_s * 1e9))
    if bin_ns <= 0:
        raise ValueError(f"bin width must be positive, got {bin_s} s")
    pk = probe.packets[probe.packets["t_ns"] >= t0_ns]
    index = ((pk["t_ns"] - np.uint64(t0_ns)) // np.uint64(bin_ns)).astype(np.int64)
    n_bins = int(index.max()) + 1 if index.size else 0
    out = {}
    for fid in probe.flows:
        mine = pk["flow"] == fid
        counts = np.bincount(index[mine], weights=pk["bytes"][mine].astype(np.float64), minlength=n_bins)
        out[fid] = counts * 8 / bin_s / 1e6
    return out


def write_throughput_csv(path: str, bins: Mapping[int, np.ndarray], bin_s: float = BIN_S) -> None:
    """PREFIX.throughput.csv: header `flow,t_s,mbps`, then one line per flow and bin, t_s the
    bin's start relative to the unit's start (atomic)."""
    from .results import write_text_atomic

    lines = ["flow,t_s,mbps"]
    for flow, values in bins.items():
        lines += [f"{flow},{round(i * bin_s, 6):g},{float(v):.6g}" for i, v in enumerate(values)]
    write_text_atomic(path, "\n".join(lines) + "\n")


def read_throughput_csv(path: str) -> Dict[int, np.ndarray]:
    """The bins of a throughput CSV, {flow: Mbit/s per bin}, bins in file order."""
    out: Dict[int, List[float]] = {}
    with open(path, encoding="utf-8") as f:
        head = f.readline().strip()
        if head != "flow,t_s,mbps":
            raise ValueError(f"{path}: header {head!r}, expected 'flow,t_s,mbps'")
        for n, line in enumerate(f, start=2):
            if not line.strip():
                continue
            try:
                flow, _, mbps = line.split(",")
                out.setdefault(int(flow), []).append(float(mbps))
            except ValueError:
                raise ValueError(f"{path}: line {n}: {line.strip()!r} is not 'flow,t_s,mbps'") from None
    return {k: np.asarray(v) for k, v in out.items()}


def jain_index(values: Iterable[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n * sum x^2): 1 when all are equal, 1/n when one
    flow has everything."""
    x = np.asarray(list(values), dtype=np.float64)
    if x.size == 0:
        raise ValueError("Jain's index of no values")
    if (x < 0).any():
        raise ValueError(f"Jain's index needs non-negative values, got {x.tolist()}")
    square_sum = float(np.sum(x * x))
    if square_sum == 0:
        raise ValueError("Jain's index of all-zero values is undefined")
    return float(np.sum(x) ** 2 / (x.size * square_sum))


Source = Union[Probe, Mapping[int, np.ndarray]]


def shared_interval(source: Source, flows: Sequence[int], bin_s: float = BIN_S) -> Optional[Tuple[float, float]]:
    """(t_start, t_end) in seconds where every one of `flows` is active, from its first to its
    last delivered byte; None when they do not overlap (or one delivered nothing).

    From a Probe: times on the probe's clock (CLOCK_MONOTONIC seconds) of the first and last
    packet with payload. From bins ({flow: Mbit/s per bin}): seconds from the bins' origin,
    a flow active from the start of its first non-empty bin to the end of its last."""
    spans = []
    for fid in flows:
        if isinstance(source, Probe):
            pk = source.of_flow(fid)
            t = pk["t_ns"][pk["bytes"] > 0]
            if t.size == 0:
                return None
            spans.append((int(t.min()) / 1e9, int(t.max()) / 1e9))
        else:
            nonzero = np.flatnonzero(np.asarray(source[fid]) > 0)
            if nonzero.size == 0:
                return None
            spans.append((nonzero[0] * bin_s, (nonzero[-1] + 1) * bin_s))
    if not spans:
        return None
    start, end = max(s for s, _ in spans), min(e for _, e in spans)
    return (start, end) if end > start else None


def jain_over_shared(source: Source, flows: Sequence[int], bin_s: float = BIN_S,
                     t0_ns: Optional[int] = None) -> Tuple[Optional[float], float]:
    """(Jain's index, shared_s): Jain's index over the flows' mean throughputs in the 100 ms
    bins where all of them are active (from the bin of each one's first delivered byte to that
    of its last), and that interval's length. A Probe is binned from `t0_ns` (default: its first
    packet of these flows). (None, 0.0) for fewer than two flows or flows that never overlap."""
    if len(flows) < 2:
        return None, 0.0
    if isinstance(source, Probe):
        if t0_ns is None:
            t = source.packets["t_ns"][np.isin(source.packets["flow"], list(flows))]
            if t.size == 0:
                return None, 0.0
            t0_ns = int(t.min())
        bins = throughput_bins(source, t0_ns, bin_s)
    else:
        bins = source
    span = shared_interval(bins, flows, bin_s)
    if span is None:
        return None, 0.0
    first, last = int(round(span[0] / bin_s)), int(round(span[1] / bin_s))
    means = [float(np.mean(np.asarray(bins[f])[first:last])) for f in flows]
    return jain_index(means), (last - first) * bin_s


def ideal_fct_s(size: int, rtt_s: float, rate_mbps: float) -> float:
    """FCT of `size` bytes on an empty path without slow start: one RTT to connect, one for the
    request, then the bytes at the link rate."""
    if rate_mbps <= 0:
        raise ValueError(f"link rate must be positive, got {rate_mbps} Mbit/s")
    return 2 * rtt_s + size * 8 / (rate_mbps * 1e6)


def size_bucket(size: int) -> str:
    """The workload size bucket of a request of `size` bytes (SIZE_BUCKETS)."""
    for name, lo, hi in SIZE_BUCKETS:
        if size >= lo and (hi is None or size <= hi):
            return name
    raise ValueError(f"request size must be >= 0 bytes, got {size}")


def workload_metrics(requests: Sequence[dict]) -> dict:
    """Per size bucket b (SIZE_BUCKETS) of a workload's request lines: fct_{b}_p50_s,
    fct_{b}_p99_s (curl's time_total), slowdown_{b}_p50, slowdown_{b}_p99 (percentiles with
    linear interpolation, over the completed requests) and n_{b} (completed requests). A bucket
    without any completed request has n = 0 and None figures; slowdown is None where the ideal
    FCT is unknown (trace links)."""
    out = {}
    for name, _, _ in SIZE_BUCKETS:
        done = [r for r in requests if r.get("ok") and r.get("fct_s") is not None and size_bucket(r["size"]) == name]
        fct = np.asarray([r["fct_s"] for r in done], dtype=np.float64)
        slow = np.asarray([r["slowdown"] for r in done if r.get("slowdown") is not None], dtype=np.float64)
        out[f"fct_{name}_p50_s"], out[f"fct_{name}_p99_s"] = _percentiles(fct, (50, 99))
        out[f"slowdown_{name}_p50"], out[f"slowdown_{name}_p99"] = _percentiles(slow, (50, 99))
        out[f"n_{name}"] = len(done)
    return out


def harm(reference: float, with_a: float, higher_is_better: bool) -> float:
    """Harm that scheme A does to a competitor (Ware et al., HotNets 2019): x = the
    competitor's metric when the other flow runs the competitor's own algorithm (`reference`),
    y = when it runs A (`with_a`). (x - y) / x where more is better (throughput), (y - x) / y
    where less is better (delay); at least 0 (A doing better by the competitor is no harm)."""
    x, y = float(reference), float(with_a)
    if higher_is_better:
        if x <= 0:
            raise ValueError(f"harm on a higher-is-better metric needs a positive reference, got {reference}")
        value = (x - y) / x
    else:
        if y <= 0:
            raise ValueError(f"harm on a lower-is-better metric needs a positive value with A, got {with_a}")
        value = (y - x) / y
    return max(0.0, value)


def _median_ci95(values: np.ndarray, seed: int, n_resamples: int) -> Tuple[float, float]:
    """95% percentile-bootstrap interval of the median (scipy.stats.bootstrap, seeded)."""
    if np.all(values == values[0]):  # every resample is the same: scipy would warn and give NaN
        return float(values[0]), float(values[0])
    import inspect

    from scipy.stats import bootstrap

    gen = np.random.default_rng(seed)
    seed_kw = {"rng": gen} if "rng" in inspect.signature(bootstrap).parameters else {"random_state": gen}
    res = bootstrap((values,), np.median, vectorized=True, confidence_level=0.95, n_resamples=n_resamples,
                    method="percentile", **seed_kw)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):  # a degenerate resampling
        lo = hi = float(np.median(values))
    return lo, hi


def paired_harm(reference: Sequence[float], with_a: Sequence[float], higher_is_better: bool, *,
                seed: int = HARM_SEED, n_resamples: int = HARM_RESAMPLES) -> dict:
    """Harm over repetitions paired by index (reference[i] and with_a[i] ran in the same
    repetition): {"harm": median of the pairs' harms, "ci95": [lo, hi] (bootstrap over the pairs)
    or None, "n_pairs", "reason": None, or why there is no interval ("n = 3: too few for an
    interval" below HARM_MIN_PAIRS pairs; "no pairs")}."""
    if len(reference) != len(with_a):
        raise ValueError(f"need equally many paired values, got {len(reference)} and {len(with_a)}")
    n = len(reference)
    if n == 0:
        return {"harm": None, "ci95": None, "n_pairs": 0, "reason": "no pairs"}
    harms = np.asarray([harm(x, y, higher_is_better) for x, y in zip(reference, with_a)], dtype=np.float64)
    out = {"harm": float(np.median(harms)), "ci95": None, "n_pairs": n, "reason": None}
    if n < HARM_MIN_PAIRS:
        out["reason"] = f"n = {n}: too few for an interval"
    else:
        out["ci95"] = list(_median_ci95(harms, seed, n_resamples))
    return out


def phase_metrics(probe: Probe, flow_id: int, t0_ns: int, starts_s: Sequence[float]) -> List[dict]:
    """A flow's figures in each phase of a path schedule: phase k covers [starts_s[k],
    starts_s[k+1]) seconds after `t0_ns` (the last one runs to the flow's last packet), by
    the packets' arrival at the client. Per phase: at_s, until_s, packets, throughput_mbps
    (payload delivered over the phase's part of the flow), delay_min/p50/p95_ms."""
    pk = probe.of_flow(flow_id)
    t = (pk["t_ns"].astype(np.int64) - int(t0_ns)) / 1e9
    out = []
    for k, start in enumerate(starts_s):
        end = starts_s[k + 1] if k + 1 < len(starts_s) else (float(t.max()) if t.size else start)
        sel = (t >= start) & (t < end) if k + 1 < len(starts_s) else (t >= start)
        part = pk[sel]
        owd = part["owd_us"][(part["flags"] & FLAG_MATCHED) != 0].astype(np.float64) / 1000.0
        span = (float(t[sel].max()) - start) if k + 1 == len(starts_s) and part.size else end - start
        p50, p95 = _percentiles(owd, (50, 95))
        out.append({"at_s": float(start), "until_s": float(start + span), "packets": int(part.size),
                    "throughput_mbps": float(part["bytes"].sum()) * 8 / span / 1e6 if span > 0 else None,
                    "delay_min_ms": float(owd.min()) if owd.size else None, "delay_p50_ms": p50, "delay_p95_ms": p95})
    return out


#: How far above the link rate a flow's throughput may read before it is a measurement fault
#: (curl's byte count over its time_total, which includes the handshake, is never above it).
THROUGHPUT_SLACK = 0.02
#: mm-delay releases packets on whole milliseconds: one may arrive up to 1 ms early.
DELAY_SLACK_MS = 1.0


def physical_problems(flow: Mapping[str, object], *, link_mbps: Optional[float], one_way_ms: float) -> List[str]:
    """What a flow's figures claim that the path cannot do: more than the link rate (+2%), a
    median one-way delay below the propagation delay, more bytes received than sent. An empty
    list for a sound measurement; the runner records and reports any."""
    out = []
    tput = flow.get("throughput_mbps")
    if link_mbps and tput is not None and tput > link_mbps * (1 + THROUGHPUT_SLACK):
        out.append(f"throughput {tput:.2f} Mbit/s above the link's {link_mbps:g}")
    p50 = flow.get("delay_p50_ms")
    if p50 is not None and p50 < one_way_ms - DELAY_SLACK_MS:
        out.append(f"delay p50 {p50:.1f} ms below the one-way propagation delay {one_way_ms:g} ms")
    return out
