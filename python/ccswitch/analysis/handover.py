"""Per-flow selection and live handover in experiment results: the agent's flow events,
matched to transfers, plotted, and the analyses of the handover scenarios.

The agent started with `--events FILE` appends one JSON object per line (`t_us` = its wall
clock, µs since the Unix epoch; `*_bps` in bit/s):

    {"event": "flow",   "t_us", "datapath", "sid", "src", "sport", "dst", "dport", "algorithm"}
    {"event": "report", "t_us", "datapath", "sid", "algorithm", "cwnd_bytes", "pacing_rate_bps",
                        "rtt_us", "acked_bytes", "lost_packets", "bytes_in_flight",
                        "delivery_rate_bps", "timeout"}
    {"event": "handover", "t_us", "datapath", "sid", "from", "to", "kind", "reason", "features",
                        "cwnd_bytes", "pacing_rate_bps"}
    {"event": "close",  "t_us", "datapath", "sid", "algorithm", "reports", "handovers"}

A flow is (datapath, sid) within one agent's file; `dst:dport` is the client as the server
sees it. The runner runs one transfer at a time and knows the address the server saw for it
(`ss` in the server namespace during the transfer), so a transfer's flow is the one created
during the transfer's wall-clock window whose `dst:dport` is that address (the window alone
when the address was not caught; the flow that acknowledged most bytes if several remain).
Its events are copied into `flows/NNN-LABEL.jsonl`, and the row gets `algorithms` (in the
order the flow ran them), `handover_events` (each with `t_s`, seconds since the flow was created)
and `events` (that file, relative to the run directory); `handovers.jsonl` lists every handover
of the run with its transfer.

Throughput over time is the bytes the reports acknowledge (`acked_bytes` is per report) per
250 ms bin of the agent's clock. The analyses (`ccswitch analyze RUN_DIR`):
  smoothness  per handover: throughput in the 2 s after it against the new algorithm's steady
              state (median over the run's transfers of its fixed scheme on the same datapath,
              their first 2 s excluded), stalls (500 ms bins without a delivered byte while
              data was outstanding), and bursts (bytes in flight growing beyond the window)
  mix         per datapath: mean TCT per scheme over all (client, size) cells; a policy
              against the fixed schemes' average, the best fixed scheme, and the per-cell oracle
  mcc         per datapath: mean TCT over the clients per scheme; the policy must beat every
              fixed scheme
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..experiments import results
from ..experiments.scenario import Scenario, ScenarioError, load_scenario

#: Slack around a transfer's wall-clock window when matching flows: before it only clock
#: granularity (the connection cannot precede curl; flows a restarted agent is re-announced
#: come just before), after it the agent's delay in handling the CREATE.
MATCH_SLACK_BEFORE_S = 0.05
MATCH_SLACK_AFTER_S = 0.5
#: How long the runner waits after a transfer for its flow's close event.
CLOSE_WAIT_S = 2.0
#: Throughput bins of the plots.
PLOT_BIN_S = 0.25

# -- smoothness (MCC Fig. 5)
AFTER_HANDOVER_S = 2.0
#: a fixed scheme's start-up, excluded from its steady-state throughput
STEADY_SKIP_S = 2.0
STALL_BIN_S = 0.5
#: throughput after a handover must reach this fraction of the new algorithm's steady state
SMOOTH_RATIO_TARGET = 0.8
#: bytes in flight may exceed the window by up to two full segments (whole segments are sent)
BURST_TOLERANCE_BYTES = 2 * 1500

# -- mix (Mystique Fig. 8) and MCC
MIX_REDUCTION_TARGET = 0.18
ORACLE_TOLERANCE = 0.05
#: MCC's published means (s) for its WiFi case, printed beside ours
MCC_PUBLISHED_S = {"policy:mcc-wifi": 2.10, "bbr": 2.75, "westwood": 2.34}


class HandoverError(ValueError):
    """Bad run directory or events file; the message says what and where."""


# ----------------------------------------------------------------------- events


@dataclass
class FlowEvents:
    """The events of one flow of one agent, in file order."""

    datapath: int
    sid: int
    events: List[dict] = field(default_factory=list)
    flow: Optional[dict] = None
    close: Optional[dict] = None

    @property
    def key(self) -> Tuple[int, int]:
        return self.datapath, self.sid

    @property
    def start_us(self) -> int:
        return int((self.flow or self.events[0])["t_us"])

    @property
    def peer(self) -> Optional[str]:
        if self.flow is None:
            return None
        return format_peer(self.flow.get("dst"), self.flow.get("dport"))

    @property
    def reports(self) -> List[dict]:
        return [e for e in self.events if e["event"] == "report"]

    @property
    def handovers(self) -> List[dict]:
        return [e for e in self.events if e["event"] == "handover"]

    @property
    def on_report_errors(self) -> int:
        """Exceptions the flow's Python algorithm raised in on_report (the close event's
        total, else the latest report's running count; 0 for flows that never raised)."""
        if self.close is not None and "on_report_errors" in self.close:
            return int(self.close["on_report_errors"] or 0)
        return max((int(e.get("on_report_errors") or 0) for e in self.events if e["event"] == "report"), default=0)

    @property
    def acked_bytes(self) -> int:
        return sum(int(e.get("acked_bytes") or 0) for e in self.events if e["event"] == "report")

    def algorithms(self) -> List[str]:
        """The algorithms the flow ran, in order (initial, then each handover's target)."""
        first = None
        if self.flow is not None:
            first = self.flow.get("algorithm")
        if first is None:
            sw = self.handovers
            reps = self.reports
            first = sw[0].get("from") if sw else (reps[0].get("algorithm") if reps else None)
        out = [first] if first is not None else []
        for s in self.handovers:
            out.append(s.get("to"))
        return out


def format_peer(ip, port) -> Optional[str]:
    if ip is None or port is None:
        return None
    ip = str(ip)
    if ip.startswith("::ffff:"):
        ip = ip[len("::ffff:"):]
    return f"{ip}:{int(port)}"


_EVENT_KINDS = ("flow", "report", "handover", "close")
#: Event kinds of earlier agents and their names now (a handover was logged as "switch", and
#: the close event counted "switches"); events files in stored runs keep being read.
RENAMED_EVENT_KINDS = {"switch": "handover"}
RENAMED_EVENT_FIELDS = {"switches": "handovers"}


def upgrade_event(ev: dict) -> dict:
    """An event as written by any agent, in today's names (the event itself, updated)."""
    kind = ev.get("event")
    if kind in RENAMED_EVENT_KINDS:
        ev["event"] = RENAMED_EVENT_KINDS[kind]
    for old, new in RENAMED_EVENT_FIELDS.items():
        if old in ev and new not in ev:
            ev[new] = ev.pop(old)
    return ev


def parse_event_line(line: str, where: str) -> Optional[dict]:
    """One line of an events file; None for a blank line; HandoverError naming `where`
    for anything that is not an event object."""
    line = line.strip()
    if not line:
        return None
    try:
        ev = json.loads(line)
    except json.JSONDecodeError as e:
        raise HandoverError(f"{where}: not JSON: {e}") from None
    if isinstance(ev, dict):
        upgrade_event(ev)
    if not isinstance(ev, dict) or ev.get("event") not in _EVENT_KINDS:
        raise HandoverError(f"{where}: not an event (\"event\" must be one of {', '.join(_EVENT_KINDS)})")
    for k in ("t_us", "datapath", "sid"):
        if not isinstance(ev.get(k), int) or isinstance(ev.get(k), bool):
            raise HandoverError(f"{where}: {ev['event']} event without an integer {k!r}")
    return ev


class EventStream:
    """An agent's events file read incrementally while the agent appends to it: `poll()`
    reads the complete lines added since the last call (a line still being written waits)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.flows: Dict[Tuple[int, int], FlowEvents] = {}
        self.bad_lines = 0
        self._offset = 0
        self._line_no = 0

    def poll(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return
        end = data.rfind(b"\n")
        if end < 0:
            return
        self._offset += end + 1
        for raw in data[:end].split(b"\n"):
            self._line_no += 1
            try:
                ev = parse_event_line(raw.decode("utf-8", "replace"), f"{self.path}:{self._line_no}")
            except HandoverError:
                self.bad_lines += 1
                continue
            if ev is not None:
                self.add(ev)

    def add(self, ev: dict) -> None:
        key = (ev["datapath"], ev["sid"])
        fl = self.flows.get(key)
        if fl is None or (ev["event"] == "flow" and (fl.flow is not None or fl.close is not None)):
            # a sid reused after its flow closed starts a new flow
            fl = FlowEvents(*key)
            self.flows[key] = fl
        fl.events.append(ev)
        if ev["event"] == "flow":
            fl.flow = ev
        elif ev["event"] == "close":
            fl.close = ev


def read_events(path: str) -> List[dict]:
    """All events of a file (an agent's or a transfer's slice), strictly: a bad line raises."""
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                ev = parse_event_line(line, f"{path}:{i}")
                if ev is not None:
                    out.append(ev)
    except FileNotFoundError:
        raise HandoverError(f"{path}: events file not found") from None
    return out


def flow_of(events: Sequence[dict]) -> FlowEvents:
    """The events of one transfer's slice as a FlowEvents."""
    if not events:
        raise HandoverError("no events")
    fl = FlowEvents(events[0]["datapath"], events[0]["sid"])
    for ev in events:
        fl.events.append(ev)
        if ev["event"] == "flow":
            fl.flow = ev
        elif ev["event"] == "close":
            fl.close = ev
    return fl


# ----------------------------------------------------------------------- matching


def match_flow(flows: Iterable[FlowEvents], t0_us: int, t1_us: int,
               peer: Optional[str] = None) -> Tuple[Optional[FlowEvents], str]:
    """The flow of a transfer that ran from `t0_us` to `t1_us` (wall clock) and that the
    server saw coming from `peer` ("ip:port", None if unknown). Returns (flow, how matched)."""
    lo, hi = t0_us - int(MATCH_SLACK_BEFORE_S * 1e6), t1_us + int(MATCH_SLACK_AFTER_S * 1e6)
    in_window = [f for f in flows if lo <= f.start_us <= hi]
    how = "time"
    if peer is not None:
        by_peer = [f for f in in_window if f.peer == peer]
        if by_peer:
            in_window, how = by_peer, "address+time"
    if not in_window:
        return None, "none"
    if len(in_window) > 1:
        how += f" (largest of {len(in_window)})"
    return max(in_window, key=lambda f: f.acked_bytes), how


def handover_records(flow: FlowEvents) -> List[dict]:
    """The flow's handovers for a transfer row: `t_s` since the flow was created."""
    t0 = flow.start_us
    out = []
    for s in flow.handovers:
        out.append({
            "t_s": round((s["t_us"] - t0) / 1e6, 6), "from": s.get("from"), "to": s.get("to"),
            "kind": s.get("kind"), "reason": s.get("reason"), "features": s.get("features"),
            "cwnd_bytes": s.get("cwnd_bytes"), "pacing_rate_bps": s.get("pacing_rate_bps"),
        })
    return out


def transfer_label(index: int, row: dict) -> str:
    text = f"{index:03d}-{row['client']}-{row['file_bytes']}-{row['scheme']}-rep{row['repetition']}"
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", text)


class EventCollector:
    """Used by the runner: after each agent-scheme transfer, finds its flow in the agent's
    events file, writes the flow's slice, and fills the row's `algorithms`, `handovers`,
    `events`, `flow`, `on_report_errors`; appends the handovers to the run's `handovers.jsonl`."""

    def __init__(self, out_dir: str) -> None:
        self.out_dir = out_dir
        self.flows_dir = os.path.join(out_dir, "flows")
        self.streams: Dict[str, EventStream] = {}
        self.handover_log = results.JsonlLog(os.path.join(out_dir, "handovers.jsonl"))

    def close(self) -> None:
        self.handover_log.close()

    def attach(self, index: int, row: dict, events_path: Optional[str], t0_s: float, t1_s: float,
               peer: Optional[str], *, wait_close_s: float = CLOSE_WAIT_S, sleep=None) -> None:
        import time

        sleep = sleep or time.sleep
        row.update(algorithms=None, handover_events=None, events=None, flow=None, events_note=None, on_report_errors=None)
        if events_path is None:
            row["events_note"] = "the agent wrote no events file"
            return
        stream = self.streams.get(events_path)
        if stream is None:
            stream = self.streams[events_path] = EventStream(events_path)
        t0_us, t1_us = int(t0_s * 1e6), int(t1_s * 1e6)
        deadline = time.monotonic() + wait_close_s
        while True:
            stream.poll()
            flow, how = match_flow(stream.flows.values(), t0_us, t1_us, peer)
            if (flow is not None and flow.close is not None) or time.monotonic() >= deadline:
                break
            sleep(0.1)
        if flow is None:
            row["events_note"] = (f"no flow of {os.path.relpath(events_path, self.out_dir)} started during "
                                  f"the transfer" + (f" from {peer}" if peer else ""))
            return
        os.makedirs(self.flows_dir, exist_ok=True)
        slice_path = os.path.join(self.flows_dir, transfer_label(index, row) + ".jsonl")
        results.write_text_atomic(slice_path, "".join(json.dumps(e) + "\n" for e in flow.events))
        row["events"] = os.path.relpath(slice_path, self.out_dir)
        row["flow"] = {"datapath": flow.datapath, "sid": flow.sid, "peer": flow.peer, "matched_by": how,
                       "closed": flow.close is not None, "reports": len(flow.reports)}
        row["algorithms"] = flow.algorithms()
        row["handover_events"] = handover_records(flow)
        row["on_report_errors"] = flow.on_report_errors
        for s in row["handover_events"]:
            self.handover_log.append({"transfer": index, "client": row["client"], "scheme": row["scheme"],
                                    "repetition": row["repetition"], "file_bytes": row["file_bytes"], **s})


# ----------------------------------------------------------------------- series


@dataclass
class Series:
    """A flow's reports as time series, t in seconds since the flow was created."""

    t: List[float]
    cwnd: List[int]
    inflight: List[int]
    acked: List[int]
    delivery_bps: List[float]
    handovers: List[dict]  # handover events with "t" added

    @classmethod
    def of(cls, flow: FlowEvents) -> "Series":
        t0 = flow.start_us
        reps = flow.reports
        sw = [dict(s, t=(s["t_us"] - t0) / 1e6) for s in flow.handovers]
        return cls(t=[(r["t_us"] - t0) / 1e6 for r in reps],
                   cwnd=[int(r.get("cwnd_bytes") or 0) for r in reps],
                   inflight=[int(r.get("bytes_in_flight") or 0) for r in reps],
                   acked=[int(r.get("acked_bytes") or 0) for r in reps],
                   delivery_bps=[float(r.get("delivery_rate_bps") or 0) for r in reps], handovers=sw)

    @property
    def end(self) -> float:
        return self.t[-1] if self.t else 0.0

    def acked_between(self, a: float, b: float) -> int:
        """Bytes acknowledged by the reports with a < t <= b."""
        return sum(x for t, x in zip(self.t, self.acked) if a < t <= b)

    def throughput_bins(self, width_s: float) -> Tuple[List[float], List[float]]:
        """(bin starts, Mbit/s) over the flow's reports."""
        n = int(self.end // width_s) + 1 if self.t else 0
        got = [0] * n
        for t, x in zip(self.t, self.acked):
            got[min(int(t // width_s), n - 1)] += x
        return [i * width_s for i in range(n)], [b * 8 / width_s / 1e6 for b in got]


# ----------------------------------------------------------------------- plots


def plot_flow(path: str, flow: FlowEvents, title: str = "") -> None:
    """Window and bytes in flight (top) and throughput (bottom) over time, handovers as
    vertical lines labelled with the new algorithm; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = Series.of(flow)
    fig, (ax_w, ax_t) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    ax_w.step(s.t, [c / 1000 for c in s.cwnd], where="post", label="cwnd", lw=1.2)
    ax_w.plot(s.t, [b / 1000 for b in s.inflight], lw=0.6, alpha=0.6, label="bytes in flight")
    ax_w.set_ylabel("kB")
    ax_w.legend(loc="upper right", fontsize=8)
    starts, mbps = s.throughput_bins(PLOT_BIN_S)
    ax_t.step(starts, mbps, where="post", label=f"delivered / {PLOT_BIN_S * 1000:.0f} ms", lw=1.2)
    ax_t.plot(s.t, [d / 1e6 for d in s.delivery_bps], lw=0.6, alpha=0.5, label="delivery rate (report)")
    ax_t.set_ylabel("Mbit/s")
    ax_t.set_xlabel("time since the flow started (s)")
    ax_t.legend(loc="upper right", fontsize=8)
    first = flow.algorithms()[:1]
    if first:
        ax_w.text(0.0, 1.02, first[0], transform=ax_w.get_xaxis_transform(), fontsize=8, color="C3")
    for sw in s.handovers:
        for ax in (ax_w, ax_t):
            ax.axvline(sw["t"], color="C3", ls="--", lw=0.9)
        ax_w.text(sw["t"], 1.02, str(sw.get("to")), transform=ax_w.get_xaxis_transform(), fontsize=8,
                  color="C3", ha="left")
    for ax in (ax_w, ax_t):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with results.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def plot_run(run_dir: str, rows: Sequence[dict], schemes: Optional[Iterable[str]] = None,
             transfer: Optional[int] = None) -> List[str]:
    """Plot the transfers of a run that have events: those of `schemes` (labels; None = every
    policy scheme), or only transfer number `transfer` (1-based). Returns the files written."""
    wanted = set(schemes) if schemes is not None else None
    written = []
    for i, row in enumerate(rows, 1):
        index = row.get("transfer", i)
        if transfer is not None and index != transfer:
            continue
        if transfer is None:
            if wanted is None and ":policy:" not in row["scheme"]:
                continue
            if wanted is not None and row["scheme"] not in wanted:
                continue
        if not row.get("events"):
            if transfer is not None:
                raise HandoverError(f"transfer {transfer} ({row['scheme']}) has no events "
                                     f"({row.get('events_note') or 'not an agent scheme'})")
            continue
        flow = flow_of(read_events(os.path.join(run_dir, row["events"])))
        path = os.path.join(run_dir, os.path.splitext(row["events"])[0] + ".png")
        tct = f", TCT {row['tct_s']:.2f} s" if row.get("tct_s") is not None else ""
        plot_flow(path, flow, f"{row['client']} {row['file_bytes']} B {row['scheme']} rep {row['repetition']}{tct}")
        written.append(path)
    if transfer is not None and not written:
        raise HandoverError(f"{run_dir}: no transfer number {transfer} (there are {len(rows)})")
    return written


# ----------------------------------------------------------------------- run directories


def load_rows(run_dir: str) -> List[dict]:
    """The rows of a run, from transfers.jsonl (which carries the handovers)."""
    path = os.path.join(run_dir, "transfers.jsonl")
    if not os.path.exists(path):
        raise HandoverError(f"{run_dir}: no transfers.jsonl (is it a run directory?)")
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(results.upgrade_row(json.loads(line)))
                except json.JSONDecodeError as e:
                    raise HandoverError(f"{path}:{i}: not JSON: {e}") from None
    return rows


def load_run_scenario(run_dir: str) -> Scenario:
    path = os.path.join(run_dir, "scenario.toml")
    try:
        return load_scenario(path, check_files=False, stored=True)
    except ScenarioError as e:
        raise HandoverError(str(e)) from None


def _ok(row: dict) -> bool:
    return not row.get("error") and bool(row.get("sha256_ok")) and row.get("tct_s") is not None


def _kind(scheme: str) -> str:
    return scheme.split(":", 1)[0]


def _algorithm(scheme: str) -> str:
    return scheme.split(":", 1)[1]


def _is_policy(scheme: str) -> bool:
    return _algorithm(scheme).startswith("policy:")


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _fmt_table(head: Sequence[str], lines: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]
    out = ["  ".join(str(c).ljust(w) for c, w in zip(head, widths)).rstrip(),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(c).ljust(w) for c, w in zip(l, widths)).rstrip() for l in lines]
    return "\n".join(out)


def _pass(ok: Optional[bool]) -> str:
    return "-" if ok is None else ("PASS" if ok else "FAIL")


# ----------------------------------------------------------------------- smoothness


def steady_throughput_bps(row: dict, flow: Optional[FlowEvents]) -> Optional[float]:
    """A fixed-scheme transfer's steady throughput: bytes acknowledged after its first
    STEADY_SKIP_S over the time that took; without events, file size / TCT."""
    if flow is not None:
        s = Series.of(flow)
        if s.end > STEADY_SKIP_S + 1.0:
            return s.acked_between(STEADY_SKIP_S, s.end) * 8 / (s.end - STEADY_SKIP_S)
    if _ok(row) and row["tct_s"] > 0:
        return row["file_bytes"] * 8 / row["tct_s"]
    return None


def after_handover(series: Series, sw: dict) -> dict:
    """Throughput, stalls and bursts in the AFTER_HANDOVER_S after a handover (sw has "t")."""
    t_sw = sw["t"]
    span = min(AFTER_HANDOVER_S, series.end - t_sw)
    thr = series.acked_between(t_sw, t_sw + span) * 8 / span if span > 0 else None
    stalls = 0
    for k in range(int(round(AFTER_HANDOVER_S / STALL_BIN_S))):
        a, b = t_sw + k * STALL_BIN_S, t_sw + (k + 1) * STALL_BIN_S
        if b > series.end:
            break
        before = [f for t, f in zip(series.t, series.inflight) if t <= a]
        outstanding = before[-1] > 0 if before else False
        if outstanding and series.acked_between(a, b) == 0:
            stalls += 1
    # A burst: bytes in flight growing past both the window in force (from the handover on, the
    # one the new algorithm inherited, then each report's) and what was already out.
    before = [(c, f) for t, c, f in zip(series.t, series.cwnd, series.inflight) if t <= t_sw]
    window = sw.get("cwnd_bytes")
    if window is None and before:
        window = before[-1][0]
    prev_inflight = before[-1][1] if before else 0
    max_excess, max_inflight, window_at_max = None, 0, None
    for t, c, f in zip(series.t, series.cwnd, series.inflight):
        if t <= t_sw:
            continue
        if t > t_sw + AFTER_HANDOVER_S:
            break
        if window is not None:
            excess = f - max(window, prev_inflight)
            if max_excess is None or excess > max_excess:
                max_excess = excess
            if f >= max_inflight:
                max_inflight, window_at_max = f, window
        window, prev_inflight = c, f
    return {"throughput_bps": thr, "span_s": span, "stall_bins": stalls, "max_inflight_bytes": max_inflight,
            "window_bytes": window_at_max, "max_excess_bytes": max_excess,
            "burst": None if max_excess is None else max_excess > BURST_TOLERANCE_BYTES}


def smoothness(run_dir: str, rows: Sequence[dict]) -> dict:
    """Per handover of every policy transfer: its figures against the new algorithm's steady
    state on the same datapath (the other datapath's fixed scheme if that one has none)."""
    flows: Dict[int, Optional[FlowEvents]] = {}

    def flow(i: int, row: dict) -> Optional[FlowEvents]:
        if i not in flows:
            flows[i] = flow_of(read_events(os.path.join(run_dir, row["events"]))) if row.get("events") else None
        return flows[i]

    steady: Dict[str, List[float]] = {}
    for i, row in enumerate(rows):
        if row["scheme"].split(":")[0] in ("kernel", "ovs") and not _is_policy(row["scheme"]):
            v = steady_throughput_bps(row, flow(i, row))
            if v is not None:
                steady.setdefault(row["scheme"], []).append(v)
    steady_med = {k: _median(v) for k, v in steady.items()}
    out = []
    for i, row in enumerate(rows):
        if not _is_policy(row["scheme"]):
            continue
        fl = flow(i, row)
        if fl is None:
            out.append({"transfer": row.get("transfer", i + 1), "scheme": row["scheme"], "handover": None,
                        "note": row.get("events_note") or "no events"})
            continue
        series = Series.of(fl)
        kind = _kind(row["scheme"])
        for sw in series.handovers:
            new = str(sw.get("to"))
            ref_scheme = next((s for s in (f"{kind}:{new}", f"{'ovs' if kind == 'kernel' else 'kernel'}:{new}")
                               if s in steady_med), None)
            fig = after_handover(series, sw)
            ref = steady_med.get(ref_scheme) if ref_scheme else None
            ratio = fig["throughput_bps"] / ref if ref and fig["throughput_bps"] is not None else None
            out.append({
                "transfer": row.get("transfer", i + 1), "scheme": row["scheme"], "repetition": row["repetition"],
                "handover": f"{sw.get('from')}->{new}", "t_s": sw["t"], "reason": sw.get("reason"),
                "steady_scheme": ref_scheme, "steady_bps": ref, "ratio": ratio,
                "smooth": None if ratio is None else ratio >= SMOOTH_RATIO_TARGET,
                **fig,
            })
    handovers = [r for r in out if r.get("handover")]
    verdict = {
        "handovers": len(handovers),
        "all_smooth": all(r["smooth"] for r in handovers) if handovers else None,
        "stalls": sum(r["stall_bins"] for r in handovers),
        "bursts": sum(1 for r in handovers if r["burst"]),
    }
    return {"analysis": "smoothness", "steady_bps": steady_med, "handovers": out, "verdict": verdict}


def format_smoothness(res: dict) -> str:
    mb = lambda x: "-" if x is None else f"{x / 1e6:.2f}"
    kb = lambda x: "-" if x is None else f"{x / 1000:.1f}"
    lines = []
    for r in res["handovers"]:
        if not r.get("handover"):
            lines.append([str(r["transfer"]), r["scheme"], "-", "-", "-", "-", "-", "-", "-", "-", "-", r["note"]])
            continue
        short = "" if r["span_s"] >= AFTER_HANDOVER_S - 1e-9 else f" ({r['span_s']:.1f} s left)"
        lines.append([
            str(r["transfer"]), r["scheme"], r["handover"], f"{r['t_s']:.2f}", mb(r["throughput_bps"]) + short,
            mb(r["steady_bps"]), "-" if r["ratio"] is None else f"{100 * r['ratio']:.0f}%",
            str(r["stall_bins"]), kb(r["max_inflight_bytes"]), kb(r["window_bytes"]),
            "-" if r["burst"] is None else ("yes" if r["burst"] else "no"), _pass(r["smooth"]),
        ])
    head = ["#", "scheme", "handover", "t s", "Mbit/s 2 s after", "steady", "ratio", "stalls", "max inflight kB",
            "window kB", "burst", f">= {SMOOTH_RATIO_TARGET:.0%}"]
    v = res["verdict"]
    steady = ", ".join(f"{k} {x / 1e6:.2f}" for k, x in sorted(res["steady_bps"].items())) or "none"
    return "\n".join([
        f"smoothness (MCC Fig. 5): per handover, throughput in the {AFTER_HANDOVER_S:g} s after it vs the new "
        f"algorithm's steady state;", f"stalls = {STALL_BIN_S * 1000:.0f} ms bins without a delivered byte "
        f"while data was outstanding; burst = in flight grew > {BURST_TOLERANCE_BYTES} B past the window",
        f"steady state (Mbit/s, median of fixed schemes, first {STEADY_SKIP_S:g} s excluded): {steady}",
        _fmt_table(head, lines),
        f"{v['handovers']} handovers: throughput target {_pass(v['all_smooth'])}, stalls {v['stalls']} "
        f"({_pass(v['stalls'] == 0 if v['handovers'] else None)}), bursts {v['bursts']} "
        f"({_pass(v['bursts'] == 0 if v['handovers'] else None)})",
    ])


# ----------------------------------------------------------------------- TCT tables (mix, mcc)


def cell_means(rows: Sequence[dict], timeout_s: float) -> Dict[Tuple[str, int], Dict[str, dict]]:
    """(client, file_bytes) -> scheme -> {"mean": TCT mean over repetitions, "failed": n}.
    A failed transfer counts as the timeout (censored: the scheme is not flattered)."""
    acc: Dict[Tuple[str, int], Dict[str, list]] = {}
    for r in rows:
        cell = acc.setdefault((r["client"], r["file_bytes"]), {})
        v = cell.setdefault(r["scheme"], [[], 0])
        if _ok(r):
            v[0].append(float(r["tct_s"]))
        else:
            v[0].append(float(timeout_s))
            v[1] += 1
    return {c: {s: {"mean": sum(v[0]) / len(v[0]), "failed": v[1], "n": len(v[0])} for s, v in d.items()}
            for c, d in acc.items()}


def _final_algorithms(rows: Sequence[dict], cell: Tuple[str, int], scheme: str) -> str:
    """The algorithms a policy's transfers of a cell ran (each distinct sequence, with count)."""
    seqs: Dict[str, int] = {}
    for r in rows:
        if (r["client"], r["file_bytes"]) == cell and r["scheme"] == scheme and r.get("algorithms"):
            k = ">".join(str(a) for a in r["algorithms"])
            seqs[k] = seqs.get(k, 0) + 1
    return ", ".join(f"{k} x{n}" if n > 1 else k for k, n in seqs.items()) or "?"


def mix(rows: Sequence[dict], timeout_s: float) -> dict:
    """Per datapath: mean TCT per scheme over the (client, size) cells; each policy against
    the fixed schemes' average (mean of the per-scheme reductions), the best fixed scheme
    and the oracle (best fixed scheme per cell in hindsight)."""
    means = cell_means(rows, timeout_s)
    out = {"analysis": "mix", "datapaths": {}}
    for kind in ("kernel", "ovs"):
        schemes = list(dict.fromkeys(r["scheme"] for r in rows if _kind(r["scheme"]) == kind))
        fixed = [s for s in schemes if not _is_policy(s)]
        policies = [s for s in schemes if _is_policy(s)]
        if not fixed or not policies:
            continue
        cells = sorted(c for c, d in means.items() if all(s in d for s in fixed + policies))
        if not cells:
            continue
        mean = {s: sum(means[c][s]["mean"] for c in cells) / len(cells) for s in fixed + policies}
        best_fixed = min(fixed, key=lambda s: mean[s])
        oracle_cells = {c: min(fixed, key=lambda s: means[c][s]["mean"]) for c in cells}
        oracle = sum(means[c][oracle_cells[c]]["mean"] for c in cells) / len(cells)
        per_policy = {}
        for p in policies:
            reductions = [1 - mean[p] / mean[f] for f in fixed]
            per_policy[p] = {
                "mean_tct_s": mean[p],
                "reduction_vs_fixed_avg": sum(reductions) / len(reductions),
                "reduction_vs_fixed_avg_tct": 1 - mean[p] / (sum(mean[f] for f in fixed) / len(fixed)),
                "reduction_vs_best": 1 - mean[p] / mean[best_fixed],
                "over_oracle": mean[p] / oracle - 1,
                "chosen": {f"{c[0]}@{c[1]}": _final_algorithms(rows, c, p) for c in cells},
            }
            pp = per_policy[p]
            pp["pass_avg"] = pp["reduction_vs_fixed_avg"] >= MIX_REDUCTION_TARGET
            pp["pass_best"] = pp["reduction_vs_best"] >= 0
            pp["pass_oracle"] = pp["over_oracle"] <= ORACLE_TOLERANCE
        out["datapaths"][kind] = {
            "cells": [f"{c[0]}@{c[1]}" for c in cells], "mean_tct_s": mean, "best_fixed": best_fixed,
            "oracle_tct_s": oracle, "oracle_choice": {f"{c[0]}@{c[1]}": oracle_cells[c] for c in cells},
            "cell_tct_s": {f"{c[0]}@{c[1]}": {s: means[c][s]["mean"] for s in fixed + policies} for c in cells},
            "failed": {s: sum(means[c][s]["failed"] for c in cells) for s in fixed + policies},
            "policies": per_policy,
        }
    return out


def format_mix(res: dict) -> str:
    if not res["datapaths"]:
        return "mix: no datapath has both fixed and policy schemes with results"
    parts = []
    for kind, d in res["datapaths"].items():
        schemes = list(d["mean_tct_s"])
        head = ["cell"] + [_algorithm(s) for s in schemes] + ["oracle", "policy ran"]
        pol = next(iter(d["policies"]))
        lines = []
        for c in d["cells"]:
            row = d["cell_tct_s"][c]
            lines.append([c] + [f"{row[s]:.2f}" for s in schemes]
                         + [_algorithm(d["oracle_choice"][c]), d["policies"][pol]["chosen"][c]])
        lines.append(["mean"] + [f"{d['mean_tct_s'][s]:.2f}" for s in schemes] + [f"{d['oracle_tct_s']:.2f}", ""])
        failed = {s: n for s, n in d["failed"].items() if n}
        text = [f"mix on the {kind} datapath: mean TCT (s) per (client, size) cell, over the repetitions"
                + (f"; failed transfers counted as the timeout: {failed}" if failed else ""),
                _fmt_table(head, lines)]
        for p, f in d["policies"].items():
            text.append(
                f"{p}: mean {f['mean_tct_s']:.2f} s; reduction vs the fixed schemes (mean of per-scheme "
                f"reductions) {100 * f['reduction_vs_fixed_avg']:.1f}% (target >= {MIX_REDUCTION_TARGET:.0%}) "
                f"{_pass(f['pass_avg'])} [vs their average TCT {100 * f['reduction_vs_fixed_avg_tct']:.1f}%]; "
                f"vs the best fixed ({d['best_fixed']}) {100 * f['reduction_vs_best']:+.1f}% (must not lose) "
                f"{_pass(f['pass_best'])}; over the per-cell oracle {100 * f['over_oracle']:+.1f}% "
                f"(within {ORACLE_TOLERANCE:.0%}) {_pass(f['pass_oracle'])}")
        parts.append("\n".join(text))
    return "\n\n".join(parts)


def mcc(rows: Sequence[dict], timeout_s: float) -> dict:
    """Per datapath: mean TCT over the clients (cells) per scheme; each policy must beat
    every fixed scheme."""
    means = cell_means(rows, timeout_s)
    out = {"analysis": "mcc", "datapaths": {}}
    for kind in ("kernel", "ovs"):
        schemes = list(dict.fromkeys(r["scheme"] for r in rows if _kind(r["scheme"]) == kind))
        cells = sorted(c for c, d in means.items() if all(s in d for s in schemes))
        if not schemes or not cells:
            continue
        mean = {s: sum(means[c][s]["mean"] for c in cells) / len(cells) for s in schemes}
        fixed = [s for s in schemes if not _is_policy(s)]
        verdicts = {p: (all(mean[p] < mean[f] for f in fixed) if fixed else None)
                    for p in schemes if _is_policy(p)}
        out["datapaths"][kind] = {
            "cells": [f"{c[0]}@{c[1]}" for c in cells], "mean_tct_s": mean,
            "cell_tct_s": {f"{c[0]}@{c[1]}": {s: means[c][s]["mean"] for s in schemes} for c in cells},
            "chosen": {p: {f"{c[0]}@{c[1]}": _final_algorithms(rows, c, p) for c in cells}
                       for p in verdicts},
            "policy_beats_all_fixed": verdicts,
        }
    return out


def format_mcc(res: dict) -> str:
    if not res["datapaths"]:
        return "mcc: no results"
    parts = []
    for kind, d in res["datapaths"].items():
        schemes = list(d["mean_tct_s"])
        head = ["cell"] + [_algorithm(s) for s in schemes]
        lines = [[c] + [f"{d['cell_tct_s'][c][s]:.2f}" for s in schemes] for c in d["cells"]]
        lines.append(["mean"] + [f"{d['mean_tct_s'][s]:.2f}" for s in schemes])
        pub = ["MCC paper"] + [f"{MCC_PUBLISHED_S[_algorithm(s)]:.2f}" if _algorithm(s) in MCC_PUBLISHED_S
                               else "-" for s in schemes]
        text = [f"mcc on the {kind} datapath: mean TCT (s) per client, over the repetitions",
                _fmt_table(head, lines + [pub])]
        for p, ok in d["policy_beats_all_fixed"].items():
            text.append(f"{p} ran: " + "; ".join(f"{c}: {a}" for c, a in d["chosen"][p].items()))
            text.append(f"{p} beats every fixed scheme on mean TCT: {_pass(ok)}")
        parts.append("\n".join(text))
    return "\n\n".join(parts)


# ----------------------------------------------------------------------- entry points


def analyze(run_dir: str, kind: Optional[str] = None, rows: Optional[Sequence[dict]] = None,
            scenario: Optional[Scenario] = None) -> Tuple[dict, str]:
    """Run the scenario's analysis (or `kind`) on a run directory: (result, text)."""
    scenario = scenario or load_run_scenario(run_dir)
    kind = kind or scenario.analysis
    if kind is None:
        raise HandoverError(f"{run_dir}: the scenario names no analysis; choose one with --kind smoothness|mix|mcc")
    rows = list(rows) if rows is not None else load_rows(run_dir)
    if kind == "smoothness":
        res = smoothness(run_dir, rows)
        return res, format_smoothness(res)
    if kind == "mix":
        res = mix(rows, scenario.timeout_s)
        return res, format_mix(res)
    if kind == "mcc":
        res = mcc(rows, scenario.timeout_s)
        return res, format_mcc(res)
    raise HandoverError(f"unknown analysis {kind!r} (smoothness, mix, mcc)")


def _cli_analyze(args) -> int:
    try:
        res, text = analyze(args.run_dir, getattr(args, "kind", None))
    except (HandoverError, OSError) as e:
        args.parser.error(str(e))
    print(json.dumps(res, indent=2) if args.json else text)
    return 0


def _cli_plot(args) -> int:
    try:
        scenario = load_run_scenario(args.run_dir)
        rows = load_rows(args.run_dir)
        schemes = None
        if args.scheme:
            schemes = args.scheme
        elif args.transfer is None:
            schemes = [s.label for s in scenario.schemes if s.is_policy] + list(scenario.plot_schemes)
        written = plot_run(args.run_dir, rows, schemes, args.transfer)
    except (HandoverError, OSError) as e:
        args.parser.error(str(e))
    for p in written:
        print(p)
    if not written:
        print("no transfer with events to plot", flush=True)
        return 1
    return 0


def add_cli(sub) -> None:
    p = sub.add_parser("plot-flows", help="plot window and throughput over time of a run's transfers",
                       description="Plot cwnd, bytes in flight and throughput over time, with algorithm "
                                   "handovers, for transfers of a run (default: those of policy schemes and "
                                   "the scenario's plot_schemes); PNGs next to flows/NNN-*.jsonl.")
    p.add_argument("run_dir")
    p.add_argument("--transfer", type=int, help="only transfer N (1-based, the order of transfers.jsonl)")
    p.add_argument("--scheme", action="append", help="plot every transfer of this scheme (repeatable)")
    p.set_defaults(func=_cli_plot, parser=p)
    what = "run the scenario's handover analysis (smoothness, mix or mcc) on a run directory"
    a = sub.add_parser("analyze", help=what, description=what + "; see ccswitch.analysis.handover")
    a.add_argument("run_dir")
    a.add_argument("--kind", choices=("smoothness", "mix", "mcc"),
                   help="analysis to run instead of the scenario's `analysis`")
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    a.set_defaults(func=_cli_analyze, parser=a)
    s = sub.add_parser("handover", help="handover analyses: smoothness | mix | mcc RUN_DIR")
    s.add_argument("kind", choices=("smoothness", "mix", "mcc"))
    s.add_argument("run_dir")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=_cli_analyze, parser=s)
