"""The analyses of the handover scenarios (`ccswitch analyze RUN_DIR`), on the events
`events.py` matched to a run's transfers:
  smoothness  per handover: throughput in the 2 s after it against the new algorithm's steady
              state (median over the run's transfers of its fixed scheme on the same datapath,
              their first 2 s excluded), stalls (500 ms bins without a delivered byte while
              data was outstanding), and bursts (bytes in flight growing beyond the window)
  mix         per datapath: mean TCT per scheme over all (client, size) cells; a policy
              against the fixed schemes' average, the best fixed scheme, and the per-cell oracle
  mcc         per datapath: mean TCT over the clients per scheme; the policy must beat every
              fixed scheme
  cost        what a mid-flow handover costs per ordered pair of algorithms A>B (issue 20's
              learned selector hands a flow over only when the expected gain exceeds it): the
              dip in throughput and the rise in one-way delay p95 at the client (the probe's
              packets) in the 2 s after the handover against B's steady state, as a share of a
              10-s flow (`ccswitch analyze RUN_DIR --handover-cost OUT.json`)
The PASS/FAIL and "beats" verdicts of mix and mcc are statistics.compare's, on the transfers
paired by (cell, repetition): PASS or FAIL only when the 95% bootstrap interval of the ratio of
mean TCTs settles it, "-" (undecided) otherwise, and no verdict below 5 pairs; a policy that ran
only the compared scheme's algorithm is said to, never counted as a win.
"""

from __future__ import annotations

import json
import os
import re
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..experiments import measurements as measure, statistics as stats
from ..experiments.rundir import RunDirectory, RunDirectoryError
from ..experiments.scenario import Scenario, display_label
from ..experiments.events import FlowEvents, flow_of
from .plots import Series, plot_compare, plot_run

# -- smoothness (MCC Fig. 5)
AFTER_HANDOVER_S = 2.0
#: a fixed scheme's start-up, excluded from its steady-state throughput
STEADY_SKIP_S = 2.0
STALL_BIN_S = 0.5
#: throughput after a handover must reach this fraction of the new algorithm's steady state
SMOOTH_RATIO_TARGET = 0.8
#: bytes in flight may exceed the window by up to two full segments (whole segments are sent)
BURST_TOLERANCE_BYTES = 2 * 1500

# -- cost (issue 20)
#: the flow a handover's AFTER_HANDOVER_S are set against: a dip of d for 2 s costs a flow of
#: this length about d x 2 / 10 of its completion time (the unit of the model's regrets)
COST_FLOW_S = 10.0
COST_METHOD = (f"cost = (dip + delay) x {AFTER_HANDOVER_S:g} s / {COST_FLOW_S:g} s; dip = max(0, 1 - throughput "
               f"in the {AFTER_HANDOVER_S:g} s after the handover / B's steady throughput), delay = max(0, one-way "
               f"delay p95 in those {AFTER_HANDOVER_S:g} s / B's steady p95 - 1), both at the client (probe); B's "
               f"steady state: median over the run's fixed B transfers, from {STEADY_SKIP_S:g} s to their end; "
               "dip and delay: medians over repetitions; default: median of the pairs")

# -- mix (Mystique Fig. 8) and MCC
MIX_REDUCTION_TARGET = 0.18
ORACLE_TOLERANCE = 0.05

# -- the papers' published figures, printed beside ours (here and by `ccswitch report`)
#: Mystique, Fig. 8: its policy's mean-TCT reduction against the fixed algorithms, averaged over them
MYSTIQUE_PUBLISHED_REDUCTION = 0.1813
#: MCC, its WiFi case: mean TCT (s) of its WiFi policy, fixed BBR and fixed Westwood
MCC_PUBLISHED_S = {"policy:mcc-wifi": 2.10, "bbr": 2.75, "westwood": 2.34}


def _kind(scheme: str) -> str:
    return scheme.split(":", 1)[0]


def _algorithm(scheme: str) -> str:
    return scheme.split(":", 1)[1]


def is_policy(scheme: str) -> bool:
    return _algorithm(scheme).startswith("policy:")


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
    if stats.counted(row) and row["tct_s"] > 0:
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
    state on the same datapath (the other datapath's fixed scheme if that one has none).
    `rows` are the run's (RunDirectory.rows, or the runner's own at the end of a run); their
    event slices are read from `run_dir`."""
    run = RunDirectory(run_dir)
    flows: Dict[int, Optional[FlowEvents]] = {}

    def flow(i: int, row: dict) -> Optional[FlowEvents]:
        if i not in flows:
            flows[i] = flow_of(run.events_of(row), run.events_path(row)) if row.get("events") else None
        return flows[i]

    steady: Dict[str, List[float]] = {}
    for i, row in enumerate(rows):
        if row["scheme"].split(":")[0] in ("kernel", "ovs") and not is_policy(row["scheme"]):
            v = steady_throughput_bps(row, flow(i, row))
            if v is not None:
                steady.setdefault(row["scheme"], []).append(v)
    steady_med = {k: stats.median(v) for k, v in steady.items()}
    out = []
    for i, row in enumerate(rows):
        if not is_policy(row["scheme"]):
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
        stats.text_table(head, lines),
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
        if stats.counted(r):
            v[0].append(float(r["tct_s"]))
        else:
            v[0].append(float(timeout_s))
            v[1] += 1
    return {c: {s: {"mean": sum(v[0]) / len(v[0]), "failed": v[1], "n": len(v[0])} for s, v in d.items()}
            for c, d in acc.items()}


def cell_values(rows: Sequence[dict], timeout_s: float) -> Dict[str, Dict[Tuple[str, int, int], float]]:
    """scheme -> (client, file_bytes, repetition) -> TCT, a failed transfer counted as the
    timeout (as `cell_means` counts it): the values `compare` pairs across schemes. A row
    without a repetition number takes its place among the cell's rows of its scheme."""
    out: Dict[str, Dict[Tuple[str, int, int], float]] = {}
    for r in rows:
        by_key = out.setdefault(r["scheme"], {})
        cell = (r["client"], r["file_bytes"])
        rep = r.get("repetition")
        rep = int(rep) if rep is not None else 1 + sum(1 for k in by_key if k[:2] == cell)
        by_key.setdefault(cell + (rep,), float(r["tct_s"]) if stats.counted(r) else float(timeout_s))
    return out


def _paired(a: Dict[tuple, float], b: Dict[tuple, float], cells: Sequence[Tuple[str, int]]):
    keys = sorted(k for k in a if k in b and k[:2] in cells)
    return [a[k] for k in keys], [b[k] for k in keys]


def _policy_rows(rows: Sequence[dict], policy: str, cells: Sequence[Tuple[str, int]]) -> List[dict]:
    return [r for r in rows if r["scheme"] == policy and (r["client"], r["file_bytes"]) in cells]


def _pass_of(v: stats.Verdict) -> Optional[bool]:
    """A "must be better" claim: PASS when the interval shows it, FAIL when it shows the opposite."""
    return {"better": True, "worse": False}.get(v.kind)


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
    values = cell_values(rows, timeout_s)
    out = {"analysis": "mix", "datapaths": {}}
    for kind in ("kernel", "ovs"):
        schemes = list(dict.fromkeys(r["scheme"] for r in rows if _kind(r["scheme"]) == kind))
        fixed = [s for s in schemes if not is_policy(s)]
        policies = [s for s in schemes if is_policy(s)]
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
            # the verdicts, on the transfers paired by (cell, repetition): the fixed schemes'
            # average and the oracle's choice are taken per pair
            fixed_avg = {k: sum(values[f][k] for f in fixed) / len(fixed) for k in values[p]
                         if all(k in values[f] for f in fixed)}
            oracle_vals = {k: values[oracle_cells[k[:2]]][k] for k in values[p]
                           if k[:2] in oracle_cells and k in values[oracle_cells[k[:2]]]}
            v_avg = stats.compare(*_paired(values[p], fixed_avg, cells), reference=1 - MIX_REDUCTION_TARGET)
            v_best = stats.compare(*_paired(values[p], values[best_fixed], cells),
                                   ran_only=stats.ran_only_text(_policy_rows(rows, p, cells), best_fixed))
            v_oracle = stats.compare(*_paired(values[p], oracle_vals, cells), reference=1 + ORACLE_TOLERANCE)
            pp["verdicts"] = {"vs_fixed_avg": v_avg.as_dict(), "vs_best": v_best.as_dict(),
                              "vs_oracle": v_oracle.as_dict()}
            pp["pass_avg"] = _pass_of(v_avg)
            # "must not lose": FAIL only when the interval shows it losing; a tie does not lose
            pp["pass_best"] = {"better": True, "no difference": True, "worse": False}.get(v_best.kind)
            pp["pass_oracle"] = _pass_of(v_oracle)
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
                stats.text_table(head, lines)]
        for p, f in d["policies"].items():
            v = f["verdicts"]
            text.append(
                f"{display_label(p)}: mean {f['mean_tct_s']:.2f} s; reduction vs the fixed schemes (mean of "
                f"per-scheme reductions) {100 * f['reduction_vs_fixed_avg']:.1f}% (target >= "
                f"{MIX_REDUCTION_TARGET:.0%}) {_pass(f['pass_avg'])}: {v['vs_fixed_avg']['text']} "
                f"[vs their average TCT {100 * f['reduction_vs_fixed_avg_tct']:.1f}%]; "
                f"vs the best fixed ({display_label(d['best_fixed'])}) {100 * f['reduction_vs_best']:+.1f}% (must "
                f"not lose) {_pass(f['pass_best'])}: {v['vs_best']['text']}; over the per-cell oracle "
                f"{100 * f['over_oracle']:+.1f}% (within {ORACLE_TOLERANCE:.0%}) {_pass(f['pass_oracle'])}: "
                f"{v['vs_oracle']['text']}")
        text.append("(PASS/FAIL only when the 95% interval of the ratio of mean TCTs, transfers paired by cell "
                    f"and repetition, settles it; '-' otherwise; no interval below {stats.MIN_VERDICT_N} pairs)")
        parts.append("\n".join(text))
    return "\n\n".join(parts)


def mcc(rows: Sequence[dict], timeout_s: float) -> dict:
    """Per datapath: mean TCT over the clients (cells) per scheme; each policy must beat
    every fixed scheme."""
    means = cell_means(rows, timeout_s)
    values = cell_values(rows, timeout_s)
    out = {"analysis": "mcc", "datapaths": {}}
    for kind in ("kernel", "ovs"):
        schemes = list(dict.fromkeys(r["scheme"] for r in rows if _kind(r["scheme"]) == kind))
        cells = sorted(c for c, d in means.items() if all(s in d for s in schemes))
        if not schemes or not cells:
            continue
        mean = {s: sum(means[c][s]["mean"] for c in cells) / len(cells) for s in schemes}
        fixed = [s for s in schemes if not is_policy(s)]
        against: Dict[str, Dict[str, dict]] = {}
        verdicts: Dict[str, Optional[bool]] = {}
        for p in (s for s in schemes if is_policy(s)):
            vs = {f: stats.compare(*_paired(values[p], values[f], cells),
                                   ran_only=stats.ran_only_text(_policy_rows(rows, p, cells), f)) for f in fixed}
            against[p] = {f: v.as_dict() for f, v in vs.items()}
            # beats every fixed scheme: each interval shows it; does not: one shows the opposite
            kinds = [v.kind for v in vs.values()]
            verdicts[p] = (None if not fixed else True if all(k == "better" for k in kinds)
                           else False if "worse" in kinds else None)
        out["datapaths"][kind] = {
            "cells": [f"{c[0]}@{c[1]}" for c in cells], "mean_tct_s": mean,
            "cell_tct_s": {f"{c[0]}@{c[1]}": {s: means[c][s]["mean"] for s in schemes} for c in cells},
            "chosen": {p: {f"{c[0]}@{c[1]}": _final_algorithms(rows, c, p) for c in cells}
                       for p in verdicts},
            "policy_beats_all_fixed": verdicts,
            "verdicts": against,
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
                stats.text_table(head, lines + [pub])]
        for p, ok in d["policy_beats_all_fixed"].items():
            name = display_label(p)
            text.append(f"{name} ran: " + "; ".join(f"{c}: {a}" for c, a in d["chosen"][p].items()))
            text += [f"{name} vs {display_label(f)}: {v['text']}" for f, v in d["verdicts"][p].items()]
            text.append(f"{name} beats every fixed scheme on mean TCT: {_pass(ok)}"
                        + ("" if ok is not None else " (not shown either way by the 95% intervals)"))
        parts.append("\n".join(text))
    return "\n\n".join(parts)


# ----------------------------------------------------------------------- cost (issue 20)


def cost_dip(after_mbps: float, steady_mbps: float) -> float:
    """The share of B's steady throughput lost in the window after the handover (0 when it
    delivered as much or more)."""
    if steady_mbps <= 0:
        raise ValueError(f"a steady throughput must be positive, got {steady_mbps}")
    return max(0.0, 1.0 - after_mbps / steady_mbps)


def cost_delay(after_p95_ms: float, steady_p95_ms: float) -> float:
    """How far the one-way delay p95 after the handover rose above B's steady p95, relative
    (0 when it did not)."""
    if steady_p95_ms <= 0:
        raise ValueError(f"a steady delay must be positive, got {steady_p95_ms}")
    return max(0.0, after_p95_ms / steady_p95_ms - 1.0)


def handover_cost(dip: float, delay: float) -> float:
    """The cost of a handover with this dip and delay rise: both last AFTER_HANDOVER_S, set
    against a flow of COST_FLOW_S."""
    return (dip + delay) * AFTER_HANDOVER_S / COST_FLOW_S


def probe_test_flow(probe: measure.Probe) -> Optional[int]:
    """The probe's flow of a lone transfer: the one that delivered the most bytes."""
    if not probe.flows:
        return None
    return max(probe.flows, key=lambda f: int(probe.flows[f].get("bytes_received") or 0))


def _first_sent_ns(probe: measure.Probe, flow_id: int) -> int:
    """When the flow's first data segment left the server (probe clock); runs without the
    field: its first arrival at the client."""
    first = probe.flows[flow_id].get("first_sent_ns")
    return int(first) if first else int(probe.of_flow(flow_id)["t_ns"].min())


def _arrivals_s(probe: measure.Probe, flow_id: int, t0_ns: int) -> np.ndarray:
    pk = probe.of_flow(flow_id)
    return (pk["t_ns"][pk["bytes"] > 0].astype(np.int64) - int(t0_ns)) / 1e9


def probe_steady(probe: measure.Probe, flow_id: int) -> Optional[dict]:
    """A fixed-scheme transfer's steady state at the client: throughput and one-way delay p95
    from STEADY_SKIP_S after its first segment to its last packet; None for a flow that did not
    last a second past that."""
    t0 = _first_sent_ns(probe, flow_id)
    t = _arrivals_s(probe, flow_id, t0)
    if t.size == 0 or float(t.max()) < STEADY_SKIP_S + 1.0:
        return None
    phase = measure.phase_metrics(probe, flow_id, t0, [STEADY_SKIP_S])[0]
    return {"throughput_mbps": phase["throughput_mbps"], "delay_p95_ms": phase["delay_p95_ms"]}


def probe_after_handover(probe: measure.Probe, flow_id: int, t_s: float) -> dict:
    """Throughput, one-way delay p95 and stalls at the client in the AFTER_HANDOVER_S after a
    handover `t_s` seconds into the flow (the agent's clock, from the flow's creation, which the
    first data segment follows within a few milliseconds: 1.9 ms in a pilot of
    experiments/handover-costs.toml, by the datapath clock of the first report against the probe's). The window opens when the first segment
    the new algorithm sent can arrive (the handover plus the flow's least one-way delay) and
    ends early if the flow does (`span_s`). Stalls: STALL_BIN_S bins of the window in which no
    byte arrived."""
    pk = probe.of_flow(flow_id)
    owd = pk["owd_us"][(pk["flags"] & measure.FLAG_MATCHED) != 0]
    propagation_s = float(owd.min()) / 1e6 if owd.size else 0.0
    start_ns = _first_sent_ns(probe, flow_id) + int(round((t_s + propagation_s) * 1e9))
    t = _arrivals_s(probe, flow_id, start_ns)
    end_s = float(t.max()) if t.size else 0.0
    full = end_s >= AFTER_HANDOVER_S
    phase = measure.phase_metrics(probe, flow_id, start_ns, [0.0, AFTER_HANDOVER_S] if full else [0.0])[0]
    span = AFTER_HANDOVER_S if full else max(0.0, end_s)
    stalls = 0
    for k in range(int(span / STALL_BIN_S + 1e-9)):
        a, b = k * STALL_BIN_S, (k + 1) * STALL_BIN_S
        if not np.any((t >= a) & (t < b)):
            stalls += 1
    return {"t_s": float(t_s), "window_from_s": float(t_s + propagation_s), "span_s": span,
            "throughput_mbps": phase["throughput_mbps"], "delay_p95_ms": phase["delay_p95_ms"],
            "stall_bins": stalls}


def _scheme_pair(scheme: str) -> Optional[str]:
    """The pair a scripted policy scheme asks for (`...:initial=A,default=B` -> "A>B")."""
    initial = re.search(r"[:,]initial=([^,]+)", scheme)
    default = re.search(r"[:,]default=([^,]+)", scheme)
    return f"{initial.group(1)}>{default.group(1)}" if initial and default else None


def pair_costs(steady: Dict[str, Dict[str, Sequence[dict]]], handovers: Sequence[dict]) -> dict:
    """The cost of each pair from measured figures. `steady`: client -> algorithm -> its fixed
    transfers' figures ({"throughput_mbps", "delay_p95_ms"}); `handovers`: one per transfer
    that handed over ({"client", "from", "to", "throughput_mbps", "delay_p95_ms", ...} after the
    handover). Each handover gets its dip and delay against the median steady state of its new
    algorithm on its own client's path; per pair, the medians of dip and delay over its
    handovers (every client's) give the cost. A handover without a steady state to compare
    with is kept with a note and priced at nothing."""
    ref: Dict[str, Dict[str, dict]] = {}
    for client, by_alg in steady.items():
        for alg, figs in by_alg.items():
            thr = [f["throughput_mbps"] for f in figs if f.get("throughput_mbps")]
            p95 = [f["delay_p95_ms"] for f in figs if f.get("delay_p95_ms")]
            if thr and p95:
                ref.setdefault(client, {})[alg] = {"throughput_mbps": stats.median(thr),
                                                   "delay_p95_ms": stats.median(p95), "n": len(figs)}
    out, by_pair = [], {}
    for h in handovers:
        h = dict(h, pair=f"{h['from']}>{h['to']}")
        r = ref.get(h.get("client"), {}).get(h["to"])
        if r is None or h.get("throughput_mbps") is None or h.get("delay_p95_ms") is None:
            h.update(dip=None, delay=None, note=h.get("note") or (f"no steady state of {h['to']}" if r is None
                                                                  else "no packets after the handover"))
        else:
            h.update(dip=cost_dip(h["throughput_mbps"], r["throughput_mbps"]),
                     delay=cost_delay(h["delay_p95_ms"], r["delay_p95_ms"]))
            by_pair.setdefault(h["pair"], []).append(h)
        out.append(h)
    pairs = {}
    for pair, hs in by_pair.items():
        dip, delay = stats.median([h["dip"] for h in hs]), stats.median([h["delay"] for h in hs])
        pairs[pair] = {"dip": dip, "delay": delay, "cost": handover_cost(dip, delay), "n": len(hs),
                       "stall_bins": sum(h.get("stall_bins") or 0 for h in hs)}
    default = stats.median([p["cost"] for p in pairs.values()]) if pairs else 0.0
    return {"steady": ref, "handovers": out, "pairs": pairs, "default": default}


def handover_costs(run_dir: str, rows: Optional[Sequence[dict]] = None) -> dict:
    """What a handover costs per ordered pair, from a run of scripted pair policies beside the
    fixed algorithms (experiments/handover-costs.toml), by the probe's packets of each transfer
    (`probe/NNNNNN.packets.bin`, so the raw run directory). Adds to `pair_costs`: `missing`,
    the policy transfers that did not hand over once (or could not be measured), and the
    pairs the scenario asked for that have no cost."""
    run = RunDirectory(run_dir)
    rows = list(rows) if rows is not None else run.rows
    steady: Dict[str, Dict[str, List[dict]]] = {}
    handovers, missing, asked = [], [], set()

    def probe_of(row):
        if not row.get("probe"):
            return None, None
        prefix = run.file(row["probe"])
        if not os.path.exists(prefix + ".packets.bin"):
            raise RunDirectoryError(f"{prefix}.packets.bin: not found; the cost is measured on the probe's packets "
                                    "of the raw run directory (trimmed copies keep none)")
        probe = measure.read_probe(prefix)
        return probe, probe_test_flow(probe)

    for row in rows:
        scheme = row["scheme"]
        if _kind(scheme) not in ("kernel", "ovs"):
            continue
        where = {"transfer": row.get("transfer"), "client": row["client"], "scheme": scheme,
                 "repetition": row.get("repetition")}
        if not is_policy(scheme):
            probe, fid = probe_of(row) if stats.counted(row) else (None, None)
            fig = probe_steady(probe, fid) if fid is not None else None
            if fig is not None:
                steady.setdefault(row["client"], {}).setdefault(_algorithm(scheme), []).append(fig)
            continue
        pair = _scheme_pair(scheme)
        if pair:
            asked.add(pair)
        events = row.get("handover_events") or []
        if not stats.counted(row):
            missing.append({**where, "pair": pair, "note": row.get("error") or "transfer not counted"})
            continue
        if not events:
            missing.append({**where, "pair": pair, "note": "no handover"})
            continue
        probe, fid = probe_of(row)
        if fid is None:
            missing.append({**where, "pair": pair, "note": "no probe packets"})
            continue
        first = events[0]
        handovers.append({**where, "from": str(first["from"]), "to": str(first["to"]), "handovers": len(events),
                          **probe_after_handover(probe, fid, float(first["t_s"]))})
    res = pair_costs(steady, handovers)
    res["missing"] = missing
    res["pairs_without_cost"] = sorted(asked - set(res["pairs"]))
    return {"analysis": "cost", "source": run_dir, "method": COST_METHOD, **res}


def cost_file(res: dict, source: Optional[str] = None) -> dict:
    """The handover costs as the learner's model files take them (`learner/models/handover-cost.json`,
    `"handover_cost"` of a model; agent/selector/src/model.rs): the default, every measured
    pair, both rounded to 4 decimals, where they came from and how."""
    return {"default": round(res["default"], 4),
            "pairs": {p: round(res["pairs"][p]["cost"], 4) for p in sorted(res["pairs"])},
            "source": source if source is not None else res["source"], "method": res["method"]}


def format_costs(res: dict) -> str:
    figure = lambda x, d=2: "-" if x is None else f"{x:.{d}f}"
    steady = "; ".join(f"{c}: " + ", ".join(f"{a} {r['throughput_mbps']:.2f} Mbit/s p95 {r['delay_p95_ms']:.1f} ms"
                                             for a, r in sorted(by_alg.items()))
                       for c, by_alg in sorted(res["steady"].items())) or "none"
    lines = []
    for pair, p in sorted(res["pairs"].items(), key=lambda kv: (-kv[1]["cost"], kv[0])):
        hs = [h for h in res["handovers"] if h["pair"] == pair and h["dip"] is not None]
        lines.append([pair, f"{p['cost']:.4f}", f"{p['dip']:.3f}", f"{p['delay']:.3f}", str(p["n"]),
                      " ".join(figure(h["throughput_mbps"]) for h in hs),
                      " ".join(figure(h["delay_p95_ms"], 1) for h in hs),
                      " ".join(figure(h["t_s"]) for h in hs), str(p["stall_bins"])])
    text = [f"handover cost per pair A>B: {res['method']}",
            f"steady states: {steady}",
            stats.text_table(["pair", "cost", "dip", "delay", "n", "Mbit/s after", "p95 ms after", "at s",
                              "stalls"], lines, right=(1, 2, 3, 4, 8)),
            f"{len(res['pairs'])} pairs, default (median) {res['default']:.4f}"]
    for m in res["missing"]:
        text.append(f"transfer {m['transfer']} ({m['scheme']}, rep {m['repetition']}): {m['note']}")
    for h in res["handovers"]:
        if h.get("handovers", 1) != 1 or h["dip"] is None:
            text.append(f"transfer {h['transfer']} ({h['pair']}): {h.get('handovers')} handovers"
                        + (f"; {h['note']}" if h.get("note") else ""))
    if res.get("pairs_without_cost"):
        text.append("pairs asked for without a cost: " + ", ".join(res["pairs_without_cost"]))
    return "\n".join(text)


# ----------------------------------------------------------------------- entry points


def analyze(run_dir: str, kind: Optional[str] = None, rows: Optional[Sequence[dict]] = None,
            scenario: Optional[Scenario] = None) -> Tuple[dict, str]:
    """Run the scenario's analysis (or `kind`) on a run directory: (result, text). `rows` and
    `scenario` are the run directory's unless given (the runner gives its own)."""
    run = RunDirectory(run_dir)
    scenario = scenario or run.scenario
    kind = kind or scenario.analysis
    if kind is None:
        raise RunDirectoryError(f"{run.file('scenario.toml')}: the scenario names no analysis; choose one with "
                                "--kind smoothness|mix|mcc")
    rows = list(rows) if rows is not None else run.rows
    if kind == "smoothness":
        res = smoothness(run_dir, rows)
        return res, format_smoothness(res)
    if kind == "mix":
        res = mix(rows, scenario.timeout_s)
        return res, format_mix(res)
    if kind == "mcc":
        res = mcc(rows, scenario.timeout_s)
        return res, format_mcc(res)
    raise ValueError(f"unknown analysis {kind!r} (smoothness, mix, mcc)")


def _cli_analyze(args) -> int:
    out = getattr(args, "handover_cost", None)
    try:
        if out:
            res = handover_costs(args.run_dir)
            text = format_costs(res)
        else:
            res, text = analyze(args.run_dir, getattr(args, "kind", None))
    except (RunDirectoryError, OSError, ValueError) as e:
        args.parser.error(str(e))
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            f.write(json.dumps(cost_file(res), indent=2) + "\n")
    print(json.dumps(res, indent=2) if args.json else text)
    return 0


def _cli_plot(args) -> int:
    try:
        run = RunDirectory(args.run_dir)
        scenario, rows = run.scenario, run.rows
        schemes = None
        if args.compare:
            if args.transfer is not None:
                args.parser.error("--compare draws every transfer of a path; it takes no --transfer")
            known = [s.label for s in scenario.schemes]
            for s in args.scheme or ():
                if s not in known:
                    args.parser.error(f"--scheme {s}: not a scheme of this run (its schemes: {', '.join(known)})")
            written = plot_compare(args.run_dir, rows, args.scheme)
        else:
            if args.scheme:
                schemes = args.scheme
            elif args.transfer is None:
                schemes = [s.label for s in scenario.schemes if s.is_policy] + list(scenario.plot_schemes)
            written = plot_run(args.run_dir, rows, schemes, args.transfer)
    except (RunDirectoryError, OSError) as e:
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
    p.add_argument("--transfer", type=int, help="only transfer N (its number in the run, 1-based)")
    p.add_argument("--scheme", action="append", help="plot every transfer of this scheme (repeatable)")
    p.add_argument("--compare", action="store_true",
                   help="instead: one figure per path (flows/compare-CLIENT.png), window and throughput with a "
                        "line per scheme (every scheme the agent ran, or those given by --scheme)")
    p.set_defaults(func=_cli_plot, parser=p)
    what = "run the scenario's handover analysis (smoothness, mix or mcc) on a run directory"
    a = sub.add_parser("analyze", help=what, description=what + "; see ccswitch.analysis.handover")
    a.add_argument("run_dir")
    a.add_argument("--kind", choices=("smoothness", "mix", "mcc"),
                   help="analysis to run instead of the scenario's `analysis`")
    a.add_argument("--handover-cost", metavar="OUT.json",
                   help="instead: what a handover costs per ordered pair of algorithms (a run of "
                        "experiments/handover-costs.toml, with its probe files), written to OUT.json as "
                        "{default, pairs, source, method}; the table (or with --json every figure) on stdout")
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    a.set_defaults(func=_cli_analyze, parser=a)
    s = sub.add_parser("handover", help="handover analyses: smoothness | mix | mcc RUN_DIR")
    s.add_argument("kind", choices=("smoothness", "mix", "mcc"))
    s.add_argument("run_dir")
    s.add_argument("--json", action="store_true", help="print the result as JSON")
    s.set_defaults(func=_cli_analyze, parser=s)
