"""`ccswitch run`: execute a scenario and write its results.

For each repetition, for each client (in file order), every scheme runs once per file size;
the scheme order rotates by one per repetition so that schemes are interleaved in time
(A B C D, B C D A, ...). Each transfer is one curl download from nginx in the server
namespace, made from inside a fresh mahimahi shell stack run as user `mmuser`:

    runuser -u mmuser -- [mm-delay D] [mm-loss uplink R] [mm-loss downlink R]
        mm-link UP DOWN [--uplink-queue=droptail --uplink-queue-args=packets=N ...] -- curl ...

The TCT is curl's time_total (connection set-up included, mahimahi's own start-up not). The
downloaded file is hashed and compared with the served file, then deleted.

With a bridge (scenario key `bridge`, automatic for `ovs:` schemes) every scheme's traffic
crosses the same bridge in a bridge namespace (topology/bridges.py); an `ovs:` transfer additionally
runs `ccswitch-ovs` on the bridge's server-facing port for its duration and leaves the
shim's stats file in `ovs/` of the results.

Schemes that use the agent (`kernel:`, `ovs:`, their `policy:` forms) run it with
`--events events/agent-NNN.jsonl`; after each of their transfers the flow's events are found
and attached to the row (events.py EventCollector: `algorithms`, `handover_events`, `events`).
At the end the summary is written (run_summary.py), with what the command adds through its
`analysis` (`ccswitch run`: the handover analysis and flow plots of scenarios with `analysis` /
`plots = ["flows"]`, the trade-off plots; analysis/after_run.py).

This module is the orchestration; beside it: environment.py (what the machine must offer),
tools.py (mahimahi's command line, curl's and ss's output), units.py (unit keys, the plan of a
resumed run), progress.py (the per-transfer line), errors.py; the command line is
commands/run.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from . import traces as _traces, traffic as _traffic
from . import measurements as _measure, results, statistics as stats
from ..topology import bridges as _ovs
from ..topology import schedule as _schedule
from ..topology.probe import PROBE_BIN, PacketProbe
from .environment import MM_USER, bin_dir, check_environment, check_agent_schemes, scenario_python_path
from .errors import Interrupted, RunError
from .events import EventCollector
from .progress import progress_line
from .run_summary import RunAnalysis, client_paths, labelled_rows, utcnow, write_run_summary
from .scenario import Client, Scenario, Scheme
from .tools import mahimahi_command, parse_ss_cc, parse_ss_peer, transfer_error
from .units import Unit, default_out_dir, resume, unit_key
from ..topology.namespaces import SERVER_PORT, AgentError, Processes, ServerNamespace, SysctlGuard, Teardown, TopologyError, log, read_sysctl
from ..topology.daemons import CcswitchDaemons, Nginx

#: Extra wall time allowed beyond curl's --max-time for mahimahi to start and stop.
MM_OVERHEAD_S = 30.0
#: A transfer running longer than this prints a progress line (bytes so far) this often.
PROGRESS_EVERY_S = 15.0
#: The client driver (run by the system's python3 as MM_USER inside the mahimahi shells).
DRIVER_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "client_driver.py")
DRIVER_PYTHON = "/usr/bin/python3"
#: How long the driver may take to start inside mahimahi and say it is ready.
DRIVER_READY_TIMEOUT_S = 30.0


class _DriverGone(Exception):
    """The mahimahi shells exited before the client driver said it was ready."""


# ----------------------------------------------------------------------- transfers


class CcObserver(threading.Thread):
    """Polls `ss -tin` in the server namespace during a transfer to record which congestion
    control the server's socket really used (proves the sysctl / BPF CC took effect) and the
    client's address as the server sees it (to find the transfer's flow in the agent's events)."""

    def __init__(self, ns: ServerNamespace) -> None:
        super().__init__(daemon=True)
        self.ns = ns
        self.cc: Optional[str] = None
        self.peer: Optional[str] = None
        self._done = threading.Event()

    def run(self) -> None:
        cmd = self.ns.exec_cmd(["ss", "-Htin", "state", "established", f"( sport = :{SERVER_PORT} )"])
        while not self._done.is_set() and (self.cc is None or self.peer is None):
            try:
                cp = subprocess.run(cmd, capture_output=True, text=True, timeout=5)
                self.cc = self.cc or parse_ss_cc(cp.stdout)
                if self.cc is not None:
                    # the peer of the socket whose info line was read
                    self.peer = self.peer or parse_ss_peer(cp.stdout)
            except Exception:
                pass
            self._done.wait(0.05)

    def finish(self) -> Optional[str]:
        self._done.set()
        self.join(timeout=6)
        return self.cc


@dataclass
class ServedFile:
    size: int
    path: str
    url_path: str
    sha256: str


def make_served_files(www: str, sizes, seed_bytes: int = 1 << 20) -> Dict[int, ServedFile]:
    """One file of random bytes per distinct size, with its SHA-256."""
    import hashlib

    files = {}
    for size in sorted(set(sizes)):
        name = f"f-{size}.bin"
        path = os.path.join(www, name)
        h = hashlib.sha256()
        with open(path, "wb") as f:
            left = size
            while left:
                chunk = os.urandom(min(left, seed_bytes))
                f.write(chunk)
                h.update(chunk)
                left -= len(chunk)
        os.chmod(path, 0o644)
        files[size] = ServedFile(size, path, "/" + name, h.hexdigest())
    return files




# ----------------------------------------------------------------------- the run


@contextlib.contextmanager
def torn_down_on_exit(teardown: Teardown, before_teardown: Callable[[], None] = lambda: None):
    """Run the block with SIGINT and SIGTERM turned into `Interrupted`; whatever ends it
    (normal exit, exception, signal), run the teardown to its end. A signal that arrives
    during the teardown is held and raised afterwards, never abandoning it half-way."""
    tearing_down = False
    late_signal: List[int] = []

    def on_signal(signum, frame):
        if tearing_down:
            late_signal.append(signum)
            return
        raise Interrupted(signum)

    old_handlers = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        tearing_down = True
        before_teardown()
        problems = teardown.run()
        for s, h in old_handlers.items():
            signal.signal(s, h)
        if problems:
            log(f"teardown problems: {'; '.join(problems)}")
    if late_signal:
        raise Interrupted(late_signal[0])


class Runner:
    def __init__(self, scenario: Scenario, out_dir: str, *, quiet: bool = False,
                 schemes_checked: bool = False, schedule: Optional[List[tuple]] = None,
                 numbers: Optional[List[int]] = None, write_results: bool = True,
                 on_row: Optional[Callable[[dict], None]] = None, measure: bool = True,
                 link_logs: bool = False, analysis: Optional[RunAnalysis] = None,
                 agent_transport: Optional[str] = None) -> None:
        self.sc = scenario
        #: how the kernel shim reaches the agent (daemons.AGENT_TRANSPORTS); None: the default
        self.agent_transport = agent_transport
        #: what the command adds to the summary (run_summary.RunAnalysis); None: the run's own
        #: summary only
        self.analysis = analysis
        #: keep mm-link's downlink log of every transfer in link-logs/ (a cross-check of the probe)
        self.link_logs = link_logs
        #: run the packet probe on every transfer (delay, drops, TCP_INFO, throughput over time)
        self.measure = measure
        self._numbered = 0
        #: the transfers to run, (repetition, client, scheme, file_bytes) in order; None = the
        #: scenario's own schedule (`Scenario.transfers`), less what an earlier invocation into
        #: `out_dir` finished (`plan_run`). A sweep passes the cells it still needs, a worker of
        #: a distributed run its unit.
        self.schedule = schedule
        #: the transfer numbers of `schedule`'s entries (default 1, 2, ...)
        self.numbers = numbers
        #: False: leave the summary, Parquet and plots to the caller (a distributed unit)
        self.write_results = write_results
        #: called with each finished row, after it is appended to transfers.jsonl (a sweep
        #: stores its cell there)
        self.on_row = on_row
        #: the agent already accepted every agent scheme (check_agent_schemes)
        self.schemes_checked = schemes_checked
        #: scheme label -> why its agent failed; its later transfers are not run
        self.failed_schemes: Dict[str, str] = {}
        self.remaining: list = []
        self.out_dir = os.path.abspath(out_dir)
        self.log_dir = os.path.join(self.out_dir, "logs")
        self.quiet = quiet
        self.rows: List[dict] = []
        self.teardown = Teardown()
        self.current: Optional[subprocess.Popen] = None
        #: the file the transfer under way downloads to (tests watch it grow)
        self.current_download: Optional[str] = None
        #: (wall-clock start, end, agent events file) of the last transfer, for its flow's events
        self.last_transfer: Optional[tuple] = None
        self.collector: Optional[EventCollector] = None

    # -- setup -----------------------------------------------------------------
    def setup(self) -> None:
        sc = self.sc
        self.bin_dir = check_environment(sc, self.measure)
        os.makedirs(self.log_dir, exist_ok=True)
        if sc.source:
            shutil.copyfile(sc.source, os.path.join(self.out_dir, "scenario.toml"))
        self.procs = Processes(self.teardown)
        self.sysctls = SysctlGuard(self.teardown)
        # work dir: served files, traces, downloads, sockets, nginx state (removed at the end)
        self.work = tempfile.mkdtemp(prefix="ccswitch-run-")
        self.teardown.push(f"remove {self.work}", lambda: shutil.rmtree(self.work, ignore_errors=True))
        os.chmod(self.work, 0o755)  # mmuser must reach the traces
        www = os.path.join(self.work, "www")
        os.makedirs(www)
        self.downloads = os.path.join(self.work, "dl")
        os.makedirs(self.downloads)
        pw = pwd.getpwnam(MM_USER)
        os.chown(self.downloads, pw.pw_uid, pw.pw_gid)
        os.chmod(self.downloads, 0o700)
        self.files = make_served_files(www, [s for c in sc.clients for s in _traffic.served_sizes(c)])
        workload_bytes = max((c.workload.max_bytes for c in sc.clients if c.workload is not None), default=0)
        if workload_bytes:
            served = make_served_files(www, [workload_bytes])[workload_bytes]
            os.rename(served.path, os.path.join(www, _traffic.WORKLOAD_FILE))
            self.workload_hashes = _traffic.PrefixHashes(os.path.join(www, _traffic.WORKLOAD_FILE))
        self.driver = os.path.join(self.work, "client_driver.py")
        shutil.copyfile(DRIVER_SOURCE, self.driver)
        os.chmod(self.driver, 0o644)
        self.traces = self._make_traces()
        # mahimahi requires forwarding; the server is reached through the root namespace
        if read_sysctl("net.ipv4.ip_forward") != "1":
            self.sysctls.set("net.ipv4.ip_forward", "1")
        for s in sc.schemes:
            if s.kind in ("native", "ovs"):
                self.sysctls.allow_congestion_control(sc.server_cc(s))
        self.ns = ServerNamespace(self.teardown)
        self.fabric: Optional[_ovs.BridgeFabric] = None
        if sc.bridge_kind != "none":
            self.fabric = _ovs.BridgeFabric(sc.bridge_kind, self.teardown, self.procs, self.sysctls,
                                               self.work, self.log_dir)
            self.fabric.create_namespace()
            self.ns.create(outer_netns=self.fabric.ns_name, gateway_dev=self.fabric.gateway)
            self.fabric.connect(self.ns)
        else:
            self.ns.create()
        self.nginx = Nginx(self.ns, self.procs, self.work, www, self.log_dir)
        self.teardown.push("stop nginx", self.nginx.stop)
        self.nginx.start()
        self._start_competitor_servers(www)
        self.server_ips = [self.ns.server_ip] + [ns.server_ip for ns, _ in self.competitor_servers.values()]
        self.probe_senders = [(self.ns.name, self.ns.veth_srv)] + [(ns.name, ns.veth_srv)
                                                                   for ns, _ in self.competitor_servers.values()]
        if self.measure:
            self.probe = PacketProbe(self.procs, bin_dir(), self.log_dir)
            self.teardown.push(f"stop {PROBE_BIN}", self.probe.stop)
        self.daemons = None
        self.ovs_shim: Optional[_ovs.OvsShimProcess] = None
        if sc.uses_agent:
            self.daemons = CcswitchDaemons(self.procs, self.sysctls, self.bin_dir, self.work, self.log_dir,
                                           settle_s=sc.agent_settle_s, python_path=scenario_python_path(sc),
                                           events_dir=os.path.join(self.out_dir, "events"),
                                           destination_memory=sc.destination_memory,
                                           agent_transport=self.agent_transport)
            self.teardown.push("stop ccswitch agent and shim", self.daemons.stop)
            self.collector = EventCollector(self.out_dir)
            self.teardown.push("close handovers.jsonl", self.collector.close)
        if sc.uses_ovs:
            if os.path.exists("/proc/sys/kernel/bpf_stats_enabled"):
                # run time of the port programs, for the overhead figures
                self.sysctls.set("kernel.bpf_stats_enabled", "1")
            self.ovs_shim = _ovs.OvsShimProcess(self.procs, self.fabric, self.daemons, self.bin_dir,
                                                  self.out_dir, self.log_dir)
            self.teardown.push(f"stop {_ovs.OVS_BIN}", self.ovs_shim.stop)
        self.teardown.push("stop current transfer", self._stop_current)
        #: (congestion control, shims started) last set in the server namespace
        self.current_cc: Optional[Tuple[str, int]] = None
        self._say(f"server netns {self.ns.name} at {self.ns.server_ip}:{SERVER_PORT} (nginx pid "
                  f"{self.nginx.master_pid()}), work dir {self.work}, results in {self.out_dir}")
        if self.fabric is not None:
            self._say(self.fabric.describe())

    def _start_competitor_servers(self, www: str) -> None:
        """A server namespace with its own nginx for each native algorithm that competing flows
        run (a namespace's default congestion control is what its connections get). They are
        reached straight from the root namespace, never through the bridge of `ovs:` schemes,
        so the ovs shim acts only on the flows of the scheme under test."""
        self.competitor_servers: Dict[str, tuple] = {}
        for k, cc in enumerate(_traffic.competitor_ccs(self.sc.clients)):
            ns = ServerNamespace(self.teardown, tag=f"{os.getpid()}c{k}")
            ns.create()
            self.sysctls.allow_congestion_control(cc)
            ns.set_congestion_control(cc)
            work = os.path.join(self.work, f"competitor-{cc}")
            logs = os.path.join(self.log_dir, f"competitor-{cc}")
            os.makedirs(work)
            os.makedirs(logs, exist_ok=True)
            nginx = Nginx(ns, self.procs, work, www, logs)
            self.teardown.push(f"stop the nginx of {cc} competitors", nginx.stop)
            nginx.start()
            self.competitor_servers[cc] = (ns, nginx)

    def _make_traces(self) -> Dict[str, tuple]:
        tdir = os.path.join(self.work, "traces")
        os.makedirs(tdir)
        out = {}
        for c in self.sc.clients:
            if c.link.is_constant:
                paths = []
                for d, mbps in (("up", c.link.uplink_mbps), ("down", c.link.downlink_mbps)):
                    p = os.path.join(tdir, f"{mbps:g}mbps.trace")
                    if not os.path.exists(p):
                        stamps, _ = _traces.constant_trace(repr(mbps), 1000)
                        _traces.write_trace(p, stamps)
                    paths.append(p)
                out[c.name] = tuple(paths)
            else:
                for p in (c.link.uplink_trace, c.link.downlink_trace):
                    if not os.path.isfile(p):
                        raise RunError(f"client {c.name}: trace file not found: {p}")
                out[c.name] = (c.link.uplink_trace, c.link.downlink_trace)
        return out

    def _say(self, msg: str) -> None:
        if not self.quiet:
            log(msg)

    # -- one transfer ------------------------------------------------------------
    def _stop_current(self) -> None:
        if self.current is not None:
            self.procs.stop(self.current, grace_s=5.0)
            self.current = None

    def kernel_cc(self, scheme: Scheme) -> str:
        """Congestion control to set in the server namespace for a scheme."""
        if scheme.kind == "kernel" and self.daemons is not None:
            return self.daemons.cc_name
        return self.sc.server_cc(scheme)

    def prepare_scheme(self, scheme: Scheme) -> None:
        if scheme.uses_agent:
            self.daemons.ensure(scheme.algorithm, kernel_shim=scheme.kind == "kernel", policy=scheme.policy)
        # A kernel shim started since (in-process, one per agent) found the namespace's default
        # handed back to the fallback by its predecessor: set it again.
        cc = (self.kernel_cc(scheme), self.daemons.shim_starts if self.daemons is not None else 0)
        if self.current_cc != cc:
            # Again at every switch: another run on this machine that also needed `cc` may have
            # removed it from the (global) allowed list when it finished.
            self.sysctls.allow_congestion_control(cc[0])
            self.ns.set_congestion_control(cc[0])
            self.current_cc = cc

    @staticmethod
    def new_row(rep: int, client: Client, scheme: Scheme, size: int) -> dict:
        """A transfer's row before it runs: what was asked (the path's parameters included)."""
        row = {"client": client.name, "scheme": scheme.label, "repetition": rep + 1, "file_bytes": size,
               # the machine's 1-minute load average as the transfer starts: finds noisy ones later
               "load1": os.getloadavg()[0], "host": socket.gethostname(),
               "tct_s": None, "ttfb_s": None, "connect_s": None, "bytes": None, "http_code": None,
               "sha256_ok": False, "cc_observed": None, "client_addr": None, "started_at": utcnow(), "wall_s": None,
               "error": None, "curl_exit": None}
        row.update(client.path_fields())
        if scheme.uses_agent:
            row.update(algorithms=None, handover_events=None, **{k: None for k, _ in stats.PYTHON_COUNTS})
        return row

    def _communicate(self, what: str, out_file: Optional[str], size: int, t0: float,
                     extra_s: float = 0.0) -> Tuple[str, str]:
        """Wait for the transfer under way; past PROGRESS_EVERY_S, say how far it got every
        PROGRESS_EVERY_S (a slow path is then visibly slow, not silent): the first download's
        bytes, or only the time for a workload (`out_file` None). Raises
        subprocess.TimeoutExpired at timeout_s + MM_OVERHEAD_S."""
        deadline = t0 + self.sc.timeout_s + MM_OVERHEAD_S + extra_s
        while True:
            left = deadline - time.monotonic()
            try:
                return self.current.communicate(timeout=max(0.01, min(left, PROGRESS_EVERY_S)))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline:
                    raise
                if out_file is None:
                    self._say(f"    ... {what}: {time.monotonic() - t0:.0f} s")
                    continue
                try:
                    got = os.path.getsize(out_file)
                except OSError:
                    got = 0
                self._say(f"    ... {what}: {time.monotonic() - t0:.0f} s, {got / 1e6:.1f} of {size / 1e6:.1f} MB")

    def _url(self, server: Optional[str], path: str) -> str:
        """A file on the run's server (None) or on the server of a competitor's algorithm."""
        ns = self.ns if server is None else self.competitor_servers[server][0]
        return f"http://{ns.server_ip}:{SERVER_PORT}{path}"

    def _expected_sha(self, job: "_traffic.Job") -> str:
        return self.workload_hashes(job.size) if job.ranged else self.files[job.size].sha256

    def _wait_driver_ready(self, ready_file: str, t0: float) -> int:
        """The client driver's PID once it is up inside the mahimahi shells; raises
        _DriverGone if the shells exit first (their stderr says why)."""
        while True:
            try:
                with open(ready_file) as f:
                    return int(f.read().strip())
            except (OSError, ValueError):
                pass
            if self.current.poll() is not None:
                raise _DriverGone()
            if time.monotonic() - t0 > DRIVER_READY_TIMEOUT_S:
                raise TopologyError(f"the client driver did not start within {DRIVER_READY_TIMEOUT_S:g} s")
            time.sleep(0.005)

    def transfer(self, rep: int, client: Client, scheme: Scheme, size: int, number: Optional[int] = None) -> dict:
        """One unit: the client's downloads (one flow, competing flows or a web workload) through
        a fresh mahimahi shell stack, measured by the packet probe; returns its row."""
        self._numbered += 1
        number = number if number is not None else self._numbered
        up, down = self.traces[client.name]
        jobs = _traffic.jobs_for_unit(client, scheme, size, rep, self._url)
        row = self.new_row(rep, client, scheme, size)
        if scheme.kind == "ovs":
            row.update(ovs_stats=None, ovs_log=None, ovs_exit=None)
            self.ovs_shim.start(f"{client.name}-{size}-{scheme.algorithm}-rep{rep + 1}")
            row["ovs_log"] = os.path.relpath(self.ovs_shim.log_path, self.out_dir)
        spec = _traffic.driver_spec(jobs, self.downloads, self.sc.timeout_s)
        files = {k: os.path.join(self.downloads, f"driver-{k}") for k in ("spec.json", "ready", "go", "result.json")}
        for path in files.values():
            if os.path.exists(path):
                os.unlink(path)
        spec.update(ready_file=files["ready"], go_file=files["go"], result_file=files["result.json"],
                    go_timeout_s=DRIVER_READY_TIMEOUT_S + 30)
        with open(files["spec.json"], "w") as f:
            json.dump(spec, f)
        os.chmod(files["spec.json"], 0o644)
        link_log = os.path.join(self.downloads, f"link-{number:06d}.log") if self.link_logs else None
        cmd = (["runuser", "-u", MM_USER, "--"] + mahimahi_command(client, up, down, link_log)
               + ["--", DRIVER_PYTHON, self.driver, files["spec.json"]])
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME": self.downloads, "LANG": "C"}
        self.current_download = spec["jobs"][0]["out"]
        prefix = os.path.join(self.out_dir, "probe", f"{number:06d}") if self.measure else None
        observer = CcObserver(self.ns)
        events_path = self.daemons.events_path if scheme.uses_agent and self.daemons is not None else None
        t0 = time.monotonic()
        wall_t0, go_at = time.time(), None
        self.current = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=env, cwd=self.downloads,
                                        start_new_session=True)
        self.procs.track("transfer", self.current)
        observer.start()
        rc, stdout, stderr = None, "", ""
        elements: List[_schedule.ScheduleElement] = []
        primary_segments: Optional[Tuple[int, int]] = None
        try:
            try:
                pid = self._wait_driver_ready(files["ready"], t0)
                if prefix is not None:
                    self.probe.start(prefix, pid, self.probe_senders, self.server_ips, [SERVER_PORT])
                elements = self._start_schedule(client, number, rep)
                wall_t0, go_at = time.time(), time.monotonic()
                open(files["go"], "w").close()
                stdout, stderr = self._communicate(f"{client.name} {scheme.label} rep {rep + 1}",
                                                   None if client.workload else self.current_download,
                                                   jobs[0].size, t0, extra_s=max(j.start_s for j in jobs))
                rc = self.current.returncode
            except _DriverGone:
                stdout, stderr = self.current.communicate()
                rc = self.current.returncode
                row["error"] = transfer_error(rc, stderr)
            except subprocess.TimeoutExpired:
                self._stop_current()
                row["error"] = f"timeout: no result after {self.sc.timeout_s + MM_OVERHEAD_S:g} s"
            except TopologyError as e:
                self._stop_current()
                row["error"] = f"measurement set-up failed: {e}"
            finally:
                row["cc_observed"] = observer.finish()
                row["client_addr"] = observer.peer
                row["wall_s"] = round(time.monotonic() - t0, 4)
                self.last_transfer = (wall_t0, time.time(), events_path)
                probe_status = self.probe.stop() if prefix is not None else None
                if elements:
                    row["schedule_stats"] = self._stop_schedule(elements, number)
            if self.current is not None:
                self.procs.forget(self.current)
                self.current = None
            if row["error"] is None and rc != 0:
                row["error"] = transfer_error(rc, stderr)
            results_ = _traffic.job_results(jobs, _traffic.read_result(files["result.json"]), spec,
                                            self._expected_sha)
            self._fill_row(row, client, results_)
            if "workload_requests" in row:
                self._write_workload(row, client, row.pop("workload_requests"), number)
            if prefix is not None and row["error"] is None:
                if self.probe.files_written():
                    row["probe"] = os.path.relpath(prefix, self.out_dir)
                    primary_segments = self._measure(row, client, scheme, results_, prefix, go_at)
                else:
                    row["probe_error"] = f"{PROBE_BIN} wrote no files (exit status {probe_status}); see logs/probe.log"
            if link_log is not None and os.path.exists(link_log):
                row["link_log"] = os.path.join("link-logs", f"{number:06d}.log")
                os.makedirs(os.path.join(self.out_dir, "link-logs"), exist_ok=True)
                shutil.move(link_log, os.path.join(self.out_dir, row["link_log"]))
            transfer_failed = row["error"] is not None
            if scheme.uses_agent and self.daemons is not None:
                died = self.daemons.agent_died()
                if died is not None:
                    # The datapath fell back to its own algorithm: not the scheme's transfer.
                    row["agent_died"] = died
                    row["error"] = died if row["error"] is None else f"{died}; the transfer: {row['error']}"
            if row["error"] is not None:
                # curl's time_total of a failed transfer (e.g. the timeout) is not a TCT
                for k in ("tct_s", "ttfb_s", "connect_s"):
                    row[k] = None
                if transfer_failed:
                    row["sha256_ok"] = False
                # else only the agent died: the bytes' integrity (checked above) still stands
        finally:
            self.current_download = None
            for job in spec["jobs"]:
                if os.path.exists(job["out"]):
                    os.unlink(job["out"])
            if scheme.kind == "ovs":
                self._stop_ovs_shim(row)
                self._add_ovs_retransmissions(row, primary_segments)
        return row

    def _start_schedule(self, client: Client, number: int, rep: int) -> List["_schedule.ScheduleElement"]:
        """The client's path schedule: one element per server address (competitors' servers
        too: the schedule is the path's), its clock started as the client is let go. Its loss
        draws are seeded by the repetition: every scheme of a repetition meets the same draws
        (per segment: loses the same bytes, `scenario.LOSS_DRAWS`)."""
        if not client.schedule:
            return []
        steps = [dataclasses.asdict(step) for step in client.schedule]
        elements = []
        for k, ip in enumerate(self.server_ips):
            work = os.path.join(self.work, f"schedule-{number:06d}-{k}")
            os.makedirs(work, exist_ok=True)
            element = _schedule.ScheduleElement(self.teardown, self.procs, server_ip=ip, steps=steps, work_dir=work,
                                                seed=rep + 1, loss_draws=client.loss_draws,
                                                binary=os.path.join(bin_dir(), _schedule.BINARY_NAME))
            elements.append(element)
            element.start()
        return elements

    def _stop_schedule(self, elements: List["_schedule.ScheduleElement"], number: int) -> str:
        """Stop the elements; their statistics go to schedule/NNNNNN.json (named in the row)."""
        stats = []
        for element in elements:
            try:
                element.stop()
            except TopologyError as e:
                log(f"warning: path schedule: {e}")
            stats.append({"server_ip": element.server_ip, **(element.stats or {})})
        path = os.path.join(self.out_dir, "schedule", f"{number:06d}.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        results.write_json_atomic(path, stats)
        return os.path.relpath(path, self.out_dir)

    def _fill_row(self, row: dict, client: Client, results_: List[dict]) -> None:
        """The unit's verdict and curl figures from its downloads: a lone or competing flow's
        row carries its first flow of the scheme under test; a workload's, the time until its
        last request finished. Any flow that failed fails the unit (naming it)."""
        if row["error"] is not None:
            return
        if client.workload is not None:
            reqs = _traffic.workload_requests(results_, row["rtt_ms"] / 1000.0, client.link.downlink_mbps_or_none)
            done = [r for r in reqs if r["ok"]]
            row["sha256_ok"] = all(r["sha256_ok"] for r in results_ if r["error"] is None)
            if not done:
                row["error"] = f"no request of the workload completed ({results_[0]['error'] if results_ else 'none sent'})"
                return
            row["tct_s"] = round(max(r["t_s"] + r["fct_s"] for r in done), 4)
            row["bytes"] = sum(r["size"] for r in done)
            row["http_code"] = 206
            row["workload_requests"] = reqs
            return
        primary = next(r for r in results_ if r["role"] == "test")
        for k in ("tct_s", "ttfb_s", "connect_s", "bytes", "http_code", "curl_exit", "client_port"):
            row[k] = primary[k]
        row["sha256_ok"] = all(r["sha256_ok"] for r in results_)
        failed = [r for r in results_ if r["error"] is not None]
        if failed:
            f = failed[0]
            row["curl_exit"] = f["curl_exit"]
            row["error"] = f["error"] if len(results_) == 1 else f"flow {f['flow']} ({f['scheme']}): {f['error']}"
        if client.flows:
            row["flows"] = [{k: r[k] for k in ("flow", "scheme", "role", "start_s", "file_bytes", "tct_s", "bytes",
                                               "sha256_ok", "error", "client_port")} for r in results_]

    def _write_workload(self, row: dict, client: Client, requests: List[dict], number: int) -> None:
        """A workload's requests go to workload/NNNNNN.jsonl; its row gets FCT and slowdown per
        size bucket (experiments/README.md, "Web workloads")."""
        path = os.path.join(self.out_dir, "workload", f"{number:06d}.jsonl")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        results.write_text_atomic(path, "".join(json.dumps(r) + "\n" for r in requests))
        w = client.workload
        row["workload"] = {"kind": w.kind, "load": w.load, "duration_s": w.duration_s, "requests": len(requests),
                           "completed": sum(1 for r in requests if r["ok"]),
                           "failed": sum(1 for r in requests if not r["ok"]),
                           "requests_file": os.path.relpath(path, self.out_dir), **_measure.workload_metrics(requests)}

    def _measure(self, row: dict, client: Client, scheme: Scheme, results_: List[dict], prefix: str,
                 go_at: float) -> Optional[Tuple[int, int]]:
        """The probe's figures of every flow (experiments/README.md, "Metrics"); the row's own
        columns are those of its first flow of the scheme under test. Returns that flow's
        (segments sent, segments received), for the ovs shim's share of them; None if unmatched."""
        probe = _measure.read_probe(prefix)
        if probe.meta.get("ring_dropped"):
            # the delay percentiles still hold; throughput bins and Jain's index undercount
            row["probe_ring_dropped"] = int(probe.meta["ring_dropped"])
        by_port = _measure.match_flows(probe, {r["flow"]: r["client_port"] for r in results_ if r["client_port"]})
        per_flow = {}
        for r in results_:
            fid = by_port.get(r["flow"])
            m = _measure.flow_metrics(probe, fid) if fid is not None else {}
            if r["tct_s"] and r["bytes"]:
                m["throughput_mbps"] = r["bytes"] * 8 / r["tct_s"] / 1e6
            per_flow[r["flow"]] = m
        counted = None
        if client.workload is None:
            first = next(r["flow"] for r in results_ if r["role"] == "test")
            if first in by_port:
                f = probe.flows[by_port[first]]
                counted = (int(f["segments_sent"]), int(f["segments_received"]))
            row.update({k: per_flow[first].get(k) for k in _measure.FLOW_METRICS})
            rate = client.link.downlink_mbps_or_none
            if rate and row.get("throughput_mbps") is not None:
                row["link_utilisation"] = row["throughput_mbps"] / rate
        one_way = client.delay_ms + min((step.delay_ms for step in client.schedule), default=0)
        problems = [f"flow {f}: {p}" for f, m in per_flow.items()
                    for p in _measure.physical_problems(m, link_mbps=client.link.downlink_mbps_or_none,
                                                        one_way_ms=one_way)]
        if problems:
            row["measurement_problems"] = problems
            log(f"warning: measurement fault in transfer {row.get('transfer', '?')}: {'; '.join(problems)}")
        bins = _measure.throughput_bins(probe, int(go_at * 1e9))
        csv_path = prefix + ".throughput.csv"
        flow_of = {fid: f for f, fid in by_port.items()}
        _measure.write_throughput_csv(csv_path, {flow_of[fid]: b for fid, b in bins.items() if fid in flow_of})
        row["throughput_bins"] = os.path.relpath(csv_path, self.out_dir)
        if len(client.schedule) > 1 and client.workload is None:
            first = next(r for r in results_ if r["role"] == "test")
            if first["flow"] in by_port:
                row["phases"] = _measure.phase_metrics(probe, by_port[first["flow"]], int(go_at * 1e9),
                                                       [step.at_s for step in client.schedule])
        if row.get("flows"):
            for f in row["flows"]:
                f.update({k: per_flow[f["flow"]].get(k) for k in _measure.FLOW_METRICS})
            ids = [by_port[f["flow"]] for f in row["flows"] if f["flow"] in by_port]
            if len(ids) == len(row["flows"]):
                row["jain"], row["shared_s"] = _measure.jain_over_shared(probe, ids)
        return counted

    def _add_ovs_retransmissions(self, row: dict, counted: Optional[Tuple[int, int]]) -> None:
        """The ovs shim's own retransmissions count as the flow's: it hides losses from the
        server, whose TCP_INFO never sees them."""
        if not row.get("ovs_stats") or not row.get("probe"):
            return
        doc = _ovs.load_stats(os.path.join(self.out_dir, row["ovs_stats"]))
        if doc is None:
            return
        row["ovs_retrans"] = int(_ovs.transfer_figures(doc)["retransmissions"] or 0)
        row["retrans_segs"] = (row.get("retrans_segs") or 0) + row["ovs_retrans"]
        # The shim's copies leave after the server's veth, where the probe counts what is sent,
        # but arrive at the client like any segment: count them as sent too.
        if counted is not None:
            sent, received = counted
            row["path_drops"] = max(0, sent + row["ovs_retrans"] - received)

    def _stop_ovs_shim(self, row: dict) -> None:
        """Stop the transfer's shim; a shim that died during the transfer fails the row (the
        scheme was not what ran)."""
        shim = self.ovs_shim
        died = not shim.alive()
        status = shim.stop()
        row["ovs_exit"] = status
        if shim.stats_path and os.path.exists(shim.stats_path):
            row["ovs_stats"] = os.path.relpath(shim.stats_path, self.out_dir)
        if died and row["error"] is None:
            row["error"] = f"{_ovs.OVS_BIN} died during the transfer (status {status}); see {row['ovs_log']}"
        elif row["ovs_stats"] is None and row["error"] is None:
            row["error"] = f"{_ovs.OVS_BIN} wrote no stats file (exit status {status}); see {row['ovs_log']}"

    # -- whole run -------------------------------------------------------------
    def run(self) -> List[dict]:
        sc = self.sc
        if not self.schemes_checked:
            check_agent_schemes(sc)
            self.schemes_checked = True
        os.makedirs(self.out_dir, exist_ok=True)
        if self.schedule is None:
            plan = resume(sc, self.out_dir, self._say)
            todo, total = plan.todo, len(plan.units)
            self.rows = list(plan.kept)
        else:
            numbers = self.numbers or list(range(1, len(self.schedule) + 1))
            todo, total = list(zip(numbers, self.schedule)), len(self.schedule)
        jsonl = results.JsonlLog(os.path.join(self.out_dir, "transfers.jsonl"), self.rows)
        started = time.monotonic()
        try:
            with torn_down_on_exit(self.teardown, before_teardown=jsonl.close):
                if todo:
                    self.setup()
                    self._run_transfers(jsonl, todo, total)
        except (RunError, TopologyError):
            # Whatever ran is still worth its summary, Parquet and plot; then the error.
            if self.rows and self.write_results:
                self.wall_s = time.monotonic() - started
                self.write_summary()
            raise
        self.wall_s = time.monotonic() - started
        self.rows.sort(key=lambda r: r["transfer"])
        if self.write_results:
            self.write_summary()
        return self.rows

    def _scheme_failed(self, scheme: Scheme, reason: str) -> None:
        """A scheme's agent failed: say why once; its remaining transfers are not run."""
        self.failed_schemes[scheme.label] = reason
        left = sum(1 for _, (_, _, s, _) in self.remaining if s.label == scheme.label)
        log(f"{scheme.label} failed: {reason}" + (f"; its {left} remaining transfer(s) are marked failed" if left else ""))

    def _run_transfers(self, jsonl: "results.JsonlLog", todo: List[Unit], total: int) -> None:
        sc = self.sc
        for k, (i, (rep, client, scheme, size)) in enumerate(todo):
            self.remaining = todo[k + 1:]
            row = None
            if scheme.label in self.failed_schemes:
                row = self.new_row(rep, client, scheme, size)
                row["error"] = f"not run: {scheme.label} failed earlier: {self.failed_schemes[scheme.label]}"
            else:
                try:
                    self.prepare_scheme(scheme)
                except AgentError as e:
                    row = self.new_row(rep, client, scheme, size)
                    row["error"] = str(e)
                    self._scheme_failed(scheme, str(e))
                except TopologyError as e:
                    raise RunError(f"preparing {scheme.label}: {e}") from None
            if row is None:
                row = self.transfer(rep, client, scheme, size, number=i)
                row["transfer"] = i
                if scheme.uses_agent and self.collector is not None:
                    t0, t1, events_path = self.last_transfer
                    self.collector.attach(i, row, events_path, t0, t1, row["client_addr"])
                if row.get("agent_died"):
                    self._scheme_failed(scheme, row["agent_died"])
            row["transfer"] = i
            row["unit"] = unit_key(sc, rep, client, scheme, size)
            self.rows.append(row)
            jsonl.append(row)
            if self.on_row is not None:
                self.on_row(row)
            cc = (f" (server socket used {row['cc_observed']})"
                  if row["cc_observed"] and row["cc_observed"] != self.kernel_cc(scheme) else "")
            self._say(progress_line(i, total, client, row, self.out_dir) + cc)

    def labelled_rows(self) -> List[dict]:
        return labelled_rows(self.sc, self.rows)

    def client_paths(self) -> Dict[str, str]:
        return client_paths(self.sc)

    def summary_rows(self) -> List[dict]:
        return stats.summarize(self.labelled_rows())

    def ratio_rows(self) -> List[dict]:
        """Ratios of mean TCT of the compared pairs (the scenario's `compare`, else
        `stats.default_pairs`), per client and file size."""
        pairs = self.sc.compare or stats.default_pairs([s.label for s in self.sc.schemes])
        return stats.ratio_rows(self.labelled_rows(), pairs) if pairs else []

    def write_summary(self) -> None:
        """summary.json, summary.txt, transfers.parquet and the plots (run_summary.py), with
        what `analysis` adds to them."""
        write_run_summary(self, self.analysis)


def run_scenario(scenario: Scenario, out_dir: Optional[str] = None, *, quiet: bool = False) -> Runner:
    runner = Runner(scenario, out_dir or default_out_dir(scenario), quiet=quiet)
    runner.run()
    return runner
