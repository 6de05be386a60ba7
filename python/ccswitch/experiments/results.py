"""Result files of a run, all written atomically (temp name in the same directory, then rename).

A run directory holds:
  transfers.parquet  one row per transfer (schema TRANSFER_SCHEMA); only a finished run has it
  transfers.jsonl    the same rows appended as they happen (survives an interrupted run, which
                     a rerun with the same --out resumes: units.plan_run)
  transfers-superseded.jsonl  rows of an earlier invocation that reached no verdict and ran again
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
from typing import Dict, List, Optional, Sequence, Tuple

from .compat import upgrade_row

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
    ("load1", "float64"),        # the machine's 1-minute load average as the transfer started
    ("error", "string"),         # null when the transfer succeeded; curl's own message on a curl error
    ("curl_exit", "int32"),      # curl's exit status when it failed (28 = timed out), else null
    # the path (scenario's client), so that a table of transfers needs no scenario beside it
    ("path", "string"),          # in words: "RTT 50 ms, 24 Mbit/s, loss 1% down, queue 100 pkts"
    ("rtt_ms", "int32"),         # 2 x delay_ms (mm-delay), without queueing
    ("delay_ms", "int32"),
    ("loss_downlink", "float64"),
    ("loss_uplink", "float64"),
    ("downlink_mbps", "float64"),  # constant-rate links; null with traces
    ("uplink_mbps", "float64"),
    ("downlink_trace", "string"),  # trace files; null with constant rates
    ("uplink_trace", "string"),
    ("queue_packets", "int32"),  # droptail, both directions; null = unbounded
    # agent schemes (null for native ones)
    ("algorithms", "list<string>"),  # the algorithms the flow ran, in order
    ("handovers", "int32"),          # number of algorithm changes (len(handover_events))
    ("handover_events", "handover_events"),  # each handover: t_s, from, to, kind, reason, features (JSON), ...
    ("on_report_errors", "int64"),   # exceptions a Python algorithm's on_report raised for this flow
    ("python_bad_values", "int64"),  # its callbacks that set a window or rate the agent refused
    ("python_timeouts", "int64"),    # its callbacks abandoned past the agent's time budget
    ("python_skipped", "int64"),     # its reports answered without calling Python (see agent/src/python_guard.rs)
    ("host", "string"),          # the host the transfer ran on (a distributed run has several)
    ("unit", "string"),          # the transfer's unit key (units.unit_key): what a resumed run skips
    # measurements (experiments/README.md, "Metrics"): the flow of the scheme under test;
    # null when the probe did not run (--no-probe, runs older than the probe)
    ("throughput_mbps", "float64"),   # curl's bytes * 8 / tct_s / 1e6
    ("link_utilisation", "float64"),  # throughput_mbps / downlink_mbps (constant-rate links only)
    ("delay_p50_ms", "float64"),      # one-way delay of delivered, matched packets
    ("delay_p95_ms", "float64"),
    ("delay_p99_ms", "float64"),
    ("delay_samples", "int64"),
    ("retrans_segs", "int64"),        # server TCP_INFO total_retrans (+ ovs_retrans)
    ("retrans_bytes", "int64"),       # server TCP_INFO bytes_retrans
    ("ovs_retrans", "int64"),         # the ovs shim's own retransmissions (ovs schemes only)
    ("srtt_ms", "float64"),           # server TCP_INFO at the end of the connection
    ("min_rtt_ms", "float64"),
    ("path_drops", "int64"),          # data segments sent - received
    ("probe", "string"),              # "probe/NNNNNN": prefix of the probe's files
    ("throughput_bins", "string"),    # "probe/NNNNNN.throughput.csv" (flow,t_s,mbps per 100 ms)
    ("flows", "json"),                # competing flows: a list of per-flow dicts; null for a lone flow
    ("jain", "float64"),              # Jain's index over the shared interval (competing flows)
    ("shared_s", "float64"),          # that interval's length
    ("workload", "json"),             # web workload: counts and FCT/slowdown per size bucket
]

#: Column type "json": a nested value (list or dict) stored as JSON text in Parquet (its keys
#: vary with the scenario, so no fixed Arrow struct) and decoded again by the readers.
JSON_COLUMNS = tuple(name for name, t in TRANSFER_COLUMNS if t == "json")


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

    handover = pa.struct([("t_s", pa.float64()), ("from", pa.string()), ("to", pa.string()), ("kind", pa.string()),
                        ("reason", pa.string()), ("features", pa.string()), ("cwnd_bytes", pa.int64()),
                        ("pacing_rate_bps", pa.int64())])
    types = {"string": pa.string(), "int32": pa.int32(), "int64": pa.int64(),
             "float64": pa.float64(), "bool": pa.bool_(), "list<string>": pa.list_(pa.string()),
             "handover_events": pa.list_(handover), "json": pa.string()}
    return pa.schema([(name, types[t]) for name, t in TRANSFER_COLUMNS])


def _column_value(row: Dict, name: str):
    """A row's value for a Parquet column (derived columns computed, features as JSON text)."""
    if name == "handovers":
        return len(row["handover_events"]) if row.get("handover_events") is not None else None
    if name == "handover_events" and row.get("handover_events") is not None:
        return [dict(s, features=None if s.get("features") is None else json.dumps(s["features"]))
                for s in row["handover_events"]]
    if name in JSON_COLUMNS and row.get(name) is not None and not isinstance(row[name], str):
        return json.dumps(row[name], allow_nan=False)
    return row.get(name)


def write_transfers_parquet(path, rows: Sequence[Dict]) -> None:
    """Write transfer rows to a Parquet file atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema()
    columns = {name: [_column_value(r, name) for r in rows] for name, _ in TRANSFER_COLUMNS}
    table = pa.Table.from_pydict(columns, schema=schema)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_transfers_parquet(path) -> List[Dict]:
    import pyarrow.parquet as pq

    rows = pq.read_table(path).to_pylist()
    for r in rows:
        for name in JSON_COLUMNS:
            if isinstance(r.get(name), str):
                r[name] = json.loads(r[name])
    return [upgrade_row(r) for r in rows]


class JsonlLog:
    """Log of rows, one JSON object per line, flushed after each row. Opening it rewrites the
    file with `rows` (those an earlier invocation finished, when a run resumes), else empty."""

    def __init__(self, path, rows: Sequence[Dict] = ()):
        self.path = os.fspath(path)
        write_text_atomic(self.path, "".join(json.dumps(r) + "\n" for r in rows))
        self._f = open(self.path, "a", encoding="utf-8")

    def append(self, row: Dict) -> None:
        self._f.write(json.dumps(row) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def read_jsonl(path) -> List[Dict]:
    """The rows of a JSONL log (upgraded to today's names). A last line cut short by a killed
    writer is ignored; a bad line elsewhere is an error."""
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().split("\n") if line.strip()]
    rows = []
    for i, line in enumerate(lines):
        try:
            rows.append(upgrade_row(json.loads(line)))
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                break
            raise ValueError(f"{path}: row {i + 1}: not a JSON object") from None
    return rows


def verdict(row: Dict) -> Tuple[bool, str]:
    """Whether a transfer row is a verdict on its scheme: a success, or a failure that is the
    scheme's (curl's own error such as its timeout, an HTTP error, a SHA-256 mismatch). Not a
    verdict: a transfer that did not run, whose agent died (the datapath's fallback ran it), or
    that failed in the harness or mahimahi before curl said anything; a resumed run or sweep
    runs those again."""
    err = row.get("error")
    if row.get("agent_died"):
        return False, f"agent died: {row['agent_died']}"
    if err is None:
        return (True, "ok") if row.get("sha256_ok") else (True, "SHA-256 mismatch")
    if err.startswith("not run:"):
        return False, err
    if row.get("curl_exit") is not None or err.startswith("HTTP "):
        return True, err
    return False, err


def _failed(row: Dict) -> bool:
    return bool(row.get("error")) or not row.get("sha256_ok")


def plot_tct(path, rows: Sequence[Dict], clients: Sequence[str], schemes: Sequence[str], title: str = "",
             paths: Optional[Dict[str, str]] = None) -> List[Dict]:
    """Box plot plus individual points of TCT per scheme, one panel per client, titled with the
    client's path (`paths`: client -> words); failed transfers (errors, SHA-256 mismatches) are
    marked in red under their scheme with their count, so an all-failed cell is visible, not
    empty. Atomic. Returns what each panel shows, read back from its axes (title, tick labels,
    x range, red annotations), for tests and callers that want to say it."""
    from .scenario import display_label
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = paths or {}
    n = max(1, len(clients))
    panel_w = max(3.8, 1.0 * len(schemes) + 1.5)
    fig, axes = plt.subplots(1, n, figsize=(min(panel_w * n, 30.0), 4.6), squeeze=False)
    for ax, client in zip(axes[0], clients):
        data, failed = [], []
        for s in schemes:
            cell = [r for r in rows if r["client"] == client and r["scheme"] == s]
            data.append([r["tct_s"] for r in cell if not _failed(r) and r.get("tct_s") is not None])
            failed.append(sum(1 for r in cell if _failed(r)))
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
        top = max((max(d) for d in data if d), default=1.0)
        ax.set_ylim(0, top * 1.18)
        for p, k in zip(positions, failed):
            if k:
                ax.scatter([p], [top * 0.04], marker="x", color="red", s=60, zorder=4)
                ax.annotate(f"{k} failed", (p, top * 0.04), textcoords="offset points", xytext=(0, 7),
                            ha="center", fontsize=7, color="red")
        ax.set_xlim(0.5, len(schemes) + 0.5)
        ax.set_xticks(positions)
        ax.set_xticklabels([display_label(x) for x in schemes], rotation=30, ha="right", fontsize=8)
        path_text = paths.get(client)
        ax.set_title(f"{client}\n{path_text}" if path_text else client, fontsize=9)
        ax.set_ylabel("TCT (s)")
        ax.grid(axis="y", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    shown = [{"title": ax.get_title(), "ticks": [(t.get_position()[0], t.get_text()) for t in ax.get_xticklabels()],
              "xlim": tuple(ax.get_xlim()), "marks": [(t.xy[0], t.get_text()) for t in ax.texts]}
             for ax in axes[0][:len(clients)]]
    plt.close(fig)
    return shown
