"""`ccswitch run` (execute a scenario, then its post-run analysis) and `ccswitch compare` (two
runs of one scenario cell for cell), with the cluster options `ccswitch sweep` shares."""

from __future__ import annotations

import json
import os
import signal

from ..analysis import handover as _handover
from ..analysis.after_run import RunAnalyses
from ..experiments import statistics as stats
from ..experiments.environment import bin_dir, check_agent_schemes, checked_here
from ..experiments.errors import Interrupted, RunError
from ..experiments.runner import Runner
from ..experiments.units import default_out_dir
from ..topology.daemons import AGENT_TRANSPORTS, DEFAULT_AGENT_TRANSPORT, agent_check_env, check_agent_spec
from ..topology.namespaces import TopologyError, log


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("run", help="run a scenario (needs root, mahimahi, nginx, curl)",
                              description="Run an experiment scenario and write results to a directory.")
    p.add_argument("scenario", help="scenario TOML file")
    p.add_argument("--out", help="output directory (default results/<name>-<timestamp>)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    p.add_argument("--repetitions", type=int, help="override the scenario's repetitions")
    p.add_argument("--schemes", help="comma-separated schemes replacing the scenario's (e.g. native:cubic,native:bbr)")
    p.add_argument("--timeout", type=float, help="per-transfer timeout in seconds (overrides timeout_s)")
    p.add_argument("--bridge", choices=("ovs", "linux", "none"),
                   help="bridge between server and clients (overrides the scenario's bridge)")
    p.add_argument("--no-measure", action="store_true",
                   help="run without the packet probe (no delay, drops, TCP_INFO or throughput over time); "
                        "for measuring what the measurements cost")
    p.add_argument("--agent-transport", choices=AGENT_TRANSPORTS,
                   help="how the kernel shim reaches the ccswitch agent: socket (a process of its own) or "
                        "in-process (the agent in the shim's process, ccswitch-kernel --agent-in-process); "
                        f"default $CCSWITCH_AGENT_TRANSPORT, else {DEFAULT_AGENT_TRANSPORT}. Set in the "
                        "environment, so local workers (--local-workers) follow it; remote workers keep theirs")
    add_cluster_options(p)
    p.set_defaults(func=_cli_run, parser=p)
    c = subparsers.add_parser("compare", help="compare two runs of one scenario cell for cell",
                              description="Per client and scheme, the median TCT and the 95%% interval of the mean "
                                          "of two runs (e.g. in-process and on a cluster) and whether the "
                                          "intervals overlap; from each run's summary.json.")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.set_defaults(func=_cli_compare, parser=c)
    _handover.add_cli(subparsers)


def add_cluster_options(p) -> None:
    """`--cluster` / `--local-workers` of `ccswitch run` and `ccswitch sweep`."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--cluster", metavar="ADDRESS",
                   help="run every unit as a task on this Dask scheduler (tcp://HOST:8786); workers offer labs: "
                        "`ccswitch worker ADDRESS`")
    g.add_argument("--local-workers", type=int, metavar="N",
                   help="run every unit as a task on a local Dask cluster of N worker processes")
    p.add_argument("--slots-per-worker", type=int, metavar="K",
                   help="with --local-workers: labs (concurrent transfers) per worker (default: one per two "
                        "cores shared out, at least 1)")


def check_cluster_options(args) -> None:
    from ..experiments.scenario import ScenarioError

    if args.local_workers is not None and args.local_workers < 1:
        raise ScenarioError("--local-workers: must be >= 1")
    if args.slots_per_worker is not None:
        if args.local_workers is None:
            raise ScenarioError("--slots-per-worker: only with --local-workers (a remote worker says its own "
                                "labs: ccswitch worker --labs K)")
        if args.slots_per_worker < 1:
            raise ScenarioError("--slots-per-worker: must be >= 1")
    if getattr(args, "no_measure", False) and (args.cluster is not None or args.local_workers is not None):
        # a cost comparison is made on one host, alternating runs; workers always measure
        raise ScenarioError("--no-measure: only for in-process runs (not with --cluster or --local-workers)")


def _cli_compare(args) -> int:
    docs = []
    for d in (args.run_a, args.run_b):
        path = os.path.join(d, "summary.json")
        try:
            with open(path, encoding="utf-8") as f:
                docs.append(json.load(f))
        except FileNotFoundError:
            args.parser.error(f"{d}: no summary.json (not a finished run directory)")
        except json.JSONDecodeError as e:
            args.parser.error(f"{path}: not JSON: {e}")
    names = [d["run"].get("scenario") for d in docs]
    if names[0] != names[1]:
        log(f"note: different scenarios ({names[0]} / {names[1]})")
    from ..experiments.compat import canonical_scheme

    rows = [[dict(r, scheme=canonical_scheme(r["scheme"])) for r in d["rows"]] for d in docs]
    print(stats.format_comparison(stats.compare_summaries(*rows)))
    for d, label, path in zip(docs, "AB", (args.run_a, args.run_b)):
        print(f"{label} = {path}: {d['run']['transfers']} transfers, wall {d['run']['wall_s']:.1f} s")
    return 0


def _cli_run(args) -> int:
    from ..experiments.scenario import ScenarioError, load_scenario, parse_scheme, with_agent_problems

    if args.agent_transport:
        os.environ["CCSWITCH_AGENT_TRANSPORT"] = args.agent_transport
    try:
        try:
            sc = load_scenario(args.scenario)
        except ScenarioError as e:
            # the file is refused: let the agent judge the schemes that parsed too, so that one
            # report names everything (unless --schemes replaces them, or there is no agent)
            agent = os.path.join(bin_dir(), "ccswitch-agent")
            if args.schemes or not os.access(agent, os.X_OK):
                raise
            env = agent_check_env([os.path.dirname(os.path.abspath(args.scenario))])
            raise with_agent_problems(e, lambda a, p: check_agent_spec(agent, a, p, env)) from None
        if args.repetitions is not None:
            if args.repetitions < 1:
                raise ScenarioError("--repetitions: must be >= 1")
            sc.repetitions = args.repetitions
        if args.schemes:
            # policy files named on the command line are relative to the current directory
            sc.schemes = [parse_scheme(s.strip(), "--schemes", base_dir=os.getcwd())
                          for s in args.schemes.split(",") if s.strip()]
            if not sc.schemes:
                raise ScenarioError("--schemes: empty")
            sc.plot_schemes = tuple(p for p in sc.plot_schemes if p in {s.label for s in sc.schemes})
        if args.timeout is not None:
            if not args.timeout > 0:
                raise ScenarioError("--timeout: must be > 0")
            sc.timeout_s = args.timeout
        if args.bridge is not None:
            sc.bridge = args.bridge
        sc.check_bridge()
        sc.check_timeouts()
        check_cluster_options(args)
        distributed = args.cluster is not None or args.local_workers is not None
        # before anything is set up: the agent judges every agent scheme
        checked = checked_here(lambda: check_agent_schemes(sc), distributed)
    except ScenarioError as e:
        args.parser.error(str(e))
    except RunError as e:
        log(f"error: {e}")
        return 1
    out = os.path.abspath(args.out or default_out_dir(sc))
    if distributed:
        from ..experiments import distributed as _dist

        def on_signal(signum, frame):
            raise Interrupted(signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
        try:
            with _dist.cluster_client(args.cluster, args.local_workers, slots_per_worker=args.slots_per_worker,
                                      log=log) as client:
                runner = _dist.run_scenario(sc, out, client, checked=checked, log=log,
                                           analysis=RunAnalyses())
        except Interrupted as e:
            log(f"interrupted by {e}; finished transfers are in {out}/transfers.jsonl: rerun with --out {out} "
                "to continue")
            return 128 + e.signum
        except (RunError, _dist.ClusterError) as e:
            log(f"error: {e}")
            return 1
    else:
        runner = Runner(sc, out, schemes_checked=True, measure=not args.no_measure, analysis=RunAnalyses())
        try:
            runner.run()
        except Interrupted as e:
            log(f"interrupted by {e}; everything torn down; finished transfers are in {runner.out_dir}/transfers.jsonl:"
                f" rerun with --out {runner.out_dir} to continue")
            return 128 + e.signum
        except (RunError, TopologyError) as e:
            log(f"error: {e}")
            return 1
    log("")
    log(runner.table)
    log(f"\n{len(runner.rows)} transfers in {runner.wall_s:.1f} s; results in {runner.out_dir}")
    if args.json:
        print(json.dumps({"rows": stats.json_rows(runner.summary)}))
    return 0 if not any(r["error"] or not r["sha256_ok"] for r in runner.rows) else 3
