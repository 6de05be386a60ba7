"""Training rows for temporal selection: one row per phase of a path that changes mid-flow.

A temporal policy (`[decide] temporal = true`, a sliding window) re-decides on every report
from the features of its last N samples. On a path with a schedule (a sweep's step paths)
the best algorithm of each phase can differ, so each phase is a training row of its own:

- **features**: the agent's own feature code (`ccswitch._native.decision_features`) over the
  last `samples` reports of the initial algorithm's flow before the phase ends, the window a
  deployed policy sees once the phase has settled;
- **per-candidate figures**: each candidate's throughput and p95 one-way delay in that phase
  (the probe's `phases`, stored in every cell), and as its `tct_<alg>` the time the phase's
  traffic took per megabit (1 / throughput), so that every objective of
  `objectives.cost_matrix` reads a phase row as it reads a whole transfer: `tct` favours the
  fastest in the phase, `power` and `tct_delay_budget` see the phase's delay. Harm needs a
  competitor, which step paths have not: NaN.

A report's time in the unit is its datapath time since the flow's start plus the connection
time (the phases are timed from the unit's start); a few milliseconds off, against phases of
seconds. The initial algorithm's reports after a step show that algorithm on the new path; a
flow running another algorithm then would show somewhat different features (a known bias of
observing under one algorithm, as for the first decision).
"""

from __future__ import annotations

import os
import statistics
from typing import Any, Dict, List, Optional, Sequence

from ..experiments import sweep_paths as _sweep_paths, sweep_spec as _sweep_spec, sweep_store as _sweep_store
from .dataset import DEFAULT_MSS, DatasetError, native_features


def _report_times_s(reports: Sequence[dict], flow: Optional[dict], connect_s: float) -> List[float]:
    start = (flow or {}).get("t_us", reports[0].get("t_us") if reports else 0)
    return [(r["t_us"] - start) / 1e6 + connect_s for r in reports]


def phase_rows(store: str, samples: int) -> List[Dict[str, Any]]:
    """Every phase of every path with a schedule in a sweep store, as a dataset-style row
    (path columns, `phase`, `phase_at_s`, `f_*`, and `tct_/thr_/dp95_/harm_` per candidate).
    A phase the initial flow's stored reports do not reach, or that fewer than half of the
    candidates measured, gives no row."""
    native = native_features()
    names = list(native.FEATURE_NAMES)
    spec = _sweep_spec.load_spec(os.path.join(store, "spec.toml"))
    cols = {c: _sweep_spec.dataset_column_name(c) for c in spec.candidates}
    by_path: Dict[str, List[dict]] = {}
    for doc in _sweep_store.CellStore(store).cells():
        if doc["path"].get("schedule"):
            by_path.setdefault(doc["path_id"], []).append(doc)
    rows = []
    for pid, docs in sorted(by_path.items()):
        steps = docs[0]["path"]["schedule"]
        observed = [d for d in docs if d["candidate"] == spec.initial and d.get("flow", {}).get("reports")]
        if not observed:
            continue
        obs = observed[0]
        reports = _sweep_store.expand_reports(obs["flow"]["reports"])
        times = _report_times_s(reports, obs["flow"].get("flow"), obs["row"].get("connect_s") or 0.0)
        mss = int((obs["flow"].get("flow") or {}).get("mss") or DEFAULT_MSS)
        for k, step in enumerate(steps):
            end = steps[k + 1]["at_s"] if k + 1 < len(steps) else float("inf")
            upto = sum(1 for t in times if t < end)
            first = sum(1 for t in times if t < step["at_s"])
            if upto - first < 2:
                continue  # the stored reports do not reach into this phase
            window = reports[max(first, upto - samples):upto]
            feats = native.decision_features(window, mss, "first", samples, min(samples, len(window)))["features"]
            figures: Dict[str, Dict[str, float]] = {}
            for c in spec.candidates:
                thr, dp95 = [], []
                for d in docs:
                    ph = (d["row"].get("phases") or [])
                    if d["candidate"] != c or d["row"].get("error") is not None or k >= len(ph):
                        continue
                    if ph[k].get("throughput_mbps"):
                        thr.append(ph[k]["throughput_mbps"])
                    if ph[k].get("delay_p95_ms") is not None:
                        dp95.append(ph[k]["delay_p95_ms"])
                figures[c] = {"thr": statistics.median(thr) if thr else None,
                              "dp95": statistics.median(dp95) if dp95 else None}
            if sum(1 for f in figures.values() if f["thr"]) * 2 < len(spec.candidates):
                continue
            p = obs["path"]
            row: Dict[str, Any] = {
                "path_id": pid, "sweep": spec.name, "datapath": obs["datapath"], "phase": k,
                "phase_at_s": float(step["at_s"]), "rtt_ms": float(2 * (p.get("delay_ms") or 0)),
                "loss_downlink": float(p.get("loss_downlink") or 0.0) + float(step.get("loss_downlink") or 0.0),
                "step_delay_ms": float(step.get("delay_ms") or 0.0), "mean_mbps": obs.get("mean_mbps"),
                "queue_bdp": _sweep_paths.queue_bdp(p.get("queue_packets"), obs.get("mean_mbps"),
                                                    2 * (p.get("delay_ms") or 0)),
                "file_bytes": obs["file_bytes"], "initial": spec.initial,
                # decided by construction: a temporal policy decides on the window that ends here
                "decision_at_s": round(times[upto - 1], 6),
            }
            for name in names:
                v = feats.get(name)
                row["f_" + name] = None if v is None else float(v)
            for c, f in figures.items():
                col = cols[c]
                row["tct_" + col] = 1.0 / f["thr"] if f["thr"] else None
                row["thr_" + col] = f["thr"]
                row["dp95_" + col] = f["dp95"]
                row["harm_" + col] = None
            rows.append(row)
    if not rows and by_path:
        raise DatasetError(f"{store}: {len(by_path)} path(s) with a schedule but no phase the stored reports reach")
    return rows
