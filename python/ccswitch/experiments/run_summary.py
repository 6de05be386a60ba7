"""A run's summary, written when it ends (or stops on an error with transfers done):
transfers.parquet, summary.json (`run` metadata, the per-cell `rows`, `ratios`, the summary
sections of statistics.py, `ovs_overhead`), summary.txt (the same as tables), tct.png.

What a command adds after the run (handover analysis, flow plots, trade-off plots: analysis/)
comes in through a `RunAnalysis`, so that experiments/ does not depend on analysis/: its
`summary_parts` adds keys to summary.json and returns text appended to summary.txt (before
either is written), its `plots` draws after tct.png. Neither may lose the run's data."""

from __future__ import annotations

import datetime as _dt
import os
from typing import TYPE_CHECKING, Dict, List, Optional, Protocol

from ..topology import bridges as _ovs
from ..topology.namespaces import log
from . import results, statistics as stats
from .scenario import Scenario

if TYPE_CHECKING:
    from .runner import Runner


class RunAnalysis(Protocol):
    """What a command adds to a finished run's summary (see the module docstring)."""

    def summary_parts(self, runner: "Runner", doc: dict) -> str:
        ...

    def plots(self, runner: "Runner") -> None:
        ...


def utcnow() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="milliseconds")



def labelled_rows(scenario: Scenario, rows: List[dict]) -> List[dict]:
    """Rows whose client is "name@bytes" for clients that download several file sizes (the
    summary's cells; `ccswitch report` labels a stored run's rows the same way)."""
    multi = {c.name for c in scenario.clients if len(c.file_sizes) > 1}
    return [dict(r, client=f"{r['client']}@{r['file_bytes']}") if r["client"] in multi else r for r in rows]


def client_paths(scenario: Scenario) -> Dict[str, str]:
    """Each summary client ("name" or "name@bytes") -> its path in words."""
    out = {}
    for c in scenario.clients:
        out[c.name] = c.describe_path()
        for size in c.file_sizes:
            out[f"{c.name}@{size}"] = c.describe_path()
    return out


def write_run_summary(runner: "Runner", analysis: Optional[RunAnalysis] = None) -> None:
    """Write the runner's summary files and plots; set its `table` (summary.txt's text) and
    `summary` (the per-cell rows)."""
    sc, out_dir = runner.sc, runner.out_dir
    summary = runner.summary_rows()
    results.write_transfers_parquet(os.path.join(out_dir, "transfers.parquet"), runner.rows)
    meta = {
        "scenario": sc.name, "source": sc.source, "repetitions": sc.repetitions,
        "schemes": [s.label for s in sc.schemes], "clients": [c.name for c in sc.clients],
        "transfers": len(runner.rows), "errors": sum(1 for r in runner.rows if r["error"]),
        "wall_s": round(runner.wall_s, 2), "finished_at": utcnow(),
        "kernel": os.uname().release, "bridge": sc.bridge_kind,
    }
    doc = {"run": meta, "rows": summary}
    table = stats.format_table(summary)
    ratios = runner.ratio_rows()
    if ratios:
        doc["ratios"] = ratios
        table += "\n\n" + stats.format_ratio_table(ratios)
    sections, text = stats.summary_sections(runner.labelled_rows(), objective=runner.sc.objective)
    doc.update(sections)
    if text:
        table += "\n\n" + text
    if sc.uses_ovs:
        overhead = _ovs.overhead_rows(runner.labelled_rows(), out_dir)
        doc["ovs_overhead"] = overhead
        if overhead:
            table += "\n\n" + _ovs.format_overhead(overhead)
    if analysis is not None:
        table += analysis.summary_parts(runner, doc)
    results.write_json_atomic(os.path.join(out_dir, "summary.json"), doc)
    results.write_text_atomic(os.path.join(out_dir, "summary.txt"), table + "\n")
    runner.table = table
    runner.summary = summary
    try:
        clients = list(dict.fromkeys(r["client"] for r in summary))
        plot_rows = runner.labelled_rows()
        results.plot_tct(os.path.join(out_dir, "tct.png"), plot_rows, clients,
                         [s.label for s in sc.schemes], title=sc.name,
                         paths=runner.client_paths())
    except Exception as e:  # a plot must not lose the data
        log(f"warning: could not draw tct.png: {e}")
    if analysis is not None:
        analysis.plots(runner)
