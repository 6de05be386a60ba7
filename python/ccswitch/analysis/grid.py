"""`ccswitch grid RUN_DIR`: a delay x loss grid run as a table and a heat map of the best
algorithm per cell (the seeds' Figure 3 in miniature).

Each client of the run is a cell, placed by its RTT (twice its one-way delay) and its downlink
loss; trace-driven clients are shown beside the grid. A transfer that timed out counts as the
run's timeout (a censored value, marked "≥" in the table), so slow schemes are not flattered by
losing their slowest transfers. Writes grid.md, grid.json and grid.png into the run directory.

The best scheme of a cell is the one with the lowest median; whether it is faster than the
runner-up beyond the noise is statistics.compare's verdict on the two schemes' transfers paired
by repetition (the "vs 2nd" column): with fewer than 5 repetitions there is no interval, and the
margin is shown but not claimed.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from ..experiments import results, statistics as stats
from ..experiments.rundir import RunDirectory, RunDirectoryError
from ..experiments.scenario import Client, Scenario, display_label


class GridError(ValueError):
    """A grid that cannot be drawn (no completed transfer); an unreadable run directory is a
    RunDirectoryError."""


@dataclass
class Cell:
    client: str
    rtt_ms: int
    loss_pct: float
    trace: Optional[str]
    #: scheme -> (median TCT s, censored transfers, transfers)
    medians: Dict[str, Tuple[float, int, int]]
    #: scheme -> repetition -> TCT s (a timeout counted as the timeout), for `versus`
    samples: Dict[str, Dict[int, float]] = field(default_factory=dict)

    def ranking(self) -> List[str]:
        return sorted(self.medians, key=lambda s: self.medians[s][0])

    @property
    def best(self) -> Optional[str]:
        r = self.ranking()
        return r[0] if r else None

    def margin(self) -> Optional[float]:
        """How much faster the best scheme is than the runner-up (fraction of the runner-up)."""
        r = self.ranking()
        if len(r) < 2:
            return None
        best, second = self.medians[r[0]][0], self.medians[r[1]][0]
        return (second - best) / second if second > 0 else None

    def versus(self, a: str, b: str) -> stats.Verdict:
        """statistics.compare of scheme a against b here, their transfers paired by repetition."""
        sa, sb = self.samples.get(a, {}), self.samples.get(b, {})
        reps = sorted(set(sa) & set(sb))
        return stats.compare([sa[i] for i in reps], [sb[i] for i in reps])

    def runner_up_verdict(self) -> Optional[stats.Verdict]:
        """The best scheme against the runner-up (None with fewer than two schemes)."""
        r = self.ranking()
        return self.versus(r[0], r[1]) if len(r) >= 2 else None


def _is_timeout(row: dict) -> bool:
    """The runner's errors for a transfer cut off at the scenario's timeout: curl's own
    "(28) Operation timed out" (`curl_exit` 28), the harness's hard stop, or the wording of
    runs recorded before curl's message was kept."""
    error = row.get("error") or ""
    return (row.get("curl_exit") == 28 or error.startswith("curl: (28)") or error.startswith("timeout:")
            or error.startswith("curl timeout"))


def cells(scenario: Scenario, rows: Sequence[dict]) -> List[Cell]:
    by_client: Dict[str, Client] = {c.name: c for c in scenario.clients}
    samples: Dict[Tuple[str, str], List[Tuple[float, bool]]] = {}
    by_rep: Dict[Tuple[str, str], Dict[int, float]] = {}
    for r in rows:
        if r["client"] not in by_client:
            continue
        if r.get("error"):
            if not _is_timeout(r):
                continue
            value, censored = scenario.timeout_s, True
        elif not r.get("sha256_ok"):
            continue
        else:
            value, censored = float(r["tct_s"]), False
        got = samples.setdefault((r["client"], r["scheme"]), [])
        got.append((value, censored))
        rep = r.get("repetition")
        by_rep.setdefault((r["client"], r["scheme"]), {}).setdefault(int(rep) if rep is not None else len(got), value)
    out = []
    for c in scenario.clients:
        medians = {}
        for s in scenario.schemes:
            got = samples.get((c.name, s.label))
            if got:
                medians[s.label] = (stats.median([v for v, _ in got]), sum(x for _, x in got), len(got))
        trace = None if c.link.is_constant else os.path.basename(c.link.downlink_trace)
        reps = {s: by_rep[(c.name, s)] for s in medians if (c.name, s) in by_rep}
        out.append(Cell(c.name, 2 * c.delay_ms, round(100 * c.loss_downlink, 3), trace, medians, reps))
    return out


def short(scheme: str) -> str:
    kind, alg = display_label(scheme).split(":", 1)
    # the agent's algorithms by name; the kernel's own (native:) ones marked
    return alg if kind == "kernel" else f"{alg} ({kind})"


def markdown(cells_: Sequence[Cell], schemes: Sequence[str]) -> str:
    head = ["cell", "RTT", "loss"] + [short(s) for s in schemes] + ["best", "margin", "vs 2nd"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells_:
        row = [c.client, f"{c.rtt_ms} ms", c.trace or f"{c.loss_pct:g} %"]
        for s in schemes:
            if s not in c.medians:
                row.append("–")
                continue
            med, censored, n = c.medians[s]
            text = f"{'≥' if censored * 2 >= n else ''}{med:.2f}"
            row.append(f"**{text}**" if s == c.best else text)
        margin = c.margin()
        verdict = c.runner_up_verdict()
        row += [short(c.best) if c.best else "–", f"{100 * margin:.0f} %" if margin is not None else "–",
                stats.verdict_word(verdict.as_dict()) if verdict else "–"]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n" + (
        "\nmargin: how much less time the best median takes than the runner-up's; vs 2nd: whether the 95% "
        "interval of the ratio of their mean TCTs (transfers paired by repetition) shows the best one faster "
        f"(no interval below {stats.MIN_VERDICT_N} pairs).\n" if any(len(c.medians) >= 2 for c in cells_) else "")


def plot(path: str, cells_: Sequence[Cell], title: str, dpi: int = 120) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    grid = [c for c in cells_ if c.trace is None and c.best]
    traces = [c for c in cells_ if c.trace is not None and c.best]
    rtts = sorted({c.rtt_ms for c in grid})
    losses = sorted({c.loss_pct for c in grid})
    winners = sorted({c.best for c in cells_ if c.best})
    if not winners:
        raise GridError("no completed transfers to plot")
    palette = plt.get_cmap("tab20").colors
    cmap = ListedColormap([palette[i % len(palette)] for i in range(len(winners))])
    ncols = len(rtts) + (1 + len(traces) if traces else 0)
    fig, ax = plt.subplots(figsize=(1.9 * max(ncols, 3) + 1, 1.3 * max(len(losses), 1) + 1.6))
    import numpy as np

    data = np.full((len(losses), ncols), np.nan)
    labels: Dict[Tuple[int, int], str] = {}

    def label(c: Cell) -> str:
        med = c.medians[c.best][0]
        margin, verdict = c.margin(), c.runner_up_verdict()
        # a margin the noise does not settle is marked: n.s. (interval covers 1), or too few pairs
        unsure = ("" if verdict is None or verdict.kind == "better" else
                  f" (n = {verdict.n})" if verdict.kind == "too few" else " (n.s.)")
        extra = f"\n−{100 * margin:.0f}% vs 2nd{unsure}" if margin is not None else ""
        return f"{short(c.best)}\n{med:.2f} s{extra}"

    for c in grid:
        i, j = losses.index(c.loss_pct), rtts.index(c.rtt_ms)
        data[i, j] = winners.index(c.best)
        labels[(i, j)] = label(c)
    for k, c in enumerate(traces):
        j = len(rtts) + 1 + k
        data[0, j] = winners.index(c.best)
        labels[(0, j)] = label(c)
    ax.imshow(np.ma.masked_invalid(data), cmap=cmap, vmin=-0.5, vmax=len(winners) - 0.5, aspect="auto")
    for (i, j), text in labels.items():
        ax.text(j, i, text, ha="center", va="center", fontsize=8)
    xt = [f"{r} ms" for r in rtts] + ([""] + [f"{c.trace}\n{c.rtt_ms} ms" for c in traces] if traces else [])
    ax.set_xticks(range(ncols), xt, fontsize=8)
    ax.set_yticks(range(len(losses)), [f"{l:g} %" for l in losses])
    ax.set_xlabel("RTT (grid)  ·  trace-driven link")
    ax.set_ylabel("random loss (downlink)")
    ax.set_title(title or "best algorithm per cell (median TCT)")
    fig.tight_layout()
    with results.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=dpi)
    plt.close(fig)


def report(run_dir: str) -> Dict:
    run = RunDirectory(run_dir)
    scenario = run.scenario
    cs = cells(scenario, run.rows)
    schemes = [s.label for s in scenario.schemes]
    table = markdown(cs, schemes)
    results.write_text_atomic(os.path.join(run_dir, "grid.md"), table)
    summary = {
        "scenario": scenario.name,
        "cells": [
            {"client": c.client, "rtt_ms": c.rtt_ms, "loss_pct": c.loss_pct, "trace": c.trace,
             "best": c.best, "margin": c.margin(),
             "vs_runner_up": c.runner_up_verdict().as_dict() if c.runner_up_verdict() else None,
             "median_tct_s": {s: m[0] for s, m in c.medians.items()},
             "censored": {s: m[1] for s, m in c.medians.items() if m[1]},
             "transfers": {s: m[2] for s, m in c.medians.items()}}
            for c in cs
        ],
    }
    results.write_json_atomic(os.path.join(run_dir, "grid.json"), summary)
    plot(os.path.join(run_dir, "grid.png"), cs, f"{scenario.name}: best algorithm per cell (median TCT)")
    return {"table": table, "summary": summary}


def _cli(args) -> int:
    try:
        out = report(args.run_dir)
    except (GridError, RunDirectoryError) as e:
        print(f"ccswitch grid: {e}")
        return 2
    if args.json:
        print(json.dumps(out["summary"], indent=2))
    else:
        print(out["table"], end="")
        print(f"wrote {os.path.join(args.run_dir, 'grid.md')}, grid.json, grid.png")
    return 0


def add_cli(sub) -> None:
    p = sub.add_parser("grid", help="table and heat map of the best algorithm per cell of a grid run")
    p.add_argument("run_dir", help="a run directory written by `ccswitch run` (e.g. results/algorithms-grid-...)")
    p.add_argument("--json", action="store_true", help="print the per-cell summary as JSON")
    p.set_defaults(func=_cli)
