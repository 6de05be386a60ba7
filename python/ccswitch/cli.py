"""Command line: `ccswitch run|sweep|worker|trace|bench|grid|report|algorithms|operator|analyze|plot-flows ...`."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from . import __version__

#: The scheme grammar, shown by `ccswitch run --help` (python/ccswitch/experiments/scenario.py
#: parses it; experiments/README.md has the details).
SCHEMES_HELP = """\
schemes (the scenario's `schemes` list, or --schemes A,B,...):
  native:reno|cubic|bbr        the kernel's own congestion control in the server's namespace
                               (the only ones this kernel has built in)
  kernel:ALG                 the BPF datapath in the server's kernel, driven by the agent
                               running ALG
  ovs:ALG                   the ovs datapath: ALG enforced from the bridge port in front
                               of a server that keeps its own CC (scenario key ovs_server_cc)
where ALG is
  NAME                         an agent algorithm, e.g. kernel:cubic (list: ccswitch algorithms)
  NAME:PARAM=VALUE,...         with parameters, e.g. kernel:cubic:beta=0.8,hystart=0
  py:MODULE:CLASS              a Python class, e.g. kernel:py:ccswitch.authoring.examples.reno:Reno
                               (the scenario's directory is on PYTHONPATH)
  pyportus:FILE.py[:CLASS]     an unmodified pyportus algorithm file, e.g. kernel:pyportus:aimd.py:AIMD
                               (FILE relative to the scenario's directory or the current one;
                               without CLASS, the algorithm the file starts with portus.start)
  policy:NAME[:KEY=VALUE,...]  a built-in policy choosing each flow's algorithm and handing it over,
                               e.g. kernel:policy:mystique:rtt_threshold_ms=40
                               (built-ins and their rules: ccswitch algorithms)
  policy:FILE[:KEY=VALUE,...]  a policy file (contains '/' or ends in .toml; relative to the
                               scenario, to the current directory in --schemes; format in
                               README.md, "Policy files")
Names, parameters and policies are checked by the agent before the first transfer.
"""


def build_parser() -> argparse.ArgumentParser:
    from .agent import algorithms, operator
    from .analysis import grid, report
    from .commands import evaluate as evaluate_command, run as run_command, sweep as sweep_command
    from .experiments import bench, distributed, traces
    from .learner import dataset

    parser = argparse.ArgumentParser(prog="ccswitch", description="ccswitch congestion-control plane tools")
    parser.add_argument("--version", action="version", version=f"ccswitch {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    traces.add_cli(sub)
    run_command.add_cli(sub)
    _explain_schemes(sub.choices["run"])
    bench.add_cli(sub)
    grid.add_cli(sub)
    report.add_cli(sub)
    algorithms.add_cli(sub)
    operator.add_cli(sub)
    sweep_command.add_cli(sub)
    evaluate_command.add_cli(sub)
    dataset.add_cli(sub)
    distributed.add_cli(sub)
    for old, new in RENAMED_COMMANDS.items():
        _refuse_renamed(sub, old, new)
    return parser


#: Subcommands of earlier versions and what they are called now; the old name is refused with
#: an error naming the new one (one word per concept: a change of algorithm is a handover,
#: the socket an operator talks to is the operator interface).
RENAMED_COMMANDS = {"switching": "handover", "control": "operator"}


def _refuse_renamed(sub, old: str, new: str) -> None:
    p = sub.add_parser(old, add_help=False, help=argparse.SUPPRESS)
    p.add_argument("rest", nargs=argparse.REMAINDER)

    def refuse(args) -> int:
        print(f"ccswitch: error: `ccswitch {old}` was renamed: use `ccswitch {new}`", file=sys.stderr)
        return 2

    p.set_defaults(func=refuse)


def _explain_schemes(run: argparse.ArgumentParser) -> None:
    """Append the scheme grammar to `ccswitch run --help`, line breaks kept."""
    run.formatter_class = argparse.RawDescriptionHelpFormatter
    run.epilog = SCHEMES_HELP if not run.epilog else f"{run.epilog}\n\n{SCHEMES_HELP}"


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
