"""The emulated network of an experiment and the processes that live in it.

    mahimahi shells (one per transfer, as user mmuser)        root namespace        server netns
    curl ── mm-link ── mm-loss ── mm-delay ──NAT──▶ 198.18.N.1 (veth) ◀──────▶ 198.18.N.2:8080 nginx
                                                    ccswitch-agent, ccswitch-kernel (BPF CC)

With a bridge (`ovs.py`), the server's veth ends in a bridge namespace instead, and the
root namespace reaches it through the bridge there.

Everything created here is recorded as it is created and undone in reverse order by
`Teardown.run()`: processes are stopped by PID / by the process group they were started in,
the namespace (and with it the veth pair) is deleted, sysctls are put back to the values
they had before the run.
"""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Callable, Dict, List, Optional, Sequence

#: Addresses of the server links: 198.18.0.0/15 (RFC 2544 benchmarking range), one /30 per run.
SERVER_NET_POOL = ipaddress.ip_network("198.18.0.0/16")
SERVER_PORT = 8080


class TopologyError(RuntimeError):
    """Setting up the emulated network or its processes failed (message says what and why)."""


class AgentError(TopologyError):
    """The agent for a scheme did not start or died: that scheme fails, the run goes on."""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run(cmd: Sequence[str], *, check: bool = True, timeout: float = 30.0, input: Optional[str] = None) -> subprocess.CompletedProcess:
    """Run a short command, capturing output; raise TopologyError with its stderr on failure."""
    try:
        cp = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout, input=input)
    except FileNotFoundError:
        raise TopologyError(f"command not found: {cmd[0]}") from None
    except subprocess.TimeoutExpired:
        raise TopologyError(f"command timed out after {timeout} s: {' '.join(cmd)}") from None
    if check and cp.returncode != 0:
        raise TopologyError(
            f"command failed (exit {cp.returncode}): {' '.join(cmd)}: {(cp.stderr or cp.stdout).strip()}"
        )
    return cp


class Teardown:
    """A stack of undo actions; `run()` executes them in reverse order, never raising."""

    def __init__(self) -> None:
        self._actions: List[tuple] = []

    def push(self, description: str, fn: Callable[[], None]) -> None:
        self._actions.append((description, fn))

    def run(self) -> List[str]:
        problems = []
        while self._actions:
            description, fn = self._actions.pop()
            try:
                fn()
            except Exception as e:  # keep tearing down the rest
                problems.append(f"{description}: {e}")
                log(f"teardown: {description}: {e}")
        return problems


# ----------------------------------------------------------------------- sysctls


def _sysctl_path(name: str) -> str:
    return "/proc/sys/" + name.replace(".", "/")


def read_sysctl(name: str) -> str:
    with open(_sysctl_path(name)) as f:
        return f.read().strip()


def write_sysctl(name: str, value: str) -> None:
    try:
        with open(_sysctl_path(name), "w") as f:
            f.write(value)
    except OSError as e:
        raise TopologyError(f"cannot set {name} = {value!r}: {e.strerror}") from None


class SysctlGuard:
    """Sets global (root namespace) sysctls and remembers the first original value of each."""

    def __init__(self, teardown: Teardown) -> None:
        self._teardown = teardown
        self._saved: Dict[str, str] = {}

    def set(self, name: str, value: str) -> None:
        if name not in self._saved:
            original = read_sysctl(name)
            self._saved[name] = original
            self._teardown.push(f"restore {name}", lambda: self._restore(name))
        write_sysctl(name, value)

    def _restore(self, name: str) -> None:
        original = self._saved.pop(name)
        if read_sysctl(name) != original:
            write_sysctl(name, original)

    def allow_congestion_control(self, name: str) -> None:
        """Add `name` to net.ipv4.tcp_allowed_congestion_control (needed to make it the
        default of a non-initial namespace; see ENVIRONMENT.md); teardown removes it again.

        Only our own addition is undone (not a snapshot of the whole list put back), so that
        runs overlapping in time do not undo each other's changes.
        """
        key = "net.ipv4.tcp_allowed_congestion_control"
        allowed = read_sysctl(key).split()
        if name in allowed:
            return
        write_sysctl(key, " ".join(allowed + [name]))

        def remove() -> None:
            current = read_sysctl(key).split()
            if name in current:
                write_sysctl(key, " ".join(n for n in current if n != name))

        self._teardown.push(f"remove {name} from {key}", remove)


# ----------------------------------------------------------------------- processes


class Processes:
    """Long-running processes started by the harness, each in its own session/process group."""

    def __init__(self, teardown: Teardown) -> None:
        self._procs: Dict[int, tuple] = {}
        teardown.push("stop processes", self.stop_all)

    def start(self, name: str, cmd: Sequence[str], log_path: Optional[str] = None, *,
              env: Optional[dict] = None, cwd: Optional[str] = None) -> subprocess.Popen:
        out = open(log_path, "ab") if log_path else subprocess.DEVNULL
        try:
            proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env, cwd=cwd)
        except FileNotFoundError:
            raise TopologyError(f"{name}: command not found: {cmd[0]}") from None
        finally:
            if log_path:
                out.close()
        self._procs[proc.pid] = (name, proc)
        return proc

    def start_and_wait(self, name: str, cmd: Sequence[str], log_path: str, ready: Callable[[], bool], *,
                       timeout_s: float, waiting_for: str, env: Optional[dict] = None,
                       cwd: Optional[str] = None, poll_s: float = 0.05) -> subprocess.Popen:
        """Start a daemon and wait until `ready()` holds; a daemon that exits first, or is not
        ready in time, raises TopologyError naming `waiting_for` and its log (it stays tracked,
        so the teardown stops it)."""
        proc = self.start(name, cmd, log_path, env=env, cwd=cwd)
        deadline = time.monotonic() + timeout_s
        while not ready():
            if proc.poll() is not None:
                raise TopologyError(f"{name} exited with status {proc.returncode} before {waiting_for}; "
                                    f"see {log_path}")
            if time.monotonic() > deadline:
                raise TopologyError(f"{name}: no {waiting_for} within {timeout_s:g} s; see {log_path}")
            time.sleep(poll_s)
        return proc

    def track(self, name: str, proc: subprocess.Popen) -> None:
        self._procs[proc.pid] = (name, proc)

    def forget(self, proc: subprocess.Popen) -> None:
        self._procs.pop(proc.pid, None)

    def stop(self, proc: subprocess.Popen, *, sig: int = signal.SIGTERM, grace_s: float = 5.0) -> None:
        """Signal the process group the process leads, wait, then SIGKILL the group."""
        name, _ = self._procs.pop(proc.pid, ("?", proc))
        if proc.poll() is None:
            _signal_group(proc.pid, sig)
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        # members of the group that outlived their leader
        _signal_group(proc.pid, signal.SIGKILL)

    def stop_all(self) -> None:
        for pid in reversed(list(self._procs)):
            _, proc = self._procs[pid]
            self.stop(proc)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


# ----------------------------------------------------------------------- server netns


def _used_addresses() -> set:
    cp = run(["ip", "-o", "-4", "addr", "show"], check=False)
    used = set()
    for line in cp.stdout.splitlines():
        parts = line.split()
        if "inet" in parts:
            used.add(ipaddress.ip_interface(parts[parts.index("inet") + 1]).network)
    return used


@contextlib.contextmanager
def subnet_lock():
    """Held from picking a subnet until its gateway address is configured, so that runs
    starting together do not pick the same one."""
    path = "/run/lock/ccswitch-subnets.lock" if os.path.isdir("/run/lock") else "/tmp/ccswitch-subnets.lock"
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def pick_subnet() -> ipaddress.IPv4Network:
    """First /30 of 198.18.0.0/16 not configured on any interface of the root namespace."""
    used = _used_addresses()
    for net in SERVER_NET_POOL.subnets(new_prefix=30):
        if not any(net.overlaps(u) for u in used):
            return net
    raise TopologyError("no free /30 left in 198.18.0.0/16")


def netns_exists(name: str) -> bool:
    return os.path.exists(f"/run/netns/{name}")


def netns_pids(name: str) -> List[int]:
    cp = run(["ip", "netns", "pids", name], check=False)
    return [int(p) for p in cp.stdout.split() if p.isdigit()]


def delete_netns(name: str) -> None:
    """Kill what still runs inside (only this harness starts processes in its namespaces),
    then delete the namespace and with it its interfaces."""
    if not netns_exists(name):
        return
    for pid in netns_pids(name):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 5
    while netns_pids(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    run(["ip", "netns", "del", name])


def create_netns(name: str, teardown: Teardown) -> None:
    if netns_exists(name):
        raise TopologyError(f"network namespace {name} already exists (left over from a killed run? "
                            f"remove it with: ip netns del {name})")
    run(["ip", "netns", "add", name])
    teardown.push(f"delete netns {name}", lambda: delete_netns(name))


class ServerNamespace:
    """A network namespace for the server, joined to the root namespace by a veth pair."""

    def __init__(self, teardown: Teardown, tag: Optional[str] = None) -> None:
        tag = tag or str(os.getpid())
        self.name = f"ccsw-srv-{tag}"
        self.veth_root = f"ccsw{tag}r"[:15]
        self.veth_srv = f"ccsw{tag}s"[:15]
        self._teardown = teardown
        self.subnet: Optional[ipaddress.IPv4Network] = None

    @property
    def root_ip(self) -> str:
        return str(self.subnet.network_address + 1)

    @property
    def server_ip(self) -> str:
        return str(self.subnet.network_address + 2)

    def exec_cmd(self, cmd: Sequence[str]) -> List[str]:
        return ["ip", "netns", "exec", self.name] + list(cmd)

    def create(self, outer_netns: Optional[str] = None, gateway_dev: Optional[str] = None) -> None:
        """Create the namespace and its veth. The outer end `veth_root` stays in the root
        namespace and carries the gateway address `root_ip`; or, with `outer_netns`, it goes
        into that (bridge) namespace without an address, and `gateway_dev`, a root-namespace
        device bridged to it, carries the gateway address."""
        create_netns(self.name, self._teardown)
        run(["ip", "link", "add", self.veth_root, "type", "veth", "peer", "name", self.veth_srv])
        self._teardown.push(f"delete veth {self.veth_root}", self._delete_veth)
        run(["ip", "link", "set", self.veth_srv, "netns", self.name])
        if outer_netns is not None:
            run(["ip", "link", "set", self.veth_root, "netns", outer_netns])
            run(["ip", "netns", "exec", outer_netns, "ip", "link", "set", self.veth_root, "up"])
        gateway = gateway_dev if outer_netns is not None else self.veth_root
        with subnet_lock():
            self.subnet = pick_subnet()
            run(["ip", "addr", "add", f"{self.root_ip}/30", "dev", gateway])
        run(["ip", "link", "set", gateway, "up"])
        x = self.exec_cmd
        run(x(["ip", "link", "set", "lo", "up"]))
        run(x(["ip", "addr", "add", f"{self.server_ip}/30", "dev", self.veth_srv]))
        run(x(["ip", "link", "set", self.veth_srv, "up"]))
        run(x(["ip", "route", "add", "default", "via", self.root_ip]))
        # The server talks to every client through one NAT address (the root side of the
        # veth): without this, TCP's per-destination metrics cache would carry ssthresh from
        # one transfer (and scheme) to the next.
        self.sysctl("net.ipv4.tcp_no_metrics_save", "1")

    def sysctl(self, name: str, value: str) -> None:
        run(self.exec_cmd(["sysctl", "-q", "-w", f"{name}={value}"]))

    def read(self, name: str) -> str:
        return run(self.exec_cmd(["sysctl", "-n", name])).stdout.strip()

    def set_congestion_control(self, cc: str) -> None:
        cp = run(self.exec_cmd(["sysctl", "-q", "-w", f"net.ipv4.tcp_congestion_control={cc}"]), check=False)
        if cp.returncode != 0:
            raise TopologyError(
                f"cannot set congestion control {cc!r} in {self.name}: {cp.stderr.strip()} "
                f"(available: {read_sysctl('net.ipv4.tcp_available_congestion_control')}; "
                f"allowed: {read_sysctl('net.ipv4.tcp_allowed_congestion_control')})"
            )
        got = self.read("net.ipv4.tcp_congestion_control")
        if got != cc:
            raise TopologyError(f"congestion control of {self.name} is {got!r} after setting {cc!r}")

    def pids(self) -> List[int]:
        return netns_pids(self.name)

    def delete(self) -> None:
        delete_netns(self.name)

    def _delete_veth(self) -> None:
        # Deleting the namespace destroys its end and with it the pair; this covers a
        # failure between creating the pair and moving one end into the namespace.
        if os.path.exists(f"/sys/class/net/{self.veth_root}"):
            run(["ip", "link", "del", self.veth_root], check=False)


# ----------------------------------------------------------------------- nginx


NGINX_CONF = """\
# generated by ccswitch run; serves {www}
daemon off;
master_process on;
worker_processes 1;
user root;
pid {pid};
error_log {error_log} warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_timeout 0;
    default_type application/octet-stream;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    server {{
        listen {addr}:{port};
        root {www};
        location / {{ }}
    }}
}}
"""


class Nginx:
    """nginx in the server namespace, with its own generated configuration."""

    def __init__(self, ns: ServerNamespace, procs: Processes, workdir: str, www: str, log_dir: str) -> None:
        self.ns, self.procs, self.workdir, self.www, self.log_dir = ns, procs, workdir, www, log_dir
        self.proc: Optional[subprocess.Popen] = None
        self.conf = os.path.join(workdir, "nginx.conf")
        self.pid_file = os.path.join(workdir, "nginx.pid")

    def start(self, timeout_s: float = 10.0) -> None:
        tmp = os.path.join(self.workdir, "nginx-tmp")
        os.makedirs(tmp, exist_ok=True)
        with open(self.conf, "w") as f:
            f.write(NGINX_CONF.format(www=self.www, pid=self.pid_file, tmp=tmp, addr=self.ns.server_ip,
                                      port=SERVER_PORT, error_log=os.path.join(self.log_dir, "nginx-error.log")))
        # -e: the error log nginx uses before it has read its configuration (nginx >= 1.19.5)
        cmd = self.ns.exec_cmd(["nginx", "-p", self.workdir, "-c", self.conf,
                                "-e", os.path.join(self.log_dir, "nginx-error.log")])
        self.proc = self.procs.start("nginx", cmd, os.path.join(self.log_dir, "nginx.out"))
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise TopologyError(f"nginx exited with status {self.proc.returncode} at start; "
                                    f"see {self.log_dir}/nginx-error.log")
            try:
                with socket.create_connection((self.ns.server_ip, SERVER_PORT), timeout=0.5):
                    return
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TopologyError(f"nginx did not accept connections on {self.ns.server_ip}:{SERVER_PORT} "
                                    f"within {timeout_s} s")
            time.sleep(0.05)

    def master_pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def stop(self) -> None:
        if self.proc is not None:
            # SIGQUIT = graceful shutdown of master and workers
            self.procs.stop(self.proc, sig=signal.SIGQUIT, grace_s=5.0)


# ----------------------------------------------------------------------- ccswitch processes


def python_agent_env(env: Dict[str, str], python_path: Sequence[str] = ()) -> Dict[str, str]:
    """`env` for a ccswitch-agent whose embedded Python must import what this process can:
    PYTHONPATH gets `python_path` (e.g. the scenario's directory), the directory holding the
    `ccswitch` package, then the caller's PYTHONPATH; VIRTUAL_ENV names this process's venv, whose
    site-packages the agent adds to its sys.path."""
    package_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../python/ccswitch
    dirs = [os.path.abspath(p) for p in python_path] + [os.path.dirname(package_root)]
    dirs += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    out = dict(env, PYTHONPATH=os.pathsep.join(dict.fromkeys(dirs)))
    if sys.prefix != sys.base_prefix and "VIRTUAL_ENV" not in env:
        out["VIRTUAL_ENV"] = sys.prefix
    return out


def agent_error_line(log_path: Optional[str]) -> Optional[str]:
    """The agent's own account of why it stopped, from its log: its fatal `Error: ...` (what
    main returned; the lines after it too, e.g. a Python traceback), else the last ERROR line
    of its log. None if the log says nothing (e.g. the process was killed)."""
    if not log_path:
        return None
    try:
        with open(log_path, errors="replace") as f:
            lines = [line.rstrip("\n") for line in f]
    except FileNotFoundError:
        return None
    for i, line in enumerate(lines):
        if line.startswith("Error: "):
            rest = []
            for more in lines[i + 1:]:
                if not more.strip() or more.startswith("Stack backtrace:"):
                    break
                rest.append(more)
            return "\n".join([line[len("Error: "):]] + rest)
    for line in reversed(lines):
        if " ERROR " in line:
            return line.split(" ERROR ", 1)[1].strip()
    return None


def describe_exit(status: Optional[int]) -> str:
    """"status 1" or "killed by SIGKILL" for a Popen returncode."""
    if status is not None and status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"status {status}"


def agent_check_env(python_path: Sequence[str] = ()) -> Dict[str, str]:
    """The environment of an agent started by the harness (and of its check)."""
    # no ANSI colours in the log files; the error an agent exits with, without a backtrace
    env = dict(os.environ, NO_COLOR="1", RUST_LOG_STYLE="never", RUST_LIB_BACKTRACE="0")
    return python_agent_env(env, python_path)


def check_agent_spec(agent_bin: str, algorithm: Optional[str], policy: Optional[str], env: Dict[str, str],
                     timeout_s: float = 20.0) -> Optional[str]:
    """Start `agent_bin` as the run will (`--algorithm ALG` or `--policy SPEC`, with `env`,
    e.g. the scenario's directory on PYTHONPATH) on a private socket, and see whether it gets
    as far as serving: the agent parses the algorithm and its parameters, imports and
    instantiates a `py:` class and loads the policy before it binds its socket. Returns None
    if it does (it is then stopped), else its error message. Needs no root."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ccswitch-check-") as d:
        sock = os.path.join(d, "agent.sock")
        cmd = [agent_bin, "--socket", sock, "--log-level", "error"]
        cmd += ["--policy", policy] if policy is not None else ["--algorithm", algorithm]
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True, env=env, start_new_session=True)
        except OSError as e:
            return f"cannot start {agent_bin}: {e.strerror}"
        try:
            deadline = time.monotonic() + timeout_s
            while proc.poll() is None and not os.path.exists(sock):
                if time.monotonic() > deadline:
                    return f"{os.path.basename(agent_bin)} neither served nor exited within {timeout_s:g} s"
                time.sleep(0.02)
            if os.path.exists(sock) and proc.poll() is None:
                return None
            err = proc.stderr.read()
        finally:
            if proc.poll() is None:
                _signal_group(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stderr.close()
    text = err.strip()
    if text.startswith("Error: "):
        text = text[len("Error: "):].split("\n\nStack backtrace:")[0].strip()
    what = f"--policy {policy}: " if policy is not None else f"--algorithm {algorithm}: "
    if text.startswith(what):
        text = text[len(what):]
    return text or f"{os.path.basename(agent_bin)} exited with {describe_exit(proc.returncode)} and no message"


class CcswitchDaemons:
    """The agent (restarted whenever the algorithm or policy changes) and the kernel datapath
    shim (kept for the whole run once a `kernel:` scheme needs it; it registers the BPF
    congestion control "ccswitch"). The ovs datapath's shim (`ovs.OvsShimProcess`) talks to
    the same agent.

    With `events_dir`, every agent start writes its flow events (creation, reports, algorithm
    handovers, close; JSONL) to `events_dir/agent-NNN.jsonl`, NNN counting the starts like the
    logs `agent-NNN-ALG.log`; `events_path` is the current agent's file."""

    CC_NAME = "ccswitch"

    def __init__(self, procs: Processes, sysctls: SysctlGuard, bin_dir: str, workdir: str, log_dir: str,
                 settle_s: float = 1.0, python_path: Sequence[str] = (), events_dir: Optional[str] = None,
                 destination_memory: bool = False) -> None:
        self.procs, self.sysctls = procs, sysctls
        #: keep the policies' per-destination memory (see Scenario.destination_memory)
        self.destination_memory = destination_memory
        self.agent_bin = os.path.join(bin_dir, "ccswitch-agent")
        self.shim_bin = os.path.join(bin_dir, "ccswitch-kernel")
        self.socket = os.path.join(workdir, "agent.sock")
        # where the shim looks for the agent (tests put a proxy in between)
        self.shim_socket = self.socket
        self.log_dir = log_dir
        self.events_dir = events_dir
        self.events_path: Optional[str] = None
        self.settle_s = settle_s
        self.agent: Optional[subprocess.Popen] = None
        self.agent_log: Optional[str] = None
        self.algorithm: Optional[str] = None
        self.policy: Optional[str] = None
        self.shim: Optional[subprocess.Popen] = None
        self._agent_starts = 0
        self.cc_name = self.CC_NAME
        # no ANSI colours in the log files
        self.env = dict(os.environ, NO_COLOR="1", RUST_LOG_STYLE="never")
        self.python_path = list(python_path)
        # CCSWITCH_LOG_LEVEL=debug logs every report and directive (large logs).
        self.log_level = os.environ.get("CCSWITCH_LOG_LEVEL", "info")
        # Python algorithms (`py:MODULE:CLASS`) run in the agent's embedded interpreter.
        self.agent_env = agent_check_env(python_path)

    @staticmethod
    def missing_binaries(bin_dir: str, names: Sequence[str] = ("ccswitch-agent", "ccswitch-kernel")) -> List[str]:
        return [p for p in (os.path.join(bin_dir, n) for n in names) if not os.access(p, os.X_OK)]

    def datapath_connections(self) -> int:
        """How many datapaths (shims) have connected to the current agent so far."""
        if not self.agent_log:
            return 0
        try:
            with open(self.agent_log, errors="replace") as f:
                return f.read().count("datapath connected")
        except FileNotFoundError:
            return 0

    def agent_command(self, algorithm: str, policy: Optional[str] = None) -> List[str]:
        """The agent's command line: `--policy SPEC` for a policy (its initial algorithm is
        the policy's; `--no-destination-memory` unless the scenario keeps the memory), else
        `--algorithm ALG`; `--events FILE` when events are collected."""
        cmd = [self.agent_bin, "--socket", self.socket]
        cmd += ["--policy", policy] if policy is not None else ["--algorithm", algorithm]
        if policy is not None and not self.destination_memory:
            cmd.append("--no-destination-memory")
        cmd += ["--log-level", self.log_level]
        if self.events_path is not None:
            cmd += ["--events", self.events_path]
        return cmd

    def _start_agent(self, algorithm: str, policy: Optional[str] = None) -> None:
        if self.agent is not None:
            self.procs.stop(self.agent)
            self.agent = None
        try:
            os.unlink(self.socket)
        except FileNotFoundError:
            pass
        self._agent_starts += 1
        log_path = os.path.join(self.log_dir, f"agent-{self._agent_starts:03d}-{algorithm.replace('/', '_')}.log")
        if self.events_dir is not None:
            os.makedirs(self.events_dir, exist_ok=True)
            self.events_path = os.path.join(self.events_dir, f"agent-{self._agent_starts:03d}.jsonl")
        self.agent_log = log_path
        self.algorithm, self.policy = algorithm, policy
        what = f"--policy {policy}" if policy is not None else f"--algorithm {algorithm}"
        try:
            self.agent = self.procs.start_and_wait(
                "ccswitch-agent", self.agent_command(algorithm, policy), log_path,
                lambda: os.path.exists(self.socket), timeout_s=10.0, env=self.agent_env,
                waiting_for=f"its socket {self.socket} ({what})")
        except TopologyError as e:
            reason = agent_error_line(log_path)
            raise AgentError(f"{e}: {reason}" if reason else str(e)) from None

    def _start_shim(self, timeout_s: float = 30.0) -> None:
        log_path = os.path.join(self.log_dir, "kernel-shim.log")
        cmd = [self.shim_bin, "--agent-socket", self.shim_socket, "--fallback", "reno", "--log-level", self.log_level]
        if self.CC_NAME in read_sysctl("net.ipv4.tcp_available_congestion_control").split():
            # Another ccswitch-kernel (someone else's run) holds the name: register ours under a
            # name of its own (TCP_CA_NAME_MAX = 16) instead of silently using theirs.
            self.cc_name = f"ccsw_{os.getpid()}"[:15]
            cmd += ["--cc-name", self.cc_name]
            log(f"congestion control {self.CC_NAME!r} is already registered by another process; "
                f"this run registers its own as {self.cc_name!r}")
        self.shim = self.procs.start_and_wait(
            "ccswitch-kernel", cmd, log_path,
            lambda: self.cc_name in read_sysctl("net.ipv4.tcp_available_congestion_control").split(),
            timeout_s=timeout_s, env=self.env, poll_s=0.1,
            waiting_for=f"registering the congestion control {self.cc_name!r} "
                        "(net.ipv4.tcp_available_congestion_control)")
        self.sysctls.allow_congestion_control(self.cc_name)

    def ensure(self, algorithm: str, kernel_shim: bool = True, policy: Optional[str] = None) -> None:
        """Make sure the agent runs `algorithm` (or, with `policy`, that policy's selector),
        restarting it if needed, and, with `kernel_shim`, that the kernel datapath's shim runs."""
        if self.shim is not None and self.shim.poll() is not None:
            raise TopologyError(f"ccswitch-kernel died (status {self.shim.returncode}); "
                                f"see {self.log_dir}/kernel-shim.log")
        changed = False
        same = self.algorithm == algorithm and self.policy == policy
        if self.agent is None or self.agent.poll() is not None or not same:
            if self.agent is not None and self.agent.poll() is not None and same:
                log(f"ccswitch-agent exited with status {self.agent.returncode}; restarting it")
            self._start_agent(algorithm, policy)
            changed = True
        if self.shim is None and kernel_shim:
            self._start_shim()
            changed = True
        if changed and self.settle_s > 0:
            # give the shim time to (re)connect to the new agent before a flow starts
            time.sleep(self.settle_s)
        if self.agent.poll() is not None:
            what = f"--policy {policy}" if policy is not None else f"--algorithm {algorithm}"
            reason = agent_error_line(self.agent_log)
            raise AgentError(f"ccswitch-agent {what} exited with {describe_exit(self.agent.returncode)}"
                             f"{': ' + reason if reason else ''}; see {self.agent_log}")

    def agent_died(self) -> Optional[str]:
        """Why the current agent is gone (its exit and last error line), or None while it runs."""
        if self.agent is None or self.agent.poll() is None:
            return None
        reason = agent_error_line(self.agent_log)
        return (f"ccswitch-agent exited with {describe_exit(self.agent.returncode)}"
                f"{': ' + reason if reason else ''} (see {os.path.basename(self.agent_log)})")

    def stop(self) -> None:
        # the shim first (it unregisters the congestion control), then the agent
        if self.shim is not None:
            self.procs.stop(self.shim, sig=signal.SIGINT, grace_s=10.0)
            self.shim = None
        if self.agent is not None:
            self.procs.stop(self.agent)
            self.agent = None
