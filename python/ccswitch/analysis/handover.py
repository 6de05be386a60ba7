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
The PASS/FAIL and "beats" verdicts of mix and mcc are statistics.compare's, on the transfers
paired by (cell, repetition): PASS or FAIL only when the 95% bootstrap interval of the ratio of
mean TCTs settles it, "-" (undecided) otherwise, and no verdict below 5 pairs; a policy that ran
only the compared scheme's algorithm is said to, never counted as a win.
"""

from __future__ import annotations

import json
from typing import Dict, List, Optional, Sequence, Tuple

from ..experiments import statistics as stats
from ..experiments.rundir import RunDirectory, RunDirectoryError
from ..experiments.scenario import Scenario, display_label
from ..experiments.events import FlowEvents, flow_of
from .plots import Series, plot_run

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
    try:
        res, text = analyze(args.run_dir, getattr(args, "kind", None))
    except (RunDirectoryError, OSError) as e:
        args.parser.error(str(e))
    print(json.dumps(res, indent=2) if args.json else text)
    return 0


def _cli_plot(args) -> int:
    try:
        run = RunDirectory(args.run_dir)
        scenario, rows = run.scenario, run.rows
        schemes = None
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
