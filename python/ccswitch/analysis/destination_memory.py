"""Per-destination memory in a run (agent/src/memory.rs): where each download started, and what
starting on the remembered algorithm bought, per destination.

The agent's `flow` event says where a new flow's algorithm came from: `start` is "memory" (the
destination's remembered algorithm), "initial" (the policy's), "pinned", "datapath" or
"algorithm", and `memory` what the memory held for the destination when consulted (`prefix`,
`algorithm`, `score`; null when it was off). Every download of a unit (a lone flow, or each
flow of the scheme under test of a client's `flows`) is matched to its flow in the run's agent
events files (`events/agent-NNN.jsonl`) by its client port, within the unit's wall-clock
window.

The schemes compared are a policy scheme with the memory off (`memory.enabled=false` in its
spec) and each scheme of the same policy and other overrides that leaves it on, e.g.
`kernel:policy:mystique:memory.min_score=0.5` against `kernel:policy:mystique:memory.enabled=false`.
A unit's first download is set apart from its later ones: in a scenario where every unit
starts on a fresh agent (experiments/destination-memory.toml), the first starts without memory
under every scheme (a control), and only the later ones may start on what the earlier ones
ended on. Per destination (client): each scheme's median download time with the 95% interval
of the mean, where its downloads started, what they ended on; per pair, statistics.compare's
verdict on the ratio of mean download times, paired by repetition and download.
"""

from __future__ import annotations

import datetime as _dt
import glob
import json
import os
import sys
from collections import Counter
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..experiments import statistics as stats
from ..experiments.events import FlowEvents
from ..experiments.rundir import RunDirectory, RunDirectoryError, read_events
from ..experiments.scenario import display_label

#: Slack around a unit's wall-clock window when matching its downloads' flows: before it, clock
#: granularity; after it, the agent's handling of the close (events.py's own slack and wait).
SLACK_BEFORE_US = 500_000
SLACK_AFTER_US = 3_000_000
#: The override that switches a policy's memory off.
OFF = ("memory.enabled", "false")


# ----------------------------------------------------------------------- schemes


def _policy_parts(label: str) -> Optional[Tuple[tuple, Dict[str, str]]]:
    """((datapath, policy target), overrides) of `kind:policy:TARGET[:K=V,...]`; None otherwise."""
    kind, _, rest = label.partition(":")
    if not rest.startswith("policy:"):
        return None
    target, _, spec = rest[len("policy:"):].partition(":")
    overrides = dict(kv.split("=", 1) for kv in spec.split(",") if "=" in kv)
    return (kind, target), overrides


def memory_pairs(labels: Sequence[str]) -> List[Tuple[str, str]]:
    """(memory on, memory off) pairs of policy schemes: an off scheme overrides
    `memory.enabled=false`; its partners are the schemes of the same datapath, policy and
    overrides other than `memory.*` that do not. In scheme order."""
    def base(label):
        kind_target, overrides = _policy_parts(label)
        return kind_target, tuple(sorted((k, v) for k, v in overrides.items() if not k.startswith("memory.")))

    policies = [l for l in labels if _policy_parts(l) is not None]
    off = [l for l in policies if _policy_parts(l)[1].get(OFF[0]) == OFF[1]]
    return [(on, o) for o in off for on in policies if on not in off and base(on) == base(o)]


# ----------------------------------------------------------------------- matching


def _decoded(value):
    return json.loads(value) if isinstance(value, str) else value


def _ok(d: dict) -> bool:
    return not d.get("error") and bool(d.get("sha256_ok")) and d.get("tct_s") is not None


def unit_downloads(row: dict) -> List[dict]:
    """The downloads of the scheme under test of a unit's row: {flow, tct_s (None if it failed),
    client_port}; a row without `flows` is one download."""
    flows = _decoded(row.get("flows"))
    if not flows:
        return [{"flow": 0, "tct_s": row.get("tct_s") if _ok(row) else None, "client_port": row.get("client_port")}]
    return [{"flow": int(f["flow"]), "tct_s": f.get("tct_s") if _ok(f) else None, "client_port": f.get("client_port")}
            for f in flows if f.get("role", "test") == "test"]


def agent_flows(events: Iterable[dict]) -> List[FlowEvents]:
    """The flows of one agent's events file, in order of creation (a sid used again after its
    flow closed starts a new flow)."""
    out: List[FlowEvents] = []
    current: Dict[tuple, FlowEvents] = {}
    for ev in events:
        key = (ev["datapath"], ev["sid"])
        fl = current.get(key)
        if fl is None or (ev["event"] == "flow" and (fl.flow is not None or fl.close is not None)):
            fl = current[key] = FlowEvents(*key)
            out.append(fl)
        fl.events.append(ev)
        if ev["event"] == "flow":
            fl.flow = ev
        elif ev["event"] == "close":
            fl.close = ev
    return [f for f in out if f.flow is not None]


def flow_start(fl: FlowEvents) -> dict:
    """Where a flow started and what it ended on."""
    memory = fl.flow.get("memory") or {}
    ran = fl.algorithms()
    return {"start": fl.flow.get("start"), "start_algorithm": fl.flow.get("algorithm"),
            "remembered": memory.get("algorithm"), "score": memory.get("score"),
            "consulted": bool(memory), "ended_on": ran[-1] if ran else None}


def _epoch_us(iso: str) -> int:
    return int(_dt.datetime.fromisoformat(iso).timestamp() * 1e6)


def download_records(rows: Sequence[dict], flows: Sequence[FlowEvents]) -> List[dict]:
    """One record per download of the rows' agent units: client, scheme, repetition, flow,
    tct_s, and where its flow started (`flow_start`; `start` None when no flow matched)."""
    by_port: Dict[int, List[FlowEvents]] = {}
    for fl in flows:
        if fl.flow.get("dport") is not None:
            by_port.setdefault(int(fl.flow["dport"]), []).append(fl)
    out = []
    for row in rows:
        if not row.get("started_at") or row.get("wall_s") is None:
            continue
        lo = _epoch_us(row["started_at"]) - SLACK_BEFORE_US
        hi = lo + SLACK_BEFORE_US + int(float(row["wall_s"]) * 1e6) + SLACK_AFTER_US
        for d in unit_downloads(row):
            rec = {"client": row["client"], "scheme": row["scheme"], "repetition": row["repetition"], **d,
                   "start": None, "start_algorithm": None, "remembered": None, "score": None,
                   "consulted": False, "ended_on": None}
            port = d["client_port"]
            found = [f for f in by_port.get(int(port), []) if lo <= f.start_us <= hi] if port else []
            if found:
                rec.update(flow_start(min(found, key=lambda f: f.start_us)))
            out.append(rec)
    return out


# ----------------------------------------------------------------------- figures


def _times(records: Iterable[dict]) -> List[float]:
    return [float(r["tct_s"]) for r in records if r["tct_s"] is not None]


def scheme_rows(records: Sequence[dict]) -> List[dict]:
    """Per client and scheme (first-seen order): downloads, where the first and the later ones
    started, what they ended on, the median download time [95% CI of the mean] of each part."""
    groups: Dict[tuple, List[dict]] = {}
    for r in records:
        groups.setdefault((r["client"], r["scheme"]), []).append(r)
    out = []
    for (client, scheme), recs in groups.items():
        row = {"client": client, "scheme": scheme, "downloads": len(recs),
               "unmatched": sum(1 for r in recs if r["start"] is None),
               "ended_on": dict(Counter(r["ended_on"] for r in recs if r["ended_on"]).most_common())}
        for part, sel in (("first", [r for r in recs if r["flow"] == 0]), ("later", [r for r in recs if r["flow"] > 0])):
            med, ci = stats.median_and_ci95(_times(sel))
            row[part] = {"n": len(_times(sel)), "tct_median_s": med, "tct_ci95": ci,
                         "starts": dict(Counter(r["start"] for r in sel if r["start"]).most_common()),
                         "from_memory": dict(Counter(r["start_algorithm"] for r in sel
                                                     if r["start"] == "memory").most_common())}
        out.append(row)
    return out


def pair_rows(records: Sequence[dict], pairs: Sequence[Tuple[str, str]]) -> List[dict]:
    """Per client and (on, off) pair: statistics.compare of the download times of the first and
    of the later downloads, paired by (repetition, download) where both completed."""
    clients = list(dict.fromkeys(r["client"] for r in records))
    out = []
    for client in clients:
        for on, off in pairs:
            times = {s: {(r["repetition"], r["flow"]): r["tct_s"] for r in records
                         if r["client"] == client and r["scheme"] == s and r["tct_s"] is not None} for s in (on, off)}
            if not times[on] or not times[off]:
                continue
            row = {"client": client, "on": on, "off": off}
            for part, keep in (("first", lambda k: k[1] == 0), ("later", lambda k: k[1] > 0)):
                keys = sorted(k for k in times[on] if k in times[off] and keep(k))
                verdict = stats.compare([times[on][k] for k in keys], [times[off][k] for k in keys])
                row[part] = verdict.as_dict()
            out.append(row)
    return out


def _counts(c: Dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in c.items()) or "-"


def format_memory(schemes: List[dict], pairs: List[dict]) -> str:
    """The analysis as text: one line per client and scheme, then the pairs' verdicts."""
    lines = []
    for r in schemes:
        later = r["later"]
        share = sum(later["starts"].values())
        started = (f"{later['starts'].get('memory', 0)}/{share} ({_counts(later['from_memory'])})" if share else "-")
        lines.append([r["client"], display_label(r["scheme"]), str(r["downloads"]),
                      _counts(r["first"]["starts"]), started,
                      stats.median_ci_text(r["first"]["tct_median_s"], r["first"]["tct_ci95"], 3),
                      stats.median_ci_text(later["tct_median_s"], later["tct_ci95"], 3), _counts(r["ended_on"])])
    head = ["client", "scheme", "downloads", "first: started on", "later: on memory", "first s", "later s", "ended on"]
    text = ("destination memory: every download of a unit (first = the unit's first download, later = the others; "
            "download time median [95% CI of the mean])\n" + stats.text_table(head, lines, right=(2,)))
    if pairs:
        plines = [[p["client"], display_label(p["on"]), display_label(p["off"]), p["first"]["text"], p["later"]["text"]]
                  for p in pairs]
        text += ("\n\nmemory on against off (ratio of mean download times on / off, paired by repetition and "
                 "download, bootstrap 95% CI)\n"
                 + stats.text_table(["client", "memory on", "memory off", "first download", "later downloads"], plines))
    unmatched = sum(r["unmatched"] for r in schemes)
    if unmatched:
        text += f"\n{unmatched} download(s) matched no flow of the agent's events (their start is not counted)"
    return text


def events_files(out_dir: str) -> List[str]:
    return sorted(glob.glob(os.path.join(out_dir, "events", "agent-*.jsonl")))


def analyze(out_dir: str, rows: Sequence[dict], labels: Sequence[str]) -> Tuple[dict, str]:
    """(the analysis for summary.json's `destination_memory`, its text) of the agent schemes'
    rows of the run in `out_dir`, whose agents' events are in `out_dir/events/`."""
    flows: List[FlowEvents] = []
    problems = []
    for path in events_files(out_dir):
        try:
            flows += agent_flows(read_events(path))
        except RunDirectoryError as e:
            problems.append(str(e))
    policy = {l for l in labels if _policy_parts(l) is not None}
    records = download_records([r for r in rows if r.get("scheme") in policy], flows)
    schemes = scheme_rows(records)
    pairs = pair_rows(records, memory_pairs(labels))
    text = format_memory(schemes, pairs)
    if problems:
        text += "\nunreadable events: " + "; ".join(problems)
    return {"schemes": schemes, "pairs": pairs, "downloads": records, "problems": problems}, text


def main(argv: Sequence[str]) -> int:
    """`python -m ccswitch.analysis.destination_memory RUN_DIR`: print the analysis of a run
    directory that still has its events."""
    if len(argv) != 1:
        print("usage: python -m ccswitch.analysis.destination_memory RUN_DIR", file=sys.stderr)
        return 2
    run = RunDirectory(argv[0])
    _, text = analyze(run.path, run.rows, [s.label for s in run.scenario.schemes])
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
