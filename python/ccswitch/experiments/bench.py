"""`ccswitch bench overhead`: what the kernel datapath costs per ACK.
`ccswitch bench authoring`: what writing an algorithm in Python costs per report.
`ccswitch bench scale`: many concurrent flows (scale.py).
`ccswitch bench overhead|authoring|both --baseline REV`: REV against this tree (bench_compare.py).

For each kernel: scheme it runs real transfers over a mahimahi link and reads, around them:
the kernel's own BPF statistics of the struct_ops programs (`kernel.bpf_stats_enabled=1`:
run count and run time per program; one `ccsw_cong_control` run is one ACK), and the CPU
time (user + system, from /proc) of the shim and of the agent. Figures are per ACK for the
BPF program and per 10k ACKs for the two processes. The shim's figure includes its idle
wake-ups (about 100 per second) during the transfers, so it is an upper bound. Last come the
same transfers with `ccsw_floor` (`native:ccsw_floor`), a BPF Reno on the same hook that does
nothing else: the floor this machine charges any program per ACK, which moves with the VM's
state from one session to the next as much as ccswitch's figure does.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import statistics
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

from .environment import bin_dir
from .errors import Interrupted, RunError
from .runner import Runner, torn_down_on_exit
from .units import default_out_dir
from .scenario import Scheme, ScenarioError, load_scenario, loads_scenario
from ..topology.namespaces import TopologyError, log
from ..topology.daemons import python_agent_env

DEFAULT_SCENARIO = """
name = "overhead"
repetitions = 3
schemes = ["kernel:reno", "kernel:cubic"]
timeout_s = 120
[[clients]]
name = "wan-50ms"
delay_ms = 25
link = { mbps = 24 }
queue_packets = 200
file_bytes = 10_000_000
"""

PER_ACK_PROGRAM = "ccsw_cong_control"
#: The floor congestion control (`ccswitch-kernel --floor-cc`) and its per-ACK program.
FLOOR_CC, FLOOR_PROGRAM = "ccsw_floor", "ccsw_floor_ack"


def bpf_program_stats() -> Dict[str, Dict[str, int]]:
    """run_cnt and run_time_ns summed per program name, over every loaded ccsw_* program."""
    out = subprocess.run(["bpftool", "--json", "prog", "show"], capture_output=True, text=True, check=True)
    stats: Dict[str, Dict[str, int]] = {}
    for prog in json.loads(out.stdout or "[]"):
        name = prog.get("name", "")
        if name.startswith("ccsw_"):
            s = stats.setdefault(name, {"run_cnt": 0, "run_time_ns": 0})
            s["run_cnt"] += prog.get("run_cnt", 0)
            s["run_time_ns"] += prog.get("run_time_ns", 0)
    return stats


def cpu_seconds(pid: int) -> float:
    """CPU time of every live thread of `pid` (the scheduler's run time, ns resolution: the
    10 ms ticks of /proc/PID/stat are coarser than what a shim spends in a benchmark window)."""
    total_ns = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        raise RunError(f"process {pid} is gone: its CPU time cannot be read") from None
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total_ns += int(f.read().split()[0])
        except FileNotFoundError:
            continue  # the thread ended meanwhile
    return total_ns / 1e9


def measure_scheme(r: Runner, scheme) -> Dict[str, float]:
    r.prepare_scheme(scheme)
    # in-process, the agent's CPU is the shim's: not counted twice
    shim, agent = r.daemons.shim.pid, None if r.daemons.in_process else r.daemons.agent.pid
    return measure_transfers(r, scheme, PER_ACK_PROGRAM, shim, agent)


def start_floor_cc(r: Runner) -> Tuple[subprocess.Popen, int]:
    """Registers `ccsw_floor` (`ccswitch-kernel --floor-cc`) and makes it the server
    namespace's default; returns its process and the id of its per-ACK program. Undone by
    stop_floor_cc."""
    log_path = os.path.join(r.log_dir, "floor-cc.log")
    registered = re.compile(r"congestion control registered.*prog_id=(\d+)")

    def logged() -> List[str]:
        with open(log_path, errors="replace") as f:
            return registered.findall(f.read())

    proc = r.procs.start_and_wait("ccswitch-kernel --floor-cc", [os.path.join(bin_dir(), "ccswitch-kernel"), "--floor-cc"],
                                  log_path, lambda: bool(logged()), timeout_s=30, waiting_for=f"{FLOOR_CC} to register")
    r.ns.set_congestion_control(FLOOR_CC)
    return proc, int(logged()[-1])


def stop_floor_cc(r: Runner, proc: subprocess.Popen) -> None:
    # the namespace's default holds a reference on it: hand that back before it unregisters
    r.ns.set_congestion_control("reno")
    r.procs.stop(proc)


def measure_floor(r: Runner) -> Dict[str, float]:
    """The scenario's transfers once more with `ccsw_floor` (`ccswitch-kernel --floor-cc`, a
    BPF Reno on the hook ccswitch's program uses and nothing more): its BPF time per ACK is
    what this machine charges any program there, measured on the same path in the same run.
    No shim, no agent: those figures are None."""
    proc, _ = start_floor_cc(r)
    scheme = Scheme("native", FLOOR_CC, where="the bench's floor")
    try:
        r.current_cc = None  # the next scheme sets its own again
        return measure_transfers(r, scheme, FLOOR_PROGRAM, None, None)
    finally:
        stop_floor_cc(r, proc)


def measure_transfers(r: Runner, scheme, program: str, shim: Optional[int], agent: Optional[int]) -> Dict[str, float]:
    """Every transfer of the scenario with `scheme`, and around them the BPF statistics of
    `program` (one run per ACK) and the CPU of the shim and agent processes given."""
    shim_cpu = (lambda: 0.0) if shim is None else (lambda: cpu_seconds(shim))
    agent_cpu = (lambda: 0.0) if agent is None else (lambda: cpu_seconds(agent))
    bpf0, shim0, agent0 = bpf_program_stats(), shim_cpu(), agent_cpu()
    rows = []
    for rep in range(r.sc.repetitions):
        for client in r.sc.clients:
            for size in client.file_sizes:
                row = r.transfer(rep, client, scheme, size)
                status = "ok" if row["sha256_ok"] else f"FAILED ({row['error']})"
                log(f"{scheme.label} {client.name} rep {rep + 1}: {row['tct_s']} s {status}")
                rows.append(row)
    bpf1, shim1, agent1 = bpf_program_stats(), shim_cpu(), agent_cpu()
    delta = {n: {k: bpf1[n][k] - bpf0.get(n, {}).get(k, 0) for k in bpf1[n]} for n in bpf1}
    acks = delta.get(program, {}).get("run_cnt", 0)
    if acks == 0:
        raise RunError(f"{scheme.label}: no {program} runs counted; is kernel.bpf_stats_enabled on?")
    per_10k = 1e4 / acks
    # the programs of this scheme's congestion control only (ccswitch's or the floor's)
    floor = program == FLOOR_PROGRAM
    ours = [d for n, d in delta.items() if n.startswith(FLOOR_CC) == floor]
    return {
        "scheme": scheme.label,
        "transfers": len(rows),
        "integrity_failures": sum(not row["sha256_ok"] for row in rows),
        "acks": acks,
        "bpf_ns_per_ack": delta[program]["run_time_ns"] / acks,
        "bpf_ns_per_ack_all_programs": sum(d["run_time_ns"] for d in ours) / acks,
        "shim_cpu_ms_per_10k_acks": None if shim is None else (shim1 - shim0) * 1e3 * per_10k,
        "agent_cpu_ms_per_10k_acks": None if agent is None else (agent1 - agent0) * 1e3 * per_10k,
        "agent_transport": r.daemons.agent_transport if shim is not None else None,
        "tct_s": [row["tct_s"] for row in rows],
    }


def overhead(sc, out_dir: str) -> List[Dict[str, float]]:
    for scheme in sc.schemes:
        if scheme.kind != "kernel":
            raise RunError(f"{scheme.label}: the overhead benchmark measures kernel: schemes only")
    r = Runner(sc, out_dir)
    results = []
    with torn_down_on_exit(r.teardown):
        r.setup()
        r.sysctls.set("kernel.bpf_stats_enabled", "1")
        for scheme in sc.schemes:
            results.append(measure_scheme(r, scheme))
        results.append(measure_floor(r))
    return results


def print_table(results: List[Dict[str, float]]) -> None:
    head = ("scheme", "ACKs", "BPF ns/ACK", "all progs ns/ACK", "shim CPU ms/10k ACKs", "agent CPU ms/10k ACKs")
    print("  ".join(f"{h:>20}" for h in head), file=sys.stderr)
    for x in results:
        floor = x["shim_cpu_ms_per_10k_acks"] is None
        cells = (x["scheme"], x["acks"], f"{x['bpf_ns_per_ack']:.0f}", f"{x['bpf_ns_per_ack_all_programs']:.0f}",
                 "no shim" if floor else f"{x['shim_cpu_ms_per_10k_acks']:.1f}",
                 "no agent" if floor else "in the shim" if x["agent_cpu_ms_per_10k_acks"] is None
                 else f"{x['agent_cpu_ms_per_10k_acks']:.1f}")
        print("  ".join(f"{c:>20}" for c in cells), file=sys.stderr)


# ----------------------------------------------------------------------- authoring

AUTHORING_RUST = "reno"
AUTHORING_PYTHON = "py:ccswitch.authoring.examples.reno:Reno"
#: The full API (the algorithm brings its datapath program): the same algorithm in both.
AUTHORING_FULL_RUST = "reno-datapath"
AUTHORING_FULL_PYTHON = "py:ccswitch.authoring.examples.reno_datapath:RenoDatapath"


def bench_reports(agent: str, algorithm: str, reports: int) -> Dict[str, float]:
    """One `ccswitch-agent --bench-reports` run: µs per report through the agent's report
    path (FlowController::on_report), for `reports` synthetic reports."""
    cmd = [agent, "--algorithm", algorithm, "--bench-reports", str(reports), "--log-level", "warn"]
    cp = subprocess.run(cmd, capture_output=True, text=True, env=python_agent_env(dict(os.environ)))
    if cp.returncode != 0:
        raise RunError(f"{' '.join(cmd)} exited with status {cp.returncode}:\n{cp.stderr.strip()}")
    return json.loads(cp.stdout.strip().splitlines()[-1])


def _pair(samples: Dict[str, List[dict]], rust: str, python: str) -> Dict[str, object]:
    """Medians of one Rust/Python pair's runs, and whether both ended on the same window."""
    med = {alg: statistics.median(x["us_per_report"] for x in samples[alg]) for alg in (rust, python)}
    final = {alg: sorted({x["final_cwnd_bytes"] for x in samples[alg]}) for alg in (rust, python)}
    return {
        "rust": rust,
        "python": python,
        "rust_us_per_report": med[rust],
        "python_us_per_report": med[python],
        "python_overhead_us_per_report": med[python] - med[rust],
        "python_to_rust_ratio": med[python] / med[rust] if med[rust] else None,
        "rust_samples": [x["us_per_report"] for x in samples[rust]],
        "python_samples": [x["us_per_report"] for x in samples[python]],
        "same_final_window": final[rust] == final[python] and len(final[rust]) == 1,
        "final_cwnd_bytes": {rust: final[rust], python: final[python]},
    }


def authoring(rust: str = AUTHORING_RUST, python: str = AUTHORING_PYTHON, reports: int = 200_000,
              rounds: int = 7, full_rust: Optional[str] = AUTHORING_FULL_RUST,
              full_python: Optional[str] = AUTHORING_FULL_PYTHON) -> Dict[str, object]:
    """The cost per report of Python algorithms against the same algorithms in Rust: the
    simple API (`rust` vs `python`, the top-level figures) and, unless `full_rust` is None,
    the full API (`full_rust` vs `full_python`: the algorithm brings its own datapath program,
    figures under "full_api"). One agent process per run; in each round every algorithm runs
    once, alternated (the order reversed every other round); medians over `rounds`. Each
    pair sees the same synthetic reports, so equal final windows mean they behaved the same."""
    agent = os.path.join(bin_dir(), "ccswitch-agent")
    if not os.access(agent, os.X_OK):
        raise RunError(f"{agent} not found or not executable (build it with `cargo build --release`)")
    order = [rust, python] + ([full_rust, full_python] if full_rust else [])
    samples: Dict[str, List[dict]] = {alg: [] for alg in order}
    for i in range(rounds):
        for alg in (order if i % 2 == 0 else order[::-1]):
            samples[alg].append(bench_reports(agent, alg, reports))
    out: Dict[str, object] = {
        "reports": reports,
        "rounds": rounds,
        "path": "FlowController::on_report (decode fields, FlowState::observe, algorithm, updates)",
        **_pair(samples, rust, python),
    }
    if full_rust:
        out["full_api"] = {"path": "FlowController::on_report (the program's fields, algorithm, updates)",
                           **_pair(samples, full_rust, full_python)}
    return out


def print_authoring(x: Dict[str, object]) -> None:
    print(f"{x['reports']} reports x {x['rounds']} rounds, alternated, medians", file=sys.stderr)
    for title, p in (("simple API", x), ("full API (own datapath program)", x.get("full_api"))):
        if not p:
            continue
        print(f" {title}, through {p['path']}", file=sys.stderr)
        print(f"  {p['rust']:<62} {p['rust_us_per_report']:8.3f} µs/report", file=sys.stderr)
        print(f"  {p['python']:<62} {p['python_us_per_report']:8.3f} µs/report", file=sys.stderr)
        print(f"  Python overhead: {p['python_overhead_us_per_report']:.3f} µs/report "
              f"({p['python_to_rust_ratio']:.1f}x); same final window: {p['same_final_window']}", file=sys.stderr)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("bench", help="benchmarks (needs root, mahimahi and the Rust binaries)")
    p.add_argument("which", choices=["overhead", "authoring", "scale", "both"],
                   help="overhead: BPF run time per ACK, shim and agent CPU per 10k ACKs; "
                        "authoring: µs per report of a Python algorithm vs the same in Rust (no root needed); "
                        "scale: --flows concurrent long-lived flows on a datapath (ACKs/s, reports/s, "
                        "BPF ns per ACK or packet, shim and agent CPU, report->directive latency, memory per flow); both: overhead then authoring (with --baseline)")
    p.add_argument("--scenario", help="scenario TOML (default: an embedded 24 Mbit/s, 50 ms path)")
    p.add_argument("--repetitions", type=int, help="override the scenario's repetitions")
    p.add_argument("--out", help="output directory for logs")
    p.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    p.add_argument("--reports", type=int, default=200_000, help="authoring: reports per run")
    p.add_argument("--rounds", type=int, default=7, help="authoring: runs of each algorithm (medians)")
    p.add_argument("--rust", default=AUTHORING_RUST, help="authoring: the Rust algorithm")
    p.add_argument("--python", default=AUTHORING_PYTHON, help="authoring: the Python algorithm (py:MODULE:CLASS)")
    p.add_argument("--full-rust", default=AUTHORING_FULL_RUST,
                   help="authoring: the Rust full-API algorithm (brings its own datapath program); '' to skip the full API")
    p.add_argument("--full-python", default=AUTHORING_FULL_PYTHON,
                   help="authoring: the same algorithm in Python's full API (py:MODULE:CLASS or pyportus:FILE.py:CLASS)")
    p.add_argument("--flows", type=int, default=100, help="scale: concurrent flows")
    p.add_argument("--seconds", type=float, default=10.0, help="scale: measurement window once all flows are open")
    p.add_argument("--rate-kbps", type=float, default=1000.0, help="scale: rate each flow is read at (kbit/s)")
    p.add_argument("--delay-ms", type=int, default=50, help="scale: one-way delay (mm-delay); the RTT is twice this")
    p.add_argument("--delay-queue-packets", type=int, metavar="N",
                   help="scale: the delay shell's TUN queues, packets each way (default: "
                        "DELAY_QUEUE_PACKETS_PER_FLOW per flow, at least mahimahi's 500, at most a TUN's 524,288; "
                        "500: as mahimahi leaves them)")
    p.add_argument("--algorithm", default="cubic", help="scale: the agent's algorithm for every flow")
    p.add_argument("--loss-pct", type=float, default=0.0,
                   help="scale: drop this share (%%) of the server's packets to the clients at random, "
                        "in the kernel (iptables statistic), for urgent reports at a known rate")
    p.add_argument("--own-cpu", action="store_true",
                   help="scale: the shim and agent on CPU 0, the load generator and mm-delay on the other CPUs "
                        "(the testbed's packet processing runs in softirqs on the CPU of the sending process)")
    p.add_argument("--floor", action="store_true",
                   help=f"scale: the same load under {FLOOR_CC} (a BPF Reno on ccswitch's hook, nothing more) "
                        "instead of ccswitch, for what this machine charges any program there per ACK")
    p.add_argument("--datapath", default="kernel", choices=["kernel", "ovs"],
                   help="scale: the kernel datapath, or the ovs bridge port in front of a stock-Cubic server")
    p.add_argument("--agent-transport", metavar="T[,T...]",
                   help="scale: how the kernel shim reaches the agent, socket or in-process (the agent in the "
                        "shim's process); several, comma-separated (socket,in-process), run one after the "
                        "other in that order, each a whole run, with --json one line each (default: as any run, "
                        "$CCSWITCH_AGENT_TRANSPORT, else in-process)")
    p.add_argument("--realtime-priority", type=int, metavar="N",
                   help="run the shims under SCHED_FIFO at priority N, 1-99, or 0 for the normal scheduler "
                        "(the same as $CCSWITCH_SHIM_REALTIME_PRIORITY for any run; default: 10)")
    p.add_argument("--baseline", metavar="REV",
                   help="overhead, authoring, both: compare REV (built in a worktree /tmp/ccswitch-baseline-<sha7>, "
                        "kept for later) with this tree, whole runs of each alternated, medians")
    p.add_argument("--compare-rounds", type=int, default=3, help="--baseline: runs of each build per benchmark")
    p.add_argument("--lock", metavar="FILE", help="--baseline: hold an exclusive flock on FILE during each run")
    p.add_argument("--build-jobs", type=int, default=1, help="--baseline: cargo -j for building REV (niced)")
    p.set_defaults(func=_cli_bench, parser=p)


def _measured(run):
    """(result, None) from a benchmark on the machine, or (None, exit status) when it failed or
    was interrupted (everything torn down either way)."""
    try:
        return run(), None
    except Interrupted as e:
        log(f"interrupted by {e}; everything torn down")
        return None, 128 + e.signum
    except (RunError, TopologyError, subprocess.CalledProcessError) as e:
        log(f"error: {e}")
        return None, 1


def _cli_bench(args) -> int:
    if args.realtime_priority is not None:
        if not 0 <= args.realtime_priority <= 99:
            args.parser.error("--realtime-priority: from 1 to 99, or 0 for the normal scheduler")
        os.environ["CCSWITCH_SHIM_REALTIME_PRIORITY"] = str(args.realtime_priority)
    if args.baseline:
        from . import bench_compare
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        return bench_compare.cli(args, os.path.join("results", f"bench-compare-{stamp}"))
    if args.which == "both":
        args.parser.error("both: only with --baseline (`make bench` runs overhead, then authoring)")
    if args.which == "scale":
        from . import scale as _scale

        from ..topology.daemons import AGENT_TRANSPORTS

        transports = args.agent_transport.split(",") if args.agent_transport else [None]
        if any(t not in AGENT_TRANSPORTS for t in transports if t is not None):
            args.parser.error(f"--agent-transport: each one of {', '.join(AGENT_TRANSPORTS)}")
        base = args.out or default_out_dir(_scale.scenario(args.algorithm, args.delay_ms, args.datapath))
        for i, transport in enumerate(transports):
            out = base if len(transports) == 1 else os.path.join(base, f"{i + 1}-{transport}")
            x, status = _measured(lambda: _scale.scale(args.flows, args.seconds, args.rate_kbps, args.delay_ms, out,
                                                       datapath=args.datapath, algorithm=args.algorithm,
                                                       agent_transport=transport, loss_pct=args.loss_pct,
                                                       own_cpu=args.own_cpu, delay_queue_packets=args.delay_queue_packets,
                                                       floor=args.floor))
            if status is not None:
                return status
            _scale.print_scale(x)
            if args.json:
                print(json.dumps(x), flush=True)
        return 0
    if args.which == "authoring":
        if args.reports < 1 or args.rounds < 1:
            args.parser.error("--reports and --rounds: must be >= 1")
        try:
            x = authoring(args.rust, args.python, args.reports, args.rounds, args.full_rust or None, args.full_python)
        except RunError as e:
            log(f"error: {e}")
            return 1
        print_authoring(x)
        if args.json:
            print(json.dumps(x))
        same = x["same_final_window"] and x.get("full_api", {}).get("same_final_window", True)
        return 0 if same else 3
    try:
        sc = load_scenario(args.scenario) if args.scenario else loads_scenario(DEFAULT_SCENARIO)
        if args.repetitions is not None:
            if args.repetitions < 1:
                raise ScenarioError("--repetitions: must be >= 1")
            sc.repetitions = args.repetitions
    except ScenarioError as e:
        args.parser.error(str(e))
    results, status = _measured(lambda: overhead(sc, args.out or default_out_dir(sc)))
    if status is not None:
        return status
    print_table(results)
    if args.json:
        print(json.dumps({"rows": results}))
    return 0 if all(x["integrity_failures"] == 0 for x in results) else 3
