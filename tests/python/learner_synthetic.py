"""A synthetic dataset in the schema of learner/README.md, for tests only.

Not measured: TCTs come from a toy model (a transfer's time is its size over the lesser of
the link rate and a loss-limited rate, plus slow-start round trips), in which BBR ignores
random loss, Illinois and Hybla suffer less from it than Cubic on short and long paths
respectively, and Hybla starts faster on long paths. It exists so the learner's code and
notebooks can be exercised before, and independently of, a real sweep; it is written to a
temporary directory and never committed.

The objectives' columns come from the same toy: throughput is the file over the TCT; the delay
p95 is half the RTT plus the queue a loss-based sender fills (BBR keeps a fifth of it); a
third of the paths have a competing Cubic flow, which BBR harms most and Cubic (the
reference) not at all. They are drawn from a generator of their own, so the columns above are
what they always were.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np

CANDIDATES = ("bbr", "cubic", "hybla", "illinois")
INITIAL = "cubic"
WINDOW = {"kind": "first", "samples": 20}
DECIDE = {"min_samples": 8}
FEATURES = (
    "min_rtt_ms", "mean_rtt_ms", "max_rtt_ms", "rtt_std_ms", "rtt_cov", "rtt_norm_range",
    "loss_rate", "delivery_rate_mbps", "max_delivery_rate_mbps", "bytes", "elapsed_s", "samples",
)
MSS_BITS = 1448 * 8

#: Harm to a competing Cubic flow per algorithm (plus noise); share of the queue it fills.
_HARM = {"bbr": 0.45, "cubic": 0.0, "hybla": 0.25, "illinois": 0.1}
_QUEUE_FILL = {"bbr": 0.2, "cubic": 0.9, "hybla": 1.0, "illinois": 0.8}

# per algorithm: (loss sensitivity: rate ~ 1/(rtt * sqrt(p)) scaled by this, slow-start RTTs)
_TOY = {
    "bbr": (None, 8.0),
    "cubic": (1.0, 10.0),
    "hybla": (1.6, 4.0),
    "illinois": (2.2, 10.0),
}


def _tct(alg: str, rtt_s: float, loss: float, mbps: float, file_bytes: int, rng) -> float:
    sens, rtts = _TOY[alg]
    rate = mbps * 1e6
    if alg == "bbr":
        rate *= 0.93
    elif loss > 0:
        boost = sens * (1.0 + (alg == "illinois") * max(0.0, 0.06 - rtt_s) * 30 + (alg == "hybla") * rtt_s * 4)
        rate = min(rate, boost * 1.22 * MSS_BITS / (rtt_s * np.sqrt(loss)))
    t = file_bytes * 8 / rate + rtts * rtt_s
    return float(t * rng.uniform(0.96, 1.04))


def synthetic_table(n_paths: int = 60, reps: int = 3, seed: int = 7) -> dict:
    """Columns of a synthetic dataset: `n_paths` paths, `reps` rows each."""
    rng = np.random.default_rng(seed)
    metric_rng = np.random.default_rng(seed + 1_000_003)
    cols: dict = {k: [] for k in (
        "path_id", "sweep", "datapath", "link_kind", "rtt_ms", "loss_downlink", "loss_uplink", "mbps",
        "downlink_trace", "uplink_trace", "queue_packets", "queue_bdp", "has_schedule", "has_competitor",
        "file_bytes", "rep", "initial",
    )}
    for f in FEATURES:
        cols["f_" + f] = []
    cols["decision_at_s"] = []
    for a in CANDIDATES:
        for prefix in ("tct_", "n_", "thr_", "dp95_", "harm_"):
            cols[prefix + a] = []
    for _ in range(n_paths):
        rtt_ms = float(rng.choice([10, 20, 40, 60, 100, 200, 300]) * rng.uniform(0.9, 1.1))
        loss = float(rng.choice([0.0, 0.0, 0.001, 0.005, 0.02]))
        mbps = float(rng.uniform(5, 50))
        file_bytes = int(rng.choice([1_200_000, 10_000_000]))
        qbdp = float(rng.choice([0.5, 1.0, 2.0]))
        qpk = max(4, int(qbdp * mbps * 1e6 * rtt_ms / 1000 / MSS_BITS))
        pid = hashlib.sha256(json.dumps([rtt_ms, loss, mbps, file_bytes, qpk]).encode()).hexdigest()[:16]
        tcts = {}
        for a in CANDIDATES:
            runs = [_tct(a, rtt_ms / 1000, loss, mbps, file_bytes, rng) for _ in range(3)]
            tcts[a] = float(np.median(runs))
        competing = bool(metric_rng.random() < 1 / 3)
        thr = {a: file_bytes * 8 / tcts[a] / 1e6 for a in CANDIDATES}
        dp95 = {a: rtt_ms / 2 + _QUEUE_FILL[a] * qbdp * rtt_ms * metric_rng.uniform(0.8, 1.2) for a in CANDIDATES}
        harm = {a: min(1.0, max(0.0, _HARM[a] + metric_rng.uniform(-0.05, 0.05))) if competing and a != "cubic"
                else (0.0 if competing else None) for a in CANDIDATES}
        for rep in range(reps):
            r = rtt_ms * rng.uniform(1.0, 1.03)
            queue = r * qbdp * rng.uniform(0.0, 0.6)
            mean = r + queue
            mx = r + queue * 2
            std = queue * 0.5
            sent = DECIDE["min_samples"] * max(1.0, mbps * 1e6 * r / 1000 / MSS_BITS / 4)
            lost = rng.binomial(int(sent), loss) if loss > 0 else 0
            rate = mbps * rng.uniform(0.3, 1.0)
            decision = DECIDE["min_samples"] * mean / 1000
            ended_first = file_bytes < 2_000_000 and rng.random() < 0.15
            vals = {
                "min_rtt_ms": r, "mean_rtt_ms": mean, "max_rtt_ms": mx, "rtt_std_ms": std,
                "rtt_cov": std / mean, "rtt_norm_range": (mx - r) / mean,
                "loss_rate": lost / (sent + lost), "delivery_rate_mbps": rate,
                "max_delivery_rate_mbps": rate * rng.uniform(1.0, 1.2),
                "bytes": float(int(sent) * 1448), "elapsed_s": decision,
                "samples": float(DECIDE["min_samples"]),
            }
            for k, v in {
                "path_id": pid, "sweep": "synthetic", "datapath": "kernel", "link_kind": "constant",
                "rtt_ms": rtt_ms, "loss_downlink": loss, "loss_uplink": 0.0, "mbps": mbps,
                "downlink_trace": None, "uplink_trace": None, "queue_packets": qpk, "queue_bdp": qbdp,
                "has_schedule": False, "has_competitor": competing, "file_bytes": file_bytes, "rep": rep, "initial": INITIAL,
                "decision_at_s": None if ended_first else decision,
            }.items():
                cols[k].append(v)
            for f in FEATURES:
                cols["f_" + f].append(vals[f])
            for a in CANDIDATES:
                cols["tct_" + a].append(tcts[a])
                cols["n_" + a].append(3)
                cols["thr_" + a].append(thr[a])
                cols["dp95_" + a].append(dp95[a])
                cols["harm_" + a].append(harm[a])
    return cols


def write_synthetic_parquet(path, **kw) -> str:
    """Write the synthetic dataset to `path` (Parquet, with settings in the metadata as
    `ccswitch dataset` writes them, marked synthetic)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table(synthetic_table(**kw))
    settings = {"synthetic": True, "window": {**WINDOW, **DECIDE}, "initial": INITIAL,
                "candidates": list(CANDIDATES), "features": list(FEATURES)}
    table = table.replace_schema_metadata({**(table.schema.metadata or {}),
                                           b"ccswitch.dataset": json.dumps(settings).encode()})
    pq.write_table(table, str(path))
    return str(path)
