"""Runs and sweeps on a Dask distributed cluster (`--cluster ADDRESS`, `--local-workers N`).

Every unit of work is one Dask task: one transfer of a scenario (scheme x client x file size x
repetition, `units.unit_key`) or one sweep cell. The task runs on a worker that offers a
network-lab slot (the worker resource `lab`, default one per two cores: `ccswitch worker`),
so a host never runs more emulated paths at once than its CPU emulates faithfully. On the
worker the task starts the project's own runner in a child process (`python -m
ccswitch.experiments.distributed UNIT_DIR`): a process of its own gives the run its own
namespace, bridge, veth and congestion-control names (all tagged with its PID), its own
address block (`namespaces.pick_subnet` under a host-wide lock), and the signal handling that
tears all of it down. The child watches its parent: when the worker dies it tears down and
exits, and the scheduler gives the task to another worker.

The child's run directory comes back to the client as a compressed archive with the rows.
The client writes each unit's rows to `transfers.jsonl` as they arrive, unpacks the rest under
`units/<unit key>/` (flow slices and ovs shim stats go to `flows/` and `ovs/` as in an
in-process run) and writes the summary at the end, exactly as the in-process runner does. A
rerun into the same directory (or of the same sweep) skips every finished unit.

Tasks are submitted with priorities in the scenario's alternated order (A B C D, B C D A, ...),
so each host takes its units in that order and the schemes stay interleaved in time on every
host. Paths inside the repository (traces, policy files, the scenario) are sent relative to it
and found in the worker's own checkout; other paths must exist at the same place on every
worker (e.g. /usr/share/mahimahi/traces).
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from . import results
from .scenario import Client, Scenario, Scheme

#: The Dask worker resource a unit needs one of: a network lab (namespaces, mahimahi, nginx).
LAB = "lab"
#: Row fields that name a file of the run directory.
ROW_FILE_FIELDS = ("events", "ovs_stats", "ovs_log", "probe", "throughput_bins", "link_log", "schedule_stats")
#: Sub-directories of a unit's run directory that join the run's own (names unique per transfer;
#: a workload's request file, named in the row's `workload`, is in `workload/`).
MERGED_DIRS = ("flows", "ovs", "probe", "workload", "link-logs", "schedule")
#: Logs of a unit's run directory whose records are appended to the run's own.
MERGED_LOGS = ("handovers.jsonl",)
#: How long the client waits for a worker that offers a lab.
WORKER_WAIT_S = 60.0
#: Tries of a unit whose task failed (a harness error on its worker) before it is left for a rerun.
UNIT_RETRIES = 2


class ClusterError(RuntimeError):
    """The cluster cannot run the units (unreachable, no worker offers a lab, ...)."""


class UnitFailed(RuntimeError):
    """A unit's runner could not run it on its worker (set-up failed, interrupted)."""


def default_slots(cores: Optional[int] = None) -> int:
    """Labs a host runs at once by default: one per two cores (mahimahi's forwarders, the
    agent and the datapath each want a core to themselves while a transfer runs)."""
    return max(1, (cores or os.cpu_count() or 1) // 2)


# ----------------------------------------------------------------------- on the worker


def rebase_path(path: Optional[str], old_root: str, new_root: str) -> Optional[str]:
    if path is None or old_root == new_root:
        return path
    prefix = old_root.rstrip(os.sep) + os.sep
    return os.path.join(new_root, path[len(prefix):]) if path.startswith(prefix) else path


def rebase_scenario(sc: Scenario, old_root: str, new_root: str) -> Scenario:
    """The scenario with every path inside the client's checkout moved to the worker's."""
    if old_root == new_root:
        return sc

    def client(c: Client) -> Client:
        link = replace(c.link, uplink_trace=rebase_path(c.link.uplink_trace, old_root, new_root),
                       downlink_trace=rebase_path(c.link.downlink_trace, old_root, new_root))
        return replace(c, link=link)

    def scheme(s: Scheme) -> Scheme:
        return replace(s, policy=rebase_path(s.policy, old_root, new_root))

    return replace(sc, clients=[client(c) for c in sc.clients], schemes=[scheme(s) for s in sc.schemes],
                   source=rebase_path(sc.source, old_root, new_root))


def _archive(directory: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(directory, arcname=".")
    return buf.getvalue()


def run_units(payload: Dict[str, Any]) -> Dict[str, Any]:
    """The Dask task: run the payload's units with the runner in a child process on this
    host and return their rows and run directory. Raises UnitFailed when the runner could not
    run them (the scheduler then retries elsewhere)."""
    from .environment import repo_root

    sc = rebase_scenario(payload["scenario"], payload["repo"], repo_root())
    work = tempfile.mkdtemp(prefix="ccswitch-unit-")
    host = socket.gethostname()
    try:
        with open(os.path.join(work, "unit.pickle"), "wb") as f:
            pickle.dump({"scenario": sc, "schedule": payload["schedule"], "numbers": payload["numbers"],
                         "checked": payload["checked"]}, f)
        log_path = os.path.join(work, "unit.log")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        with open(log_path, "wb") as log_f:
            proc = subprocess.Popen([sys.executable, "-m", "ccswitch.experiments.distributed", work],
                                    stdin=subprocess.DEVNULL, stdout=log_f, stderr=subprocess.STDOUT,
                                    env=env, start_new_session=True)
            rc = proc.wait()
        with open(log_path, "rb") as f:
            log_text = f.read().decode("utf-8", "replace")
        out = os.path.join(work, "out")
        rows_path = os.path.join(out, "transfers.jsonl")
        rows = results.read_jsonl(rows_path) if os.path.exists(rows_path) else []
        if rc not in (0, 3) or len(rows) != len(payload["schedule"]):
            tail = " | ".join(line for line in log_text.splitlines()[-6:] if line.strip())
            raise UnitFailed(f"runner on {host} exited {rc} with {len(rows)} of {len(payload['schedule'])} "
                             f"row(s): {tail[-800:]}")
        with open(os.path.join(out, "unit.log"), "w", encoding="utf-8") as f:
            f.write(log_text)
        return {"rows": rows, "archive": _archive(out), "host": host}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _watch_parent() -> int:
    """SIGTERM this process (whose handler tears the topology down) once its parent, the
    worker, is gone. Returns the parent's PID."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="watch-worker").start()
    return parent


def _unit_main(work: str) -> int:
    from ..topology.namespaces import TopologyError, log
    from .errors import Interrupted, RunError
    from .runner import Runner

    with open(os.path.join(work, "unit.pickle"), "rb") as f:
        doc = pickle.load(f)
    parent = _watch_parent()
    runner = Runner(doc["scenario"], os.path.join(work, "out"), schedule=doc["schedule"], numbers=doc["numbers"],
                    write_results=False, schemes_checked=doc["checked"])
    try:
        runner.run()
    except Interrupted as e:
        log(f"unit interrupted by {e}; torn down")
        _remove_if_orphaned(work, parent)
        return 128 + e.signum
    except (RunError, TopologyError) as e:
        log(f"error: {e}")
        _remove_if_orphaned(work, parent)
        return 1
    # The worker can die after the last transfer, before this returns: its unit runs again
    # elsewhere, and this one's results go unread too.
    _remove_if_orphaned(work, parent)
    return 0


def _remove_if_orphaned(work: str, parent: int) -> None:
    """Remove the work directory if the worker that made it is gone: nobody reads it."""
    if os.getppid() != parent:
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------- on the client


@contextlib.contextmanager
def cluster_client(address: Optional[str], local_workers: Optional[int], *, slots_per_worker: Optional[int] = None,
                   log: Callable[[str], None]) -> Iterator[Any]:
    """A Dask client: of the scheduler at `address`, or of a local cluster of
    `local_workers` worker processes with `slots_per_worker` labs each (default: the host's
    labs, one per two cores, shared out, at least one each). Waits for a worker offering a lab."""
    import dask
    from distributed import Client, LocalCluster

    cluster = None
    if local_workers is not None:
        cores = os.cpu_count() or 1
        slots = slots_per_worker or max(1, default_slots(cores) // local_workers)
        if slots * local_workers > default_slots(cores):
            log(f"note: {local_workers} worker(s) x {slots} lab(s) on {cores} cores exceed one lab per two cores; "
                "concurrent transfers share the CPU and their figures may suffer")
        # Every Dask server, the scheduler too, keeps a scratch directory (by default
        # dask-scratch-space in /tmp, left behind): this cluster's is its own, removed with it.
        scratch = tempfile.mkdtemp(prefix="ccswitch-dask-")
        with dask.config.set({"temporary-directory": scratch}):
            cluster = LocalCluster(n_workers=local_workers, threads_per_worker=slots, processes=True,
                                   resources={LAB: slots}, dashboard_address=None, silence_logs=40,
                                   local_directory=scratch)
        address = cluster.scheduler_address
        log(f"local Dask cluster at {address}: {local_workers} worker(s), {slots} lab(s) each")
    try:
        try:
            client = Client(address, timeout=30)
        except OSError as e:
            raise ClusterError(f"cannot reach the Dask scheduler at {address}: {e}") from None
        try:
            labs = wait_for_labs(client)
            log(f"cluster {address}: {labs} lab(s) on {len(client.scheduler_info()['workers'])} worker(s)")
            yield client
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()
            shutil.rmtree(scratch, ignore_errors=True)


def wait_for_labs(client, timeout_s: float = WORKER_WAIT_S) -> int:
    """The labs the cluster's workers offer, once at least one does."""
    deadline = time.monotonic() + timeout_s
    while True:
        workers = client.scheduler_info()["workers"]
        labs = sum(int(w.get("resources", {}).get(LAB, 0)) for w in workers.values())
        if labs:
            return labs
        if time.monotonic() >= deadline:
            raise ClusterError(f"no worker of the cluster offers the {LAB!r} resource after {timeout_s:g} s "
                               f"({len(workers)} worker(s)); start workers with `ccswitch worker SCHEDULER` or "
                               f"`dask worker SCHEDULER --nthreads N --resources {LAB}=N`")
        time.sleep(0.5)


def submit(client, items: Sequence[Tuple[Scenario, str, int, tuple]], *, checked: bool, tag: str) -> Dict[Any, int]:
    """One task per unit: items are (scenario, unit key, transfer number, (rep, client,
    scheme, size)), prioritised in the order given. Returns future -> index into `items`."""
    from .environment import repo_root

    futures = {}
    n = len(items)
    for i, (scenario, key, number, unit) in enumerate(items):
        payload = {"scenario": scenario, "repo": repo_root(), "schedule": [unit], "numbers": [number],
                   "checked": checked}
        fut = client.submit(run_units, payload, key=f"ccswitch-{tag}-{key}", resources={LAB: 1},
                            priority=n - i, retries=UNIT_RETRIES, pure=False)
        futures[fut] = i
    return futures


def completed(futures: Dict[Any, int]) -> Iterator[Tuple[int, Optional[dict], Optional[BaseException]]]:
    """(index, result, exception) as each task ends. When the caller stops early (an
    interrupt), the tasks not ended yet are cancelled."""
    from distributed import as_completed

    try:
        for fut in as_completed(list(futures)):
            try:
                yield futures[fut], fut.result(), None
            except Exception as e:  # the task's own failure or a KilledWorker: the unit stays to run
                yield futures[fut], None, e
    finally:
        for fut in futures:
            fut.cancel()


def unpack_unit(out_dir: str, key: str, res: dict) -> List[dict]:
    """Unpack a unit's run directory under `out_dir/units/<key>/` (`<key>.2/`, ... when an
    earlier attempt of the unit is there: it stays), move its flow slices and ovs stats into
    `out_dir`'s own `flows/` and `ovs/`, append its handovers to `out_dir`'s, and return its rows with their file fields relative
    to `out_dir`."""
    units = os.path.join(out_dir, "units")
    os.makedirs(units, exist_ok=True)
    partial = tempfile.mkdtemp(prefix=f".{key}.partial-", dir=units)
    with tarfile.open(fileobj=io.BytesIO(res["archive"]), mode="r:gz") as tar:
        tar.extractall(partial, filter="data")
    unit_dir, attempt = os.path.join(units, key), 1
    while os.path.exists(unit_dir):
        attempt += 1
        unit_dir = os.path.join(units, f"{key}.{attempt}")
    os.rename(partial, unit_dir)
    for d in MERGED_DIRS:
        src = os.path.join(unit_dir, d)
        if os.path.isdir(src):
            os.makedirs(os.path.join(out_dir, d), exist_ok=True)
            for name in os.listdir(src):
                os.replace(os.path.join(src, name), os.path.join(out_dir, d, name))
            os.rmdir(src)
    for name in MERGED_LOGS:
        src = os.path.join(unit_dir, name)
        if os.path.exists(src):
            with open(src, encoding="utf-8") as f, open(os.path.join(out_dir, name), "a", encoding="utf-8") as dst:
                dst.write(f.read())
    rows = []
    rel_unit = os.path.relpath(unit_dir, out_dir)
    for r in res["rows"]:
        r = dict(r)
        for f in ROW_FILE_FIELDS:
            v = r.get(f)
            if isinstance(v, str) and v.split("/", 1)[0] not in MERGED_DIRS:
                r[f] = os.path.join(rel_unit, v)
        rows.append(r)
    return rows


def run_scenario(sc: Scenario, out_dir: str, client, *, checked: bool, log: Callable[[str], None],
                 analysis=None):
    """Run the scenario's unfinished units on the cluster; returns the runner whose summary
    was written (its `rows`, `table`, `wall_s`; with `analysis`, a run_summary.RunAnalysis), as the
    in-process `Runner.run` does. Raises
    errors.RunError when some unit could not be run (what ran is summarised first)."""
    from .errors import RunError
    from .progress import progress_line
    from .runner import Runner
    from .units import resume, unit_key

    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    started = time.monotonic()
    plan = resume(sc, out_dir, log)
    if sc.source:
        shutil.copyfile(sc.source, os.path.join(out_dir, "scenario.toml"))
    total = len(plan.units)
    rows = list(plan.kept)
    jsonl = results.JsonlLog(os.path.join(out_dir, "transfers.jsonl"), rows)
    items = [(sc, unit_key(sc, *u), n, u) for n, u in plan.todo]
    futures = submit(client, items, checked=checked, tag=f"{sc.name}-{os.getpid()}-{int(time.time())}")
    failed: List[str] = []
    try:
        for i, res, exc in completed(futures):
            _, key, number, unit = items[i]
            rep, cl, sch, size = unit
            if exc is not None:
                failed.append(f"{cl.name} {sch.label} rep {rep + 1}: {exc}")
                log(f"[{number}/{total}] {cl.name} {sch.label} rep {rep + 1}: NOT RUN ({exc}); a rerun into "
                    f"{out_dir} runs it")
                continue
            for r in unpack_unit(out_dir, key, res):
                rows.append(r)
                jsonl.append(r)
                log(progress_line(number, total, cl, r, out_dir) + f" [{res['host']}]")
    finally:
        jsonl.close()
    runner = Runner(sc, out_dir, schemes_checked=True, analysis=analysis)
    runner.rows = sorted(rows, key=lambda r: r["transfer"])
    runner.wall_s = time.monotonic() - started
    runner.write_summary()
    if failed:
        raise RunError(f"{len(failed)} transfer(s) could not be run on the cluster (first: {failed[0]}); "
                       f"rerun with --out {out_dir} to run them")
    return runner


# ----------------------------------------------------------------------- CLI


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "worker", help="serve a Dask scheduler as a worker offering network labs (needs root, as `ccswitch run`)",
        description="Start `dask worker SCHEDULER` with one thread per lab and the worker resource "
                    f"{LAB}=K, so that `ccswitch run|sweep --cluster SCHEDULER` runs up to K transfers at "
                    "once on this host. Start it from a checkout of the same commit as the client's, built.")
    p.add_argument("scheduler", help="the scheduler's address, e.g. tcp://10.0.0.1:8786")
    p.add_argument("--labs", type=int, help=f"concurrent transfers on this host (default one per two cores: "
                                            f"{default_slots()} here)")
    p.add_argument("--name", help="the worker's name (default: Dask's)")
    p.set_defaults(func=_cli_worker, parser=p)


def worker_command(scheduler: str, labs: int, name: Optional[str] = None) -> List[str]:
    dask = os.path.join(os.path.dirname(sys.executable), "dask")
    cmd = [dask if os.access(dask, os.X_OK) else "dask", "worker", scheduler, "--nworkers", "1",
           "--nthreads", str(labs), "--resources", f"{LAB}={labs}"]
    return cmd + (["--name", name] if name else [])


def _cli_worker(args) -> int:
    labs = args.labs if args.labs is not None else default_slots()
    if labs < 1:
        args.parser.error("--labs: must be >= 1")
    if os.geteuid() != 0:
        print("ccswitch worker: error: must run as root (its units create network namespaces)", file=sys.stderr)
        return 1
    cmd = worker_command(args.scheduler, labs, args.name)
    print(f"ccswitch worker: {' '.join(cmd)}", file=sys.stderr, flush=True)
    os.execvp(cmd[0], cmd)


if __name__ == "__main__":
    sys.exit(_unit_main(sys.argv[1]))
