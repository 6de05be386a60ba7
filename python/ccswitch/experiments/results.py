"""Result files of a run, all written atomically (temp name in the same directory, then rename).

A run directory holds:
  transfers.parquet  one row per transfer (schema TRANSFER_SCHEMA); only a finished run has it
  transfers.jsonl    the same rows appended as they happen (survives an interrupted run)
  summary.json       per (client, scheme) statistics + run metadata
  summary.txt        the summary table as text
  tct.png            TCT per client and scheme
  scenario.toml      copy of the scenario that was run
  logs/              nginx, agent and shim logs
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from typing import Dict, List, Sequence

#: Columns of transfers.parquet, in order, with their Arrow types (by name).
TRANSFER_COLUMNS = [
    ("client", "string"),
    ("scheme", "string"),
    ("repetition", "int32"),     # 1-based
    ("file_bytes", "int64"),
    ("tct_s", "float64"),        # curl time_total (null on error)
    ("ttfb_s", "float64"),       # curl time_starttransfer
    ("connect_s", "float64"),    # curl time_connect
    ("bytes", "int64"),          # curl size_download
    ("http_code", "int32"),
    ("sha256_ok", "bool"),
    ("cc_observed", "string"),   # congestion control seen on the server socket (ss -ti), if caught
    ("started_at", "string"),    # ISO 8601 UTC
    ("wall_s", "float64"),       # wall time of the whole mahimahi+curl invocation
    ("error", "string"),         # null when the transfer succeeded
]


@contextmanager
def atomic_path(path):
    """Yield a temporary path next to `path`; rename it onto `path` only if the block succeeds."""
    path = os.fspath(path)
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=d)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def write_text_atomic(path, text: str) -> None:
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())


def write_json_atomic(path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=False, allow_nan=False) + "\n")


def _arrow_schema():
    import pyarrow as pa

    types = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(),
             "float64": pa.float64(), "bool": pa.bool_()}
    return pa.schema([(name, types[t]) for name, t in TRANSFER_COLUMNS])


def write_transfers_parquet(path, rows: Sequence[Dict]) -> None:
    """Write transfer rows to a Parquet file atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    columns = {name: [r.get(name) for r in rows] for name, _ in TRANSFER_COLUMNS}
    table = pa.Table.from_pydict(columns, schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_transfers_parquet(path) -> List[Dict]:
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


class JsonlLog:
    """Log of rows (truncated when opened), one JSON object per line, flushed after each row."""

    def __init__(self, path):
        self.path = os.fspath(path)
        self._f = open(self.path, "w", encoding="utf-8")

    def append(self, row: Dict) -> None:
        self._f.write(json.dumps(row) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def plot_tct(path, rows: Sequence[Dict], clients: Sequence[str], schemes: Sequence[str], title: str = "") -> None:
    """Box plot plus individual points of TCT per scheme, one panel per client; atomic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = max(1, len(clients))
    panel_w = max(3.5, 1.0 * len(schemes) + 1.5)
    fig, axes = plt.subplots(1, n, figsize=(min(panel_w * n, 30.0), 4.2), squeeze=False)
    for ax, client in zip(axes[0], clients):
        data, labels = [], []
        for s in schemes:
            vals = [r["tct_s"] for r in rows
                    if r["client"] == client and r["scheme"] == s and not r.get("error") and r.get("sha256_ok")]
            data.append(vals)
            labels.append(s)
        positions = list(range(1, len(schemes) + 1))
        nonempty = [(p, d) for p, d in zip(positions, data) if d]
        if nonempty:
            ax.boxplot([d for _, d in nonempty], positions=[p for p, _ in nonempty], widths=0.5,
                       showfliers=False, medianprops={"color": "black"})
        for p, d in zip(positions, data):
            if d:
                k = len(d)
                xs = [p + (0.18 * ((i / (k - 1)) - 0.5) if k > 1 else 0.0) for i in range(k)]
                ax.scatter(xs, d, s=14, alpha=0.7, zorder=3)
        ax.set_xticks(positions)
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
        ax.set_title(client, fontsize=10)
        ax.set_ylabel("TCT (s)")
        top = max((max(d) for d in data if d), default=1.0)
        ax.set_ylim(0, top * 1.12)
        ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)
