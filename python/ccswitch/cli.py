"""Command line: `ccswitch trace ...`, `ccswitch run ...`, `ccswitch bench ...`."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional


def build_parser() -> argparse.ArgumentParser:
    from . import traces
    from . import algorithms
    from . import control
    from .experiments import bench, grid, runner

    parser = argparse.ArgumentParser(prog="ccswitch", description="ccswitch congestion-control plane tools")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    traces.add_cli(sub)
    runner.add_cli(sub)
    bench.add_cli(sub)
    grid.add_cli(sub)
    algorithms.add_cli(sub)
    control.add_cli(sub)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
