"""A sweep's cell store: one gzipped JSON file per finished cell under
`STORE/cells/<path_id>/<cell key>.json.gz` (the transfer's verdict, TCT, load average at its
start and, for the `initial` algorithm, the flow's agent events: its `flow` event and the first
`MAX_STORED_REPORTS` reports, in columns), plus the spec and its sampled paths. A rerun skips
every cell whose file exists."""

from __future__ import annotations

import glob as _glob
import gzip
import json
import os
from typing import Any, Dict, List, Optional, Sequence

from . import results
from .sweep_paths import Cell, Path, path_id
from .sweep_spec import Spec, SweepError


#: Reports of the initial algorithm's flow kept in a cell: windows of up to this many samples
#: can be recomputed from the store; a flow's later reports add nothing to a first-N window.
MAX_STORED_REPORTS = 600


#: Report fields kept in a cell (the features need the first six).
STORED_REPORT_FIELDS = ("t_us", "dp_us", "rtt_us", "acked_bytes", "lost_packets", "delivery_rate_bps",
                        "timeout", "cwnd_bytes", "bytes_in_flight", "pacing_rate_bps")


#: Row fields kept in a cell.
STORED_ROW_FIELDS = ("tct_s", "ttfb_s", "connect_s", "bytes", "http_code", "sha256_ok", "cc_observed",
                     "started_at", "wall_s", "load1", "error", "curl_exit", "algorithms", "on_report_errors",
                     "python_bad_values", "python_timeouts", "python_skipped",
                     # the packet probe's figures (experiments/README.md, "Metrics"), what objectives read
                     "throughput_mbps", "link_utilisation", "delay_p50_ms", "delay_p95_ms", "delay_p99_ms",
                     "delay_samples", "retrans_segs", "path_drops", "srtt_ms", "min_rtt_ms", "measurement_problems",
                     "probe_ring_dropped", "phases", "flows", "jain", "shared_s", "competitor_mbps")


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
