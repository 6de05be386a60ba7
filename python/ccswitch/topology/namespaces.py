"""The emulated network of an experiment: its namespaces, links and sysctls, and the processes
that live in it (the daemons among them are started by `daemons.py`).

    mahimahi shells (one per transfer, as user mmuser)        root namespace        server netns
    curl ── mm-link ── mm-loss ── mm-delay ──NAT──▶ 198.18.N.1 (veth) ◀──────▶ 198.18.N.2:8080 nginx
                                                    ccswitch-agent, ccswitch-kernel (BPF CC)

With a bridge (`bridges.py`), the server's veth ends in a bridge namespace instead, and the
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
import json
import os
import signal
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
    """Sets global (root namespace) sysctls; the last run on the host to let go of one puts
    back the value it had before the first took it. Runs on one host overlap (the labs of a
    distributed worker), so each run's holding is kept in a host-wide registry
    (`SYSCTL_REGISTRY`, under `host_lock("sysctls")`) rather than in the run alone: a run that
    restored its own snapshot would pull a value from under another run still using it."""

    def __init__(self, teardown: Teardown) -> None:
        self._teardown = teardown
        self._held: set = set()

    def set(self, name: str, value: str) -> None:
        with host_lock("sysctls"):
            reg = _load_registry()
            entry = reg.get(name)
            if entry is None or not _live_holders(entry):
                entry = reg[name] = {"original": read_sysctl(name), "holders": []}
            if name not in self._held:
                entry["holders"] = _live_holders(entry) + [os.getpid()]
                self._held.add(name)
                self._teardown.push(f"restore {name}", lambda: self._restore(name))
            _save_registry(reg)
            write_sysctl(name, value)

    def _restore(self, name: str) -> None:
        self._held.discard(name)
        with host_lock("sysctls"):
            reg = _load_registry()
            entry = reg.get(name)
            if entry is None:
                return
            holders = _live_holders(entry)
            if os.getpid() in holders:
                holders.remove(os.getpid())
            if holders:
                entry["holders"] = holders
            else:
                del reg[name]
                if read_sysctl(name) != entry["original"]:
                    write_sysctl(name, entry["original"])
            _save_registry(reg)

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


#: Which runs of this host hold which global sysctls, and their values before the first did.
SYSCTL_REGISTRY = "/run/ccswitch-sysctls.json" if os.path.isdir("/run") else "/tmp/ccswitch-sysctls.json"


def _load_registry() -> Dict[str, dict]:
    try:
        with open(SYSCTL_REGISTRY, encoding="utf-8") as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _save_registry(reg: Dict[str, dict]) -> None:
    tmp = SYSCTL_REGISTRY + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(reg, f)
    os.replace(tmp, SYSCTL_REGISTRY)


def _live_holders(entry: dict) -> List[int]:
    """The holders of a registry entry whose processes still run (a killed run holds nothing)."""
    return [p for p in entry.get("holders", []) if os.path.exists(f"/proc/{p}")]


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
def host_lock(what: str):
    """A lock of this host, shared by every run on it (concurrent runs of a distributed
    cluster, or of several users): held while a run picks a name or address that must be
    unique on the host and until that name or address is taken."""
    base = "/run/lock" if os.path.isdir("/run/lock") else "/tmp"
    with open(os.path.join(base, f"ccswitch-{what}.lock"), "a") as f:
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
        with host_lock("subnets"):
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
