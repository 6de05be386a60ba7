"""The agent's per-flow events in experiment results: read, matched to transfers, collected.

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
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from . import results
from .statistics import PYTHON_COUNTS
# an events file's lines are read by the run directory's reader (rundir.py); `read_events` is
# also this module's for the readers of an agent's whole file (sweep.py)
from .rundir import RunDirectoryError, parse_event_line, read_events  # noqa: F401

#: Slack around a transfer's wall-clock window when matching flows: before it only clock
#: granularity (the connection cannot precede curl; flows a restarted agent is re-announced
#: come just before), after it the agent's delay in handling the CREATE.
MATCH_SLACK_BEFORE_S = 0.05
MATCH_SLACK_AFTER_S = 0.5
#: How long the runner waits after a transfer for its flow's close event.
CLOSE_WAIT_S = 2.0


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

    def python_count(self, key: str) -> int:
        """One of the agent's counts of the flow's Python algorithm (statistics.PYTHON_COUNTS:
        `on_report_errors`, `python_timeouts`, ...): the close event's total, else the latest
        report's running count; 0 for flows where it never happened."""
        if self.close is not None and key in self.close:
            return int(self.close[key] or 0)
        return max((int(e.get(key) or 0) for e in self.events if e["event"] == "report"), default=0)

    @property
    def on_report_errors(self) -> int:
        """Exceptions the flow's Python algorithm raised in on_report."""
        return self.python_count("on_report_errors")

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
            except RunDirectoryError:
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


def flow_of(events: Sequence[dict], where: str = "the transfer's slice") -> FlowEvents:
    """The events of one transfer's slice as a FlowEvents; `where` names the slice in the
    error an empty one raises."""
    if not events:
        raise RunDirectoryError(f"{where}: no events")
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
    `events`, `flow` and the agent's Python counts (statistics.PYTHON_COUNTS); appends the handovers to the run's `handovers.jsonl`."""

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
        row.update(algorithms=None, handover_events=None, events=None, flow=None, events_note=None,
                   **{k: None for k, _ in PYTHON_COUNTS})
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
        for k, _ in PYTHON_COUNTS:
            row[k] = flow.python_count(k)
        for s in row["handover_events"]:
            self.handover_log.append({"transfer": index, "client": row["client"], "scheme": row["scheme"],
                                    "repetition": row["repetition"], "file_bytes": row["file_bytes"], **s})
