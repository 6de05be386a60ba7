"""The analyses `ccswitch run` and `ccswitch sweep` add to a run when its summary is written
(experiments/run_summary.py calls them through its `RunAnalysis` shape): the flow plots and the
scenario's handover analysis (into summary.json's `handover` and the end of summary.txt), the
destination memory's (`destination_memory`, for scenarios that keep it and have policy schemes),
then the throughput-delay and workload plots of tradeoffs.py. A failing analysis is logged; it
never loses the run's data."""

from __future__ import annotations

import os

from ..topology.namespaces import log
from . import destination_memory as _memory, handover as _handover, plots as _plots, tradeoffs as _tradeoffs


class RunAnalyses:
    """The post-run analyses of a scenario's run (a `run_summary.RunAnalysis`)."""

    def summary_parts(self, runner, doc: dict) -> str:
        """The flow plots and the scenario's handover analysis (text for summary.txt; the
        result goes into `doc`). Neither may lose the run's data: failures are logged."""
        sc, text = runner.sc, ""
        if "flows" in sc.plots:
            schemes = [s.label for s in sc.schemes if s.is_policy] + list(sc.plot_schemes)
            try:
                n = len(_plots.plot_run(runner.out_dir, runner.rows, schemes))
                runner._say(f"{n} flow plots in {os.path.join(runner.out_dir, 'flows')}")
            except Exception as e:
                log(f"warning: could not draw the flow plots: {e}")
        if sc.analysis:
            try:
                res, analysis = _handover.analyze(runner.out_dir, sc.analysis, rows=runner.rows, scenario=sc)
                doc["handover"] = res
                text = "\n\n" + analysis
            except Exception as e:
                log(f"warning: the {sc.analysis} analysis failed: {e}")
        if sc.destination_memory and any(s.is_policy for s in sc.schemes):
            try:
                res, analysis = _memory.analyze(runner.out_dir, runner.rows, [s.label for s in sc.schemes])
                doc["destination_memory"] = res
                text += "\n\n" + analysis
            except Exception as e:
                log(f"warning: the destination memory analysis failed: {e}")
        return text

    def plots(self, runner) -> None:
        try:
            _tradeoffs.plot_run_tradeoffs(runner.out_dir, runner.labelled_rows())
        except Exception as e:
            log(f"warning: could not draw the throughput-delay plots: {e}")
