"""`ccswitch report RUN_DIR [RUN_DIR...] [-o OUT_DIR]`: one Markdown page over finished runs,
its figures as small PNG files beside it (OUT_DIR/report.md; default OUT_DIR: `report/` in the
first run directory).

Per run directory (one scenario) the page has a section with
  - the clients' paths; the TCT table (per cell and scheme: n, median, mean and the Student-t
    95% interval of the mean, failed transfers counted in their own columns) and, for the
    compared pairs (the scenario's `compare`, else `statistics.default_pairs`), the ratio of
    mean TCTs with its paired bootstrap interval;
  - TCT CDFs, one panel per cell and one line per scheme. A CDF is over all the attempts, so a
    scheme whose transfers failed ends below 1;
  - throughput over time of one transfer per (client, scheme) for the policy schemes and the
    scenario's `plot_schemes` (its first repetition, largest file), handovers marked, when the
    run kept its flows' event slices (`flows/`);
  - for delay x loss grids, grid.py's table and heat map, and the seeds' Observations 1-3
    judged from the grid's cells (`judge_observation`);
  - for the scenarios that reproduce a paper (`analysis` = mix, mcc or smoothness), our figures
    from handover.py beside the published ones (handover.py's published constants), each
    deviation in words.
The statistics are statistics.py's and the analyses handover.py's and grid.py's; this module
only lays them out. Every claim that one scheme beats another (ratio table, mix, MCC, the
Observations) is statistics.compare's verdict, printed with its ratio, 95% interval and n: a
difference the interval does not settle is written as none, fewer than 5 pairs give no verdict,
and a policy that ran only the compared scheme's algorithm is said to.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from ..experiments import results, statistics as stats
from ..experiments.run_summary import labelled_rows
from ..experiments.rundir import RunDirectory, RunDirectoryError
from ..experiments.scenario import Scenario, display_label
from . import grid, handover
from ..experiments.events import flow_of
from ..learner import objectives as _objectives
from .plots import PLOT_BIN_S, Series, mark_handovers

#: Resolution of every figure of the page: small files that still read on a screen.
FIGURE_DPI = 90
#: Cells per row of the CDF figure, and flows per row of a throughput figure.
CDF_COLUMNS = 4
FLOW_COLUMNS = 3

# -- the seeds' Observations 1-3 on Mystique's Fig. 3 grid (the three cases of its Table I rules)
#: "Short" RTT: Mystique's Table I threshold (RTT < 50 ms with loss -> Illinois). The grid's
#: shortest RTT is this threshold itself, so its cells stand for short paths: short = <=.
SHORT_RTT_MS = 50


@dataclass(frozen=True)
class Observation:
    number: int
    claim: str
    #: the grid cells the claim is about, in words and as a test on a grid.Cell
    cells_text: str
    applies: Callable[["grid.Cell"], bool]
    #: the algorithms (names after the datapath, parameters stripped) the claim names
    family: Tuple[str, ...]


OBSERVATIONS = (
    Observation(1, "Hybla is strong on clean long paths", f"the clean cells with RTT above {SHORT_RTT_MS} ms",
                lambda c: c.loss_pct == 0 and c.rtt_ms > SHORT_RTT_MS, ("hybla",)),
    Observation(2, "the BBR family is best under loss", "the lossy cells",
                lambda c: c.loss_pct > 0, ("bbr", "mystique-bbr")),
    Observation(3, "Illinois is best at short RTT with loss", f"the lossy cells with RTT <= {SHORT_RTT_MS} ms",
                lambda c: c.loss_pct > 0 and c.rtt_ms <= SHORT_RTT_MS, ("illinois",)),
)

#: The scenario name of the grid (experiments/algorithms-grid.toml); other scenarios count as
#: grids when their clients form a full delay x loss product (`is_grid`).
GRID_SCENARIO = "algorithms-grid"


# ----------------------------------------------------------------------- run directories


@dataclass
class Run:
    """A run directory as the page reads it (rundir.RunDirectory: its stored scenario, its
    transfers in today's names and the file they came from)."""

    directory: RunDirectory
    scenario: Scenario
    rows: List[dict]
    source: str

    @property
    def path(self) -> str:
        return self.directory.path

    @property
    def shown(self) -> str:
        return shown_path(self.path)

    @cached_property
    def labelled(self) -> List[dict]:
        """The rows with the summary's cell names ("client@bytes" for several file sizes)."""
        return labelled_rows(self.scenario, self.rows)

    @cached_property
    def schemes(self) -> List[str]:
        """The scenario's schemes, then any other scheme the rows have, in first-seen order."""
        labels = [s.label for s in self.scenario.schemes]
        return list(dict.fromkeys(labels + [r["scheme"] for r in self.rows]))

    @cached_property
    def cells(self) -> List[str]:
        """The summary's cells in the scenario's order, then any other the rows have."""
        names = []
        for c in self.scenario.clients:
            names += [f"{c.name}@{s}" for s in c.file_sizes] if len(c.file_sizes) > 1 else [c.name]
        return list(dict.fromkeys(names + [r["client"] for r in self.labelled]))


def load_run(path: str) -> Run:
    """A run directory's scenario and rows (RunDirectory's precedence: a finished run's
    Parquet with the log's per-transfer fields, else an interrupted run's log)."""
    directory = RunDirectory(path)
    scenario = directory.scenario
    return Run(directory, scenario, directory.rows, directory.source)


def shown_path(path: str) -> str:
    """A run directory as the page names it: relative to the current directory when inside
    it, else its last two components (results/NAME), never a machine's absolute path."""
    rel = os.path.relpath(path)
    if not rel.startswith(".."):
        return rel
    parts = os.path.normpath(os.path.abspath(path)).split(os.sep)
    return "/".join(parts[-2:])


def base_algorithm(scheme: str) -> str:
    """`kernel:cubic:beta=0.8` -> "cubic"; `native:bbr` -> "bbr"; policies -> "policy"."""
    return scheme.split(":", 2)[1]


def short_scheme(scheme: str) -> str:
    """A scheme for headings and legends: scenario.display_label (a policy file by its policy's
    name, `kernel:policy:../learner/models/paths-v1.policy.toml` -> `kernel:policy:paths-v1`)."""
    return display_label(scheme)


def _size(n: int) -> str:
    return f"{n / 1e6:g} MB" if n >= 1e6 else f"{n / 1e3:g} kB"


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def md_table(head: Sequence[str], lines: Sequence[Sequence], right: Sequence[int] = ()) -> str:
    """A Markdown table; columns in `right` are right-aligned (figures)."""
    align = ["---:" if i in right else "---" for i in range(len(head))]
    out = ["| " + " | ".join(_md(h) for h in head) + " |", "| " + " | ".join(align) + " |"]
    out += ["| " + " | ".join(_md(c) for c in line) + " |" for line in lines]
    return "\n".join(out)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


# ----------------------------------------------------------------------- tables


def tct_table(run: Run) -> str:
    """statistics.summarize over the run's cells, as Markdown, in the scenario's order."""
    summary = stats.summarize(run.labelled)
    cells, schemes = run.cells, run.schemes
    summary.sort(key=lambda r: (cells.index(r["client"]), schemes.index(r["scheme"])))
    with_ended = any(r.get("ended_on") and handover.is_policy(r["scheme"]) for r in summary)
    head = ["cell", "scheme", "n", "median s", "mean s", "95% CI of mean", "errors", "SHA-256 fail", "status"]
    if with_ended:
        head.insert(-1, "ended on")
    lines = []
    for r in summary:
        if r["n"]:
            fig = [f"{r['tct_median_s']:.3f}", f"{r['tct_mean_s']:.3f}", f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]"]
        else:
            fig = ["–", "–", "–"]
        line = [r["client"], short_scheme(r["scheme"]), str(r["n"])] + fig + [
            str(r["errors"]), str(r["integrity_failures"]), r["status"]]
        if with_ended:
            line.insert(-1, stats.ended_on_text(r["ended_on"]) if handover.is_policy(r["scheme"]) else "–")
        lines.append(line)
    return md_table(head, lines, right=(2, 3, 4, 6, 7))


def compared_pairs(run: Run) -> List[Tuple[str, str]]:
    return list(run.scenario.compare) or stats.default_pairs(run.schemes)


def ratio_table(run: Run) -> Optional[str]:
    """The ratio of mean TCTs of the compared pairs per cell (statistics.ratio_rows), or None."""
    pairs = compared_pairs(run)
    ratios = stats.ratio_rows(run.labelled, pairs) if pairs else []
    if not ratios:
        return None
    lines = []
    for r in ratios:
        fig = ["–" if r["ratio"] is None else f"{r['ratio']:.3f}",
               "–" if r["lo"] is None else f"[{r['lo']:.3f}, {r['hi']:.3f}]"]
        lines.append([r["client"], f"{short_scheme(r['a'])} / {short_scheme(r['b'])}"] + fig
                     + [str(r["n_pairs"]), stats.verdict_word(r["verdict"])])
    return md_table(["cell", "A / B", "ratio of means", "95% CI (paired bootstrap)", "pairs", "verdict"], lines,
                    right=(2, 4))


def against_text(v: dict, name: str, figures: str) -> str:
    """A policy against one scheme in words, from a statistics.compare verdict (as_dict):
    "beats NAME (1.73 s): 14.5% faster; better (ratio ...)" only when the interval shows it."""
    kind = v["kind"]
    if kind == "better":
        return f"beats {name}: {figures}; {v['text']}"
    if kind == "worse":
        return f"loses to {name}: {figures}; {v['text']}"
    if kind == "ran only":
        return f"is no win over {name} ({figures}): it {v['text']}"
    if kind == "too few":
        return f"is not judged against {name} ({figures}): {v['text']}"
    return f"is not shown to differ from {name} ({figures}): {v['text']}"


def paths_table(run: Run) -> str:
    lines = [[c.name, c.describe_path(), ", ".join(_size(s) for s in c.file_sizes)] for c in run.scenario.clients]
    return md_table(["client", "path", "file sizes"], lines)


# ----------------------------------------------------------------------- figures


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: Line style per datapath in the CDFs (colour is per algorithm, so kernel:bbr and ovs:bbr
#: share a colour and differ in style).
KIND_STYLES = {"native": ":", "kernel": "-", "ovs": "--"}


def _colours(schemes: Sequence[str]) -> Dict[str, tuple]:
    plt = _pyplot()
    algs = list(dict.fromkeys(short_scheme(s).split(":", 1)[1] for s in schemes))
    palette = plt.get_cmap("tab10" if len(algs) <= 10 else "tab20").colors
    return {s: palette[algs.index(short_scheme(s).split(":", 1)[1]) % len(palette)] for s in schemes}


#: Colours a figure is reduced to when saved: line plots need few, and a palette PNG is a
#: fraction of a true-colour one (the mix's CDFs: 40 kB instead of 150).
FIGURE_COLOURS = 64


def _save(fig, path: str) -> None:
    """Save at FIGURE_DPI as a palette PNG (atomically)."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=FIGURE_DPI)
    buf.seek(0)
    with Image.open(buf) as im:
        small = im.convert("RGB").quantize(colors=FIGURE_COLOURS)
    with results.atomic_path(path) as tmp:
        small.save(tmp, format="PNG", optimize=True)


def _label_panels(axes, used: int, ylabel: str, xlabel: str) -> None:
    """Small multiples: hide the panels past the `used` ones, label the outer axes."""
    for ax in axes.flat[used:]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel, fontsize=7)
    for ax in axes[-1, :]:
        ax.set_xlabel(xlabel, fontsize=7)


def plot_cdfs(path: str, run: Run) -> Dict[str, List[str]]:
    """TCT CDFs, one panel per cell, one line per scheme; the CDF is over every attempt, so
    failed transfers keep a scheme's line below 1, and their count is written in the panel.
    Returns those notes per cell."""
    plt = _pyplot()
    rows, cells, schemes = run.labelled, run.cells, run.schemes
    cells = [c for c in cells if any(r["client"] == c for r in rows)]
    ncols = min(CDF_COLUMNS, len(cells))
    nrows = math.ceil(len(cells) / ncols)
    width = max(3.1 * ncols, 4.0)
    shown = [s for s in schemes if any(r["scheme"] == s for r in rows)]
    legend_cols = max(1, min(len(shown), int(width / 1.7)))
    legend_h = 0.17 * math.ceil(len(shown) / legend_cols) + 0.15  # inches
    fig, axes = plt.subplots(nrows, ncols, figsize=(width, 2.3 * nrows + 0.5 + legend_h), squeeze=False)
    colours = _colours(schemes)
    handles, notes = {}, {}
    for ax, cell in zip(axes.flat, cells):
        failed = notes[cell] = []
        for s in schemes:
            attempts = [r for r in rows if r["client"] == cell and r["scheme"] == s]
            if not attempts:
                continue
            tcts = sorted(float(r["tct_s"]) for r in attempts if stats.counted(r))
            if len(tcts) < len(attempts):
                failed.append(f"{short_scheme(s)}: {len(attempts) - len(tcts)} failed")
            if not tcts:
                continue
            xs = [tcts[0]] + tcts
            ys = [0.0] + [(i + 1) / len(attempts) for i in range(len(tcts))]
            (line,) = ax.step(xs, ys, where="post", color=colours[s], ls=KIND_STYLES.get(s.split(":")[0], "-"),
                              lw=1.3)
            handles.setdefault(s, line)
        if failed:
            ax.text(0.98, 0.04, "\n".join(failed), transform=ax.transAxes, ha="right", va="bottom",
                    fontsize=6, color="red")
        ax.set_title(cell, fontsize=8)
        ax.set_ylim(0, 1.05)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    _label_panels(axes, len(cells), "fraction of transfers", "TCT (s)")
    order = [s for s in schemes if s in handles]
    fig.legend([handles[s] for s in order], [short_scheme(s) for s in order], loc="lower center",
               ncol=legend_cols, fontsize=7, frameon=False)
    fig.suptitle(f"{run.scenario.name}: TCT CDF per cell", fontsize=9)
    fig.tight_layout(rect=(0, legend_h / fig.get_figheight(), 1, 1))
    _save(fig, path)
    plt.close(fig)
    return {c: n for c, n in notes.items() if n}


def flow_rows(run: Run, scheme: str) -> List[Tuple[int, dict]]:
    """One transfer per client for `scheme` whose event slice is on disk: the first repetition
    of the client's largest file (a later repetition if that one has no slice). Returns
    (transfer number, row) in the scenario's client order."""
    order = [c.name for c in run.scenario.clients]
    best: Dict[str, Tuple[int, dict]] = {}
    for i, r in enumerate(run.rows, 1):
        if r["scheme"] != scheme or not _has_slice(run, r):
            continue
        key = (-int(r["file_bytes"]), int(r.get("repetition") or 0))
        got = best.get(r["client"])
        if got is None or key < (-int(got[1]["file_bytes"]), int(got[1].get("repetition") or 0)):
            best[r["client"]] = (int(r.get("transfer") or i), r)
    return [best[c] for c in sorted(best, key=lambda c: order.index(c) if c in order else len(order))]


def _has_slice(run: Run, row: dict) -> bool:
    return run.directory.has_events(row)


def plot_flows(path: str, run: Run, scheme: str, chosen: Sequence[Tuple[int, dict]]) -> List[str]:
    """Throughput over time of the chosen transfers of one scheme as small multiples, the
    handovers as vertical lines labelled with the new algorithm. Returns notes on transfers
    whose events could not be read (drawn as empty panels)."""
    plt = _pyplot()
    ncols = min(FLOW_COLUMNS, len(chosen))
    nrows = math.ceil(len(chosen) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.0 * ncols, 2.4 * nrows + 0.5), squeeze=False)
    notes = []
    for ax, (number, row) in zip(axes.flat, chosen):
        tct = f"TCT {row['tct_s']:.2f} s" if stats.counted(row) else "failed"
        title = f"{row['client']} {_size(int(row['file_bytes']))} rep {row.get('repetition')}, {tct}"
        try:
            flow = flow_of(run.directory.events_of(row), run.directory.events_path(row))
        except RunDirectoryError as e:
            notes.append(f"transfer {number}: {e}")
            ax.set_title(title, fontsize=8)
            continue
        s = Series.of(flow)
        starts, mbps = s.throughput_bins(PLOT_BIN_S)
        ax.step(starts, mbps, where="post", lw=1.0, color="C0")
        first = flow.algorithms()[:1]
        ax.set_title(title + (f"\nstarts on {first[0]}" if first else ""), fontsize=8)
        mark_handovers(s, None, ax, fontsize=7, inside=True)
        ax.set_xlim(left=0)
        # head room above the data for the handovers' labels
        ax.set_ylim(0, 1.35 * max(mbps, default=0) or 1)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    _label_panels(axes, len(chosen), "Mbit/s", "time since the flow started (s)")
    fig.suptitle(f"{short_scheme(scheme)}: delivered per {PLOT_BIN_S * 1000:.0f} ms; dashed = handover to the "
                 "labelled algorithm", fontsize=9)
    fig.tight_layout()
    _save(fig, path)
    plt.close(fig)
    return notes


# ----------------------------------------------------------------------- grid and the seeds' observations


def is_grid(scenario: Scenario) -> bool:
    """The grid scenario, or clients (one file size each) whose constant-rate paths form a
    full delay x loss product with at least two RTTs and two loss rates."""
    if scenario.name == GRID_SCENARIO:
        return True
    if any(len(c.file_sizes) != 1 for c in scenario.clients):
        return False
    points = {(c.delay_ms, c.loss_downlink) for c in scenario.clients if c.link.is_constant}
    delays, losses = {d for d, _ in points}, {loss for _, loss in points}
    return len(delays) >= 2 and len(losses) >= 2 and len(points) == len(delays) * len(losses)


def _fixed_medians(cell: "grid.Cell") -> Dict[str, Tuple[float, int, int]]:
    return {s: m for s, m in cell.medians.items() if not handover.is_policy(s)}


def _median_text(m: Tuple[float, int, int]) -> str:
    """A grid median, marked "≥" when it is censored (as grid.markdown marks it)."""
    return f"{'≥' if m[1] * 2 >= m[2] else ''}{m[0]:.2f} s"


def judge_observation(obs: Observation, cells: Sequence["grid.Cell"]) -> dict:
    """Per cell the observation is about (constant-rate cells only): the fastest fixed scheme
    (median TCT), the fastest of the claimed family, and the margin: when the family wins, how
    much faster it is than the best scheme outside it; otherwise how much slower it is than
    the winner (fractions), and statistics.compare's verdict on that comparison (`verdict`, the
    transfers paired by repetition): a cell is `shown` when the family wins it beyond the noise,
    `shown_against` when it loses beyond the noise. Verdict: "agrees" (shown in every such cell),
    "does not reproduce" (shown against in every one), "undecided" (neither in any), "partly"
    (the rest); None without cells."""
    out = []
    for c in cells:
        if c.trace is not None or not obs.applies(c):
            continue
        med = _fixed_medians(c)
        if not med:
            continue
        ranking = sorted(med, key=lambda s: med[s][0])
        ours = [s for s in ranking if base_algorithm(s) in obs.family]
        others = [s for s in ranking if base_algorithm(s) not in obs.family]
        entry = {"cell": c.client, "rtt_ms": c.rtt_ms, "loss_pct": c.loss_pct, "winner": ranking[0],
                 "family_best": ours[0] if ours else None, "wins": bool(ours) and ours[0] == ranking[0],
                 "medians": med, "other": None, "margin": None}
        verdict = None
        if entry["wins"] and others:
            o = others[0]
            entry["other"], entry["margin"] = o, (med[o][0] - med[ours[0]][0]) / med[o][0]
            verdict = c.versus(ours[0], o)
        elif ours and not entry["wins"]:
            entry["margin"] = (med[ours[0]][0] - med[ranking[0]][0]) / med[ranking[0]][0]
            verdict = c.versus(ours[0], ranking[0])
        entry["verdict"] = verdict.as_dict() if verdict else None
        entry["shown"] = entry["wins"] and verdict is not None and verdict.kind == "better"
        # a cell without a transfer of the family counts against it, as it did before intervals
        entry["shown_against"] = not ours or (verdict is not None and verdict.kind == "worse")
        out.append(entry)
    wins = sum(e["wins"] for e in out)
    shown, against = sum(e["shown"] for e in out), sum(e["shown_against"] for e in out)
    verdict = None if not out else ("agrees" if shown == len(out) else "does not reproduce" if against == len(out)
                                    else "undecided" if shown == 0 and against == 0 else "partly")
    return {"observation": obs.number, "cells": out, "wins": wins, "shown": shown, "shown_against": against,
            "verdict": verdict}


def observation_text(obs: Observation, judged: dict, n_fixed: int) -> List[str]:
    """The verdict and one line per cell; a cell where fewer than `n_fixed` fixed schemes have
    results (an interrupted run) says so."""
    cells = judged["cells"]
    name = f"Observation {obs.number} ({obs.claim})"
    if not cells:
        return [f"- **{name}**: not evaluated: the run has none of {obs.cells_text}."]
    verdict = {"agrees": "agrees", "does not reproduce": "does not reproduce",
               "partly": "reproduces only partly", "undecided": "undecided"}[judged["verdict"]]
    lines = [f"- **{name}**: {verdict}: {'/'.join(obs.family)} is fastest in {judged['wins']} of {len(cells)} "
             f"of {obs.cells_text} (by median; beyond the noise faster in {judged['shown']}, slower in "
             f"{judged['shown_against']})."]
    for e in cells:
        med, where = e["medians"], f"{e['cell']} ({e['rtt_ms']} ms, {e['loss_pct']:g}% loss"
        where += f"; only {len(med)} of {n_fixed} fixed schemes have results)" if len(med) < n_fixed else ")"
        win = f"{grid.short(e['winner'])} {_median_text(med[e['winner']])}"
        noise = f"; {e['verdict']['text']}" if e.get("verdict") else ""
        if e["family_best"] is None:
            lines.append(f"  - {where}: {win} fastest; no {'/'.join(obs.family)} transfer completed here.")
        elif e["wins"]:
            tail = (f", {100 * e['margin']:.0f}% less time than the best other ({grid.short(e['other'])} "
                    f"{_median_text(med[e['other']])})" if e["other"] else "")
            lines.append(f"  - {where}: {win} fastest{tail}{noise}.")
        else:
            fam = e["family_best"]
            lines.append(f"  - {where}: {win} fastest; the best of the claim, {grid.short(fam)} "
                         f"{_median_text(med[fam])}, takes {100 * e['margin']:.0f}% longer{noise}.")
    return lines


def grid_section(run: Run, out_dir: str, prefix: str, figures: List[str]) -> List[str]:
    cells = grid.cells(run.scenario, run.rows)
    schemes = [s.label for s in run.scenario.schemes]
    out = ["### Grid: best algorithm per cell (Mystique Fig. 3 in miniature)", "",
           "Median TCT per cell and scheme (s), the fastest in bold; a transfer that timed out counts as the "
           f"timeout ({run.scenario.timeout_s:g} s), and a median that is one is marked ≥ (grid.py).", "",
           grid.markdown(cells, schemes).rstrip(), ""]
    name = f"{prefix}-grid.png"
    try:
        grid.plot(os.path.join(out_dir, name), cells, f"{run.scenario.name}: best algorithm per cell (median TCT)",
                  dpi=FIGURE_DPI)
        figures.append(name)
        out += [f"![best algorithm per cell]({name})", ""]
    except grid.GridError as e:
        out += [f"No heat map: {e}.", ""]
    out += ["### Against the seeds' Observations 1-3", "",
            f"Judged on the median TCT of the fixed schemes of each constant-rate cell (policies left out); "
            f"short RTT is Mystique's Table I threshold, {SHORT_RTT_MS} ms (the grid's shortest RTT, counted "
            "as short). A cell counts for or against a claim only when statistics.py `compare` settles it: the "
            "95% interval of the ratio of mean TCTs (the claim's best against the best other, transfers paired "
            f"by repetition) lies wholly on one side of 1; fewer than {stats.MIN_VERDICT_N} repetitions give no "
            "interval.", ""]
    n_fixed = sum(1 for s in schemes if not handover.is_policy(s))
    for obs in OBSERVATIONS:
        out += observation_text(obs, judge_observation(obs, cells), n_fixed)
    return out + [""]


# ----------------------------------------------------------------------- the papers' figures beside ours


def mix_section(run: Run) -> List[str]:
    res = handover.mix(run.rows, run.scenario.timeout_s)
    out = ["### Against Mystique Fig. 8 (mix)", ""]
    if not res["datapaths"]:
        return out + ["The mix analysis found no datapath with both fixed and policy schemes with results.", ""]
    published = handover.MYSTIQUE_PUBLISHED_REDUCTION
    out += [f"Mystique reported that its policy cuts the mean TCT by {100 * published:.2f}% averaged over the fixed "
            "algorithms. Ours (handover.py `mix`): per datapath, the mean TCT over the (client, size) cells, a "
            f"failed transfer counted as the timeout ({run.scenario.timeout_s:g} s); the reduction is the mean of "
            "the per-algorithm reductions; the oracle takes the fastest fixed algorithm of each cell.", ""]
    for kind, d in res["datapaths"].items():
        fixed = [s for s in d["mean_tct_s"] if not handover.is_policy(s)]
        lines = [[short_scheme(s), f"{d['mean_tct_s'][s]:.2f}", str(d["failed"][s])] for s in d["mean_tct_s"]]
        lines.append(["per-cell oracle", f"{d['oracle_tct_s']:.2f}", ""])
        out += [f"**{kind} datapath** ({len(d['cells'])} cells)", "",
                md_table(["scheme", "mean TCT s", "failed (counted as timeout)"], lines, right=(1, 2)), ""]
        for p, f in d["policies"].items():
            dev = f["reduction_vs_fixed_avg"] - published
            best = d["best_fixed"]
            vs_best = -f["reduction_vs_best"]
            v = f["verdicts"]
            against_best = against_text(
                v["vs_best"], f"the best single fixed algorithm, {short_scheme(best)} ({d['mean_tct_s'][best]:.2f} s)",
                f"{_pct(abs(vs_best))} {'slower' if vs_best > 0 else 'faster'}")
            out.append(
                f"- **{short_scheme(p)}**: mean TCT {f['mean_tct_s']:.2f} s; it cuts the mean TCT of the "
                f"{len(fixed)} fixed algorithms by {_pct(f['reduction_vs_fixed_avg'])} on average, against "
                f"Mystique's {100 * published:.2f}%: {abs(100 * dev):.1f} percentage points "
                f"{'below' if dev < 0 else 'above'} the published figure "
                f"(against their average TCT: {_pct(f['reduction_vs_fixed_avg_tct'])}; a cut of at least "
                f"{handover.MIX_REDUCTION_TARGET:.0%}, ratio 0.82: {v['vs_fixed_avg']['text']}); it {against_best}; "
                f"it is {_pct(f['over_oracle'])} {'above' if f['over_oracle'] >= 0 else 'below'} the per-cell "
                f"oracle ({d['oracle_tct_s']:.2f} s; within {handover.ORACLE_TOLERANCE:.0%}, ratio "
                f"{1 + handover.ORACLE_TOLERANCE:g}: {v['vs_oracle']['text']}).")
        out.append("")
        policies = list(d["policies"])
        head = ["cell", "fastest fixed"] + [f"{short_scheme(p)} ran" for p in policies]
        lines = [[c, f"{short_scheme(d['oracle_choice'][c])} {d['cell_tct_s'][c][d['oracle_choice'][c]]:.2f} s"]
                 + [f"{d['policies'][p]['chosen'][c]}: {d['cell_tct_s'][c][p]:.2f} s" for p in policies]
                 for c in d["cells"]]
        out += [f"Per cell on the {kind} datapath: the fastest fixed algorithm (the oracle's choice) and what each "
                "policy ran (its mean TCT):", "", md_table(head, lines), ""]
    return out


def _relative(a: float, b: float) -> str:
    """a against b in words: "12.0% below" / "5.0% above"."""
    r = a / b - 1
    return f"{_pct(abs(r))} {'below' if r < 0 else 'above'}"


def mcc_section(run: Run) -> List[str]:
    res = handover.mcc(run.rows, run.scenario.timeout_s)
    pub = handover.MCC_PUBLISHED_S
    out = ["### Against MCC's WiFi case", ""]
    if not res["datapaths"]:
        return out + ["The mcc analysis found no results.", ""]
    p_pub, b_pub, w_pub = pub["policy:mcc-wifi"], pub["bbr"], pub["westwood"]
    out += [f"MCC published mean TCTs of {p_pub:.2f} s (its WiFi policy), {b_pub:.2f} s (BBR) and {w_pub:.2f} s "
            f"(Westwood): its policy {_relative(p_pub, b_pub)} BBR and {_relative(p_pub, w_pub)} Westwood. Ours "
            "(handover.py `mcc`): per datapath, the mean TCT over the clients, a failed transfer counted as the "
            f"timeout ({run.scenario.timeout_s:g} s). Testbeds differ, so the relative figures are the ones to "
            "compare. A policy beats a fixed scheme only when the 95% bootstrap interval of the ratio of their "
            "mean TCTs (transfers paired by client and repetition, statistics.py `compare`) lies wholly below 1.",
            ""]
    for kind, d in res["datapaths"].items():
        mean = d["mean_tct_s"]
        by_alg = {base_algorithm(s): s for s in mean if not handover.is_policy(s)}
        bbr, westwood = by_alg.get("bbr"), by_alg.get("westwood")
        lines = []
        for s in mean:
            alg = s.split(":", 1)[1]
            published = pub.get(alg)
            lines.append([short_scheme(s), f"{mean[s]:.2f}", f"{published:.2f}" if published is not None else "–",
                          f"{mean[s] - published:+.2f}" if published is not None else "–",
                          _relative(mean[s], mean[bbr]) if bbr and s != bbr else "–"])
        out += [f"**{kind} datapath** ({', '.join(d['cells'])})", "",
                md_table(["scheme", "ours: mean TCT s", "MCC published s", "ours − published s", "ours vs fixed BBR"],
                         lines, right=(1, 2, 3)), ""]
        for p, beats in d["policy_beats_all_fixed"].items():
            parts = [f"- **{short_scheme(p)}**: {mean[p]:.2f} s"]
            if bbr:
                parts.append(f"{_relative(mean[p], mean[bbr])} fixed BBR ({mean[bbr]:.2f} s; MCC's policy: "
                             f"{_relative(p_pub, b_pub)})")
            if westwood:
                parts.append(f"{_relative(mean[p], mean[westwood])} fixed Westwood ({mean[westwood]:.2f} s; MCC's "
                             f"policy: {_relative(p_pub, w_pub)})")
            against = d["verdicts"][p]
            if not against:
                verdict = "has no fixed scheme to beat"
            elif beats:
                verdict = "beats every fixed scheme beyond the noise, as MCC's did"
            elif beats is False:
                verdict = "does not beat every fixed scheme (one is faster beyond the noise), which MCC's did"
            else:
                verdict = "is not shown to beat every fixed scheme, which MCC's did"
            judged = "; ".join(f"against {short_scheme(f)}: {v['text']}" for f, v in against.items())
            ran = "; ".join(f"{c}: {a}" for c, a in d["chosen"][p].items())
            out.append(", ".join(parts) + f"; it {verdict}" + (f" ({judged})" if judged else "") + f". It ran {ran}.")
        out.append("")
    return out


def smoothness_section(run: Run) -> List[str]:
    out = ["### Against MCC Fig. 5 (smoothness of a handover)", ""]
    target = handover.SMOOTH_RATIO_TARGET
    if not any(_has_slice(run, r) for r in run.rows if handover.is_policy(r["scheme"])):
        return out + ["Not evaluated: the policy transfers of this run directory have no flow event slices.", ""]
    try:
        res = handover.smoothness(run.path, run.rows)
    except RunDirectoryError as e:
        return out + [f"Not evaluated: {e}.", ""]
    hs = [h for h in res["handovers"] if h.get("handover")]
    out += [f"MCC Fig. 5 is about how smoothly a flow is carried across live handovers. The target here "
            f"(handover.py `smoothness`): throughput in the {handover.AFTER_HANDOVER_S:g} s after each handover at least "
            f"{target:.0%} of the new algorithm's steady state (median of its fixed scheme, first "
            f"{handover.STEADY_SKIP_S:g} s excluded), no stall, no burst past the window.", ""]
    mb = lambda x: "–" if x is None else f"{x / 1e6:.2f}"
    lines = [[str(h["transfer"]), short_scheme(h["scheme"]), h["handover"], f"{h['t_s']:.2f}", mb(h["throughput_bps"]),
              mb(h["steady_bps"]), "–" if h["ratio"] is None else f"{100 * h['ratio']:.0f}%", str(h["stall_bins"]),
              "–" if h["burst"] is None else ("yes" if h["burst"] else "no"),
              "–" if h["smooth"] is None else ("yes" if h["smooth"] else "no")] for h in hs]
    out += [md_table(["transfer", "scheme", "handover", "t s", "Mbit/s after", "steady Mbit/s", "ratio", "stalls",
                      "burst", f">= {target:.0%}"], lines, right=(0, 3, 4, 5, 6, 7)), ""]
    judged = [h for h in hs if h["ratio"] is not None]
    v = res["verdict"]
    if judged:
        low = min(judged, key=lambda h: h["ratio"])
        smooth = sum(1 for h in judged if h["smooth"])
        out.append(f"{smooth} of {len(judged)} handovers reach {target:.0%} of the new algorithm's steady state "
                   f"(target {'met' if smooth == len(judged) else 'missed'}); the lowest is "
                   f"{100 * low['ratio']:.0f}% ({short_scheme(low['scheme'])} {low['handover']} at "
                   f"{low['t_s']:.1f} s); {v['stalls']} stalled 500 ms bins, {v['bursts']} bursts.")
    else:
        out.append(f"{len(hs)} handovers, none with a steady state to compare with (no fixed scheme of the new "
                   "algorithm in the run).")
    return out + [""]


PAPER_SECTIONS = {"mix": mix_section, "mcc": mcc_section, "smoothness": smoothness_section}


# ----------------------------------------------------------------------- the page


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def run_section(run: Run, number: int, out_dir: str, figures: List[str],
                objectives: Sequence[str] = ()) -> List[str]:
    sc, rows = run.scenario, run.rows
    prefix = f"{number}-{_slug(sc.name)}"
    out = [f"## {number}. {sc.name} (`{run.shown}`)", ""]
    if sc.raw.get("description"):
        out += [f"> {sc.raw['description']}", ""]
    failed = sum(1 for r in rows if not stats.counted(r))
    reps = max((int(r.get("repetition") or 0) for r in rows), default=0)
    started = sorted(r["started_at"] for r in rows if r.get("started_at"))
    when = f", {started[0][:16].replace('T', ' ')} to {started[-1][:16].replace('T', ' ')} UTC" if started else ""
    out += [f"{len(rows)} transfers read from `{run.source}` ({reps} repetitions, {len(run.schemes)} schemes, "
            f"{len(run.cells)} cells{when}); **{failed} failed** (errors or SHA-256 mismatches, counted in the "
            "table below, never dropped silently).", ""]
    if not rows:
        return out + ["No transfer recorded: nothing else to report.", ""]
    renamed = [(s, short_scheme(s)) for s in run.schemes if short_scheme(s) != s]
    if renamed:
        out += ["Schemes shortened below: " + "; ".join(f"`{b}` = `{a}`" for a, b in renamed) + ".", ""]
    out += ["### Paths", "", paths_table(run), "",
            "### Transfer completion times", "",
            "Per cell and scheme: successful transfers (n), median and mean TCT, and the Student-t 95% "
            "confidence interval of the mean (statistics.py).", "", tct_table(run), ""]
    ratios = ratio_table(run)
    if ratios:
        out += ["Ratio of mean TCTs A / B per cell, transfers paired by repetition, with the paired "
                "percentile-bootstrap 95% interval (statistics.py `ratio_rows`). The verdict is statistics.py "
                "`compare`'s: A is better or worse only when the interval lies wholly on one side of 1; with fewer "
                f"than {stats.MIN_VERDICT_N} pairs no interval and no verdict.", "", ratios, ""]
    else:
        out += ["No compared pairs (the scenario names no `compare`, and no scheme has a `native:` counterpart).", ""]
    for objective in objectives or ([sc.objective] if sc.objective else []):
        out += objective_section(run, objective)
    name = f"{prefix}-tct-cdf.png"
    plot_cdfs(os.path.join(out_dir, name), run)
    figures.append(name)
    out += ["### TCT distributions", "",
            "One panel per cell, one line per scheme (colour: algorithm; line: datapath, solid kernel, dashed "
            "ovs, dotted native). Each CDF is over all attempts, so failed transfers keep a line below 1.", "",
            f"![TCT CDFs]({name})", ""]
    out += flows_section(run, out_dir, prefix, figures)
    if is_grid(sc):
        out += grid_section(run, out_dir, prefix, figures)
    if sc.analysis in PAPER_SECTIONS:
        out += PAPER_SECTIONS[sc.analysis](run)
    return out


def objective_section(run: Run, objective: str) -> List[str]:
    """Every scheme's cost per transfer under an objective and each policy against its cell's
    best fixed scheme (statistics.objective_rows: the run summary's own table)."""
    rows = stats.objective_rows(run.labelled, objective)
    if not rows:
        return [f"### Objective `{objective}`", "", "No transfer has the figures this objective reads.", ""]
    lines = [[r["client"], short_scheme(r["scheme"]), str(r["n"]), stats.median_ci_text(r["cost_median"], r["ci95"], 4),
              "best fixed" if r["best_fixed"] else (r["verdict"]["text"] if r.get("verdict") else ""),
              "; ".join(r.get("ran") or [])] for r in rows]
    return [f"### Objective `{objective}`", "",
            "Cost per transfer (lower is better; learner/README.md, \"Objectives\"): median with its 95% interval; "
            "each policy against the fixed scheme with the least median cost in its cell (statistics.py `compare`, "
            "paired by repetition), and what each of its flows ran.", "",
            md_table(["cell", "scheme", "n", "median cost [95% CI]", "verdict", "ran"], lines), ""]


def flows_section(run: Run, out_dir: str, prefix: str, figures: List[str]) -> List[str]:
    sc = run.scenario
    wanted = [s for s in run.schemes if handover.is_policy(s)] + [s for s in sc.plot_schemes if not handover.is_policy(s)]
    out = ["### Throughput over time", ""]
    if not wanted:
        return out + ["The scenario has no policy scheme and no `plot_schemes`: no flow drawn.", ""]
    if not any(_has_slice(run, r) for r in run.rows):
        where = ("its rows name no event slice" if not any(r.get("events") for r in run.rows)
                 else "the event slices its rows name are missing")
        return out + [f"No flow event slices in this run directory ({run.source}; {where}): throughput over time "
                      "is not drawn.", ""]
    out += [f"One transfer per client of each policy scheme and of the scenario's `plot_schemes`: its first "
            f"repetition of the largest file, bytes delivered per {PLOT_BIN_S * 1000:.0f} ms; dashed lines are "
            "handovers, labelled with the algorithm handed over to; each panel's title names the algorithm the "
            "flow started on.", ""]
    for s in wanted:
        chosen = flow_rows(run, s)
        if not chosen:
            out += [f"- {short_scheme(s)}: no transfer with an event slice.", ""]
            continue
        name = f"{prefix}-flows-{_slug(short_scheme(s))}.png"
        notes = plot_flows(os.path.join(out_dir, name), run, s, chosen)
        figures.append(name)
        out += [f"![throughput over time, {short_scheme(s)}]({name})", ""]
        out += [f"- {n}" for n in notes] + ([""] if notes else [])
    return out


def write_report(run_dirs: Sequence[str], out_dir: Optional[str] = None,
                 objectives: Sequence[str] = ()) -> Tuple[str, List[str]]:
    """Write OUT_DIR/report.md and its figures; returns (the page's path, the figures' names)."""
    if not run_dirs:
        raise RunDirectoryError("no run directory given")
    runs = [load_run(d) for d in run_dirs]
    out_dir = out_dir or os.path.join(run_dirs[0], "report")
    os.makedirs(out_dir, exist_ok=True)
    figures: List[str] = []
    names = ", ".join(f"{r.scenario.name}" for r in runs)
    page = [f"# ccswitch report: {names}", "",
            "Written by `ccswitch report " + " ".join(r.shown for r in runs) + "`. Figures are the PNG files beside "
            "this page; every figure and table below is computed from the run directories' transfers (and their "
            "flows' event slices where kept).", ""]
    page += [f"{i}. [{r.scenario.name}](#{i}-{_anchor(r)})" for i, r in enumerate(runs, 1)] + [""]
    for i, run in enumerate(runs, 1):
        page += run_section(run, i, out_dir, figures, objectives)
    path = os.path.join(out_dir, "report.md")
    results.write_text_atomic(path, "\n".join(page).rstrip() + "\n")
    return path, figures


def _anchor(run: Run) -> str:
    """GitHub's anchor of a run's heading "N. NAME (`PATH`)" without the leading "N-"."""
    text = f"{run.scenario.name} ({run.shown})".lower()
    return re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-")


def _cli(args) -> int:
    try:
        objectives = [_objectives.canonical(o) for o in args.objective or []]
        path, figures = write_report(args.run_dirs, args.out, objectives)
    except (RunDirectoryError, _objectives.ObjectiveError) as e:
        args.parser.error(str(e))
    print(f"wrote {path} and {len(figures)} figures beside it")
    return 0


def add_cli(sub) -> None:
    what = "one Markdown page (report.md, PNG figures beside it) over finished run directories"
    p = sub.add_parser("report", help=what,
                       description=what + ": TCT tables with confidence intervals, TCT CDFs, throughput over "
                                          "time with handovers, the grid's heat map, and our figures beside the "
                                          "papers' for the scenarios that reproduce one; see "
                                          "ccswitch.analysis.report")
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR", help="a run directory written by `ccswitch run`")
    p.add_argument("-o", "--out", metavar="OUT_DIR", help="where to write report.md (default: RUN_DIR/report of "
                                                          "the first run directory)")
    p.add_argument("--objective", action="append", metavar="OBJ",
                   help="judge every run by this objective too (repeatable; default: each scenario's own "
                        "`objective`, if any): tct, power, tct_delay_budget:budget_ms=N, weighted:...")
    p.set_defaults(func=_cli, parser=p)
