"""`ccswitch sweep`: run every candidate algorithm on paths sampled from a sweep spec into a
resumable cell store (experiments/sweep.py), each batch's run with the post-run analyses of
`ccswitch run`."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
import time

from ..analysis.after_run import RunAnalyses
from ..experiments.errors import Interrupted, RunError
from ..experiments.scenario import ScenarioError
from ..experiments.sweep import format_duration, make_runner, run_sweep
from ..experiments.sweep_paths import EST_OVERHEAD_PER_CELL_S, EST_TCT_SHARE, cells_of, sample_paths
from ..experiments.sweep_spec import Spec, SweepError, load_spec
from ..experiments.sweep_store import CellStore
from .run import add_cluster_options, check_cluster_options


def default_store(spec: Spec) -> str:
    """`learner/sweeps/NAME.toml` -> `learner/sweeps/NAME/`: beside the spec, named after it."""
    base = os.path.dirname(spec.source) if spec.source else os.getcwd()
    return os.path.join(base, spec.name)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="run every candidate algorithm on paths sampled from a sweep spec (resumable)",
        description="Sample paths from a sweep spec (learner/README.md), run every candidate on each with the "
                    "experiment runner, and keep each finished cell in a committable store; a rerun continues "
                    "where an interrupted sweep stopped.")
    p.add_argument("spec", help="sweep spec TOML file (e.g. learner/sweeps/paths-v1.toml)")
    p.add_argument("--store", help="cell store directory (default: beside the spec, named after the sweep)")
    p.add_argument("--raw", help="where the raw run directories go (default results/sweep-NAME)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the sampled paths and the cells still to run, then stop (no root needed)")
    p.add_argument("--max-cells", type=int, help="run at most this many of the remaining cells")
    add_cluster_options(p)
    p.set_defaults(func=_cli_sweep, parser=p)


def _dry_run(spec: Spec, store: CellStore) -> int:
    paths = sample_paths(spec, log=lambda m: print(m, file=sys.stderr))
    cells = cells_of(spec, paths)
    todo = [c for c in cells if not store.has(c)]
    for p in paths:
        print(f"{p.client_name} {p.component:10s} {p.describe()}; sizes {p.sizes}; est. slowest "
              f"{', '.join(f'{v:g} s' for v in p.est_slowest_s.values())}"
              + (f"; {len(p.redraws)} redraw(s)" if p.redraws else ""))
    est = sum(c.path.est_slowest_s[c.file_bytes] * EST_TCT_SHARE + EST_OVERHEAD_PER_CELL_S for c in todo)
    comps = {c.name: sum(1 for p in paths if p.component == c.name) for c in spec.components}
    held = sum(1 for p in paths for r in p.redraws if r.startswith("held-out"))
    slow = sum(1 for p in paths for r in p.redraws if r.startswith("too slow"))
    print(f"{len(paths)} paths ({', '.join(f'{k} {v}' for k, v in comps.items())}), {len(cells)} cells, "
          f"{len(cells) - len(todo)} finished, {len(todo)} to run (rough estimate {format_duration(est)}); "
          f"redraws: {held} held out, {slow} too slow")
    return 0


def _cli_sweep(args) -> int:
    from ..experiments.distributed import ClusterError
    from ..topology.namespaces import TopologyError, log

    try:
        spec = load_spec(args.spec)
        if args.max_cells is not None and args.max_cells < 1:
            raise SweepError("--max-cells: must be >= 1")
        check_cluster_options(args)
    except (SweepError, ScenarioError) as e:
        args.parser.error(str(e))
    store = args.store or default_store(spec)
    raw = args.raw or os.path.join("results", f"sweep-{spec.name}")
    if args.dry_run:
        try:
            return _dry_run(spec, CellStore(store))
        except SweepError as e:
            args.parser.error(str(e))
    t0 = time.monotonic()

    def on_signal(signum, frame):
        # between batches (inside one, the runner's own handler tears its topology down first)
        raise Interrupted(signum)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    try:
        with contextlib.ExitStack() as stack:
            client = None
            if args.cluster is not None or args.local_workers is not None:
                from ..experiments import distributed as _dist

                client = stack.enter_context(_dist.cluster_client(args.cluster, args.local_workers,
                                                                  slots_per_worker=args.slots_per_worker, log=log))
            res = run_sweep(spec, store, raw, log=log, max_cells=args.max_cells, client=client,
                            runner_factory=functools.partial(make_runner, analysis=RunAnalyses()))
    except SweepError as e:
        args.parser.error(str(e))
    except ScenarioError as e:
        args.parser.error(str(e))
    except Interrupted as e:
        log(f"interrupted by {e}; everything torn down; finished cells are in {store}: rerun the same command "
            "to continue")
        return 128 + e.signum
    except (RunError, TopologyError, ClusterError) as e:
        log(f"error: {e}; finished cells are in {store}: rerun to continue")
        return 1
    wall = time.monotonic() - t0
    log(f"sweep {spec.name}: {res.ran} cells ran in {format_duration(wall)}"
        + (f" ({wall / res.ran:.1f} s per cell)" if res.ran else "")
        + f", {res.stored} stored, {res.skipped} finished earlier, {len(res.unfinished)} to run again; store {store}")
    for key, why in res.unfinished[:10]:
        log(f"  not finished: {key}: {why}")
    return 0 if not res.unfinished else 3
