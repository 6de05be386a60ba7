"""`ccswitch bench scale`: what many concurrent flows cost a datapath.

N long-lived TCP connections run from a mahimahi delay shell (`mm-delay D`, run as mmuser)
to `ccswitch-loadgen serve` in the server namespace, under the agent (`--algorithm`, Cubic by
default) and one datapath: `kernel` (the server's congestion control is ccswitch and the
kernel shim drives it) or `ovs` (the server keeps its stock Cubic behind the OVS bridge, and
`ccswitch-ovs` on the bridge's server-facing port drives it). Each flow is read at a fixed
rate by `ccswitch-loadgen fetch`, so flow control holds its sender to that rate and every flow
has a realistic ACK clock. The connections open over a ramp; once all are open the figures are
read over a steady window of `seconds`:

- kernel: ACKs/s and BPF ns per ACK (run count and time of this shim's `ccsw_cong_control`,
  `kernel.bpf_stats_enabled=1`; one run is one ACK), ACKs folded in BPF, reports/s, ACKs under
  the fallback, ring records lost (this shim's per-CPU stats map);
- ovs: packets/s and BPF ns per packet of the port's ingress (server data) and egress (client
  ACKs) programs, ACKs rewritten, ACKs folded in the egress program and its reports, ring
  drops, flows fallen back, flows left uncontrolled;
- shim and agent CPU as % of one core (the scheduler's run time of every thread, ns);
- report -> directive latency p50/p99/p99.9, all and urgent (loss/timeout) reports, over the
  window only (the shim starts its histogram on SIGUSR1 and logs it on SIGUSR2); every report
  is timed (the shim keeps each flow's unanswered reports in a queue);
- flows fallen back in the window, as flows, with the reason of each (kernel: the agent's
  deadline passed, or the flow's directive was gone; ovs: the shim's reasons), and flows that
  rejoined control;
- the kernel's abort counters (`TcpExt TCPAbortOn*`) of the server's and the clients'
  namespace (the delay shell's, where the fetcher's sockets are), from before the ramp to the
  end of the window (a connection reset while the flows run shows there), and apart from them
  those of the close at the end (the fetcher closes sockets with unread data, which resets
  them; a delay shell's namespace goes with its fetch, so only the server's then);
- memory per flow: growth of the shim's and agent's resident set from before the ramp to
  the window, over N;
- flows: opened, still receiving at the end, open but never sent a byte (silent), failed, and
  corrupt (a byte read differed from the one sent: every byte of every flow is checked);
  goodput within the window (every flow open at its start; flows that opened late have caught
  up by then) and its spread over flows, apart from the goodput since the last flow opened.

The testbed is sized so that its own limits do not stand in for the path's:
`net.core.netdev_max_backlog` and `net.ipv4.tcp_mem` are raised for the flow count (restored
after the run; the peak of TCP buffer memory is reported), so that neither the veth input
backlog nor the machine-wide TCP memory drops segments, and the delay shell's TUN queues are
sized for the flows (DelayShell.size_queues; what they still drop is reported as
`delay_shell_drops_per_s`). Losses are asked for instead:
`--loss-pct` drops that share of the server's packets in the kernel (PathLoss), which gives
the urgent reports whose latency is measured. `--own-cpu` keeps the load generator's packet
processing off the shim's CPU (how busy the machine was is reported either way).

`--floor` runs the same load with no ccswitch, under `ccsw_floor` (`make bench`'s floor, a BPF
Reno on the hook ccswitch's program uses): its BPF time per ACK, the sockets as cold as
ccswitch's find them, is what this machine charges any program there.

Only this run's programs and maps are read (by the ids its shim logs), so another ccswitch
datapath on the machine does not mix in.
"""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, List, Optional

from .bench import FLOOR_CC, cpu_seconds, start_floor_cc, stop_floor_cc
from .environment import MM_USER
from .errors import RunError
from .runner import Runner, torn_down_on_exit
from .scenario import loads_scenario
from ..topology.namespaces import log, read_sysctl, run
from ..topology.schedule import rule_packets

LOADGEN = "ccswitch-loadgen"
LOADGEN_PORT = 9000
#: flows per loadgen process pair (below the 20k-descriptor hard limit of this machine)
FLOWS_PER_PROCESS = 16_000
#: SO_SNDBUF / SO_RCVBUF past 20k flows
SMALL_BUFFER_BYTES = 4096
#: Pages of TCP buffer memory a flow may hold, both ends together, before the machine-wide
#: `net.ipv4.tcp_mem` pressure threshold is reached: its autotuned buffers (a slow reader's
#: receive queue of up to ~130 KiB of truesize, the server's send queue of up to ~120 KiB), or
#: the small buffers past 20k flows. 10k flows at the default limits (288k/384k/576k pages)
#: reached the hard limit (576k pages), and the receivers then dropped 5k segments/s
#: (TCPRcvQDrop); sized so, the same run peaked near 1.04M pages and dropped none.
TCP_MEM_PAGES_PER_FLOW = 128
TCP_MEM_PAGES_PER_SMALL_FLOW = 12
#: The comment that marks this run's path-loss rules (iptables), so that only they are removed.
LOSS_RULE_COMMENT = "ccswitch-bench-scale-loss"
DATAPATHS = ("kernel", "ovs")

SCENARIO = """
name = "scale"
repetitions = 1
schemes = ["{prefix}:{algorithm}"]
timeout_s = 60
agent_settle_s = 0.5
[[clients]]
name = "scale"
delay_ms = {delay_ms}
link = {{ mbps = 100 }}
file_bytes = 10_000
"""


def scenario(algorithm: str, delay_ms: int, datapath: str = "kernel"):
    """The run's set-up as a scenario: the agent scheme on the datapath (`ovs:` brings the
    OVS bridge), and the client path (its link is not used: the flows cross only `mm-delay`)."""
    if datapath not in DATAPATHS:
        raise RunError(f"--datapath: {datapath!r} is not one of {', '.join(DATAPATHS)}")
    return loads_scenario(SCENARIO.format(prefix=datapath, algorithm=algorithm, delay_ms=delay_ms))


def _bpftool(*args: str):
    return json.loads(run(["bpftool", "--json", *args]).stdout or "null")


def _programs(ids: List[int]) -> Dict[str, dict]:
    return {p["name"]: p for p in (_bpftool("prog", "show", "id", str(i)) for i in ids)}


def _map_named(prog: dict, name: str) -> dict:
    maps = [_bpftool("map", "show", "id", str(m)) for m in prog.get("map_ids", [])]
    found = [m for m in maps if m["name"] == name]
    if not found:
        raise RunError(f"no {name} map among {sorted(m['name'] for m in maps)}")
    return found[0]


#: What socket storage costs per socket beyond its value (the kernel's bpf_local_storage_elem
#: header and the socket's storage pointer block, rounded up): an estimate, named as one.
SK_STORAGE_OVERHEAD_BYTES = 64


def map_bytes(progs: Dict[str, dict], flows: int) -> int:
    """Memory of the maps the programs use, with `flows` flows: every preallocated map's
    locked bytes, and socket storage (allocated per socket) as its value size plus overhead."""
    total = 0
    ids = sorted({m for p in progs.values() for m in p.get("map_ids", [])})
    for m in (_bpftool("map", "show", "id", str(i)) for i in ids):
        if m["type"] == "sk_storage":
            total += flows * (m["bytes_value"] + SK_STORAGE_OVERHEAD_BYTES)
        else:
            total += m.get("bytes_memlock", 0)
    return total


def _run_stats(prog_id: int) -> Dict[str, int]:
    p = _bpftool("prog", "show", "id", str(prog_id))
    return {"run_cnt": p.get("run_cnt", 0), "run_time_ns": p.get("run_time_ns", 0)}


def _per_cpu_counters(map_id: int) -> Dict[str, int]:
    """A per-CPU array of counters summed over CPUs (bpftool's BTF view; the plain one is
    bytes)."""
    out: Dict[str, int] = {}
    for entry in _bpftool("map", "dump", "id", str(map_id)):
        for per_cpu in (entry.get("formatted") or {}).get("values", []):
            for k, v in (per_cpu.get("value") or {}).items():
                out[k] = out.get(k, 0) + int(v)
    return out


def _logged_ids(log_path: str, pattern: str) -> List[int]:
    with open(log_path, errors="replace") as f:
        found = re.findall(pattern, f.read())
    if not found:
        raise RunError(f"the shim did not log its program ids; see {log_path}")
    # the log is appended to: this shim's line is the last
    return [int(x) for x in re.findall(r"\d+", found[-1])]


def _log_fields(log_path: str, message: str) -> Dict[str, float]:
    """The numeric key=value fields of the last log line carrying `message`."""
    with open(log_path, errors="replace") as f:
        lines = [l for l in f if message in l]
    if not lines:
        raise RunError(f"no {message!r} line in {log_path}")
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-0-9.]+)\b", lines[-1])}


#: The server's TCP counters reported per second of the window: what it sent, what it sent
#: again, and why (retransmission timeouts, tail loss probes, retransmissions lost again).
SENDER_COUNTERS = ("OutSegs", "RetransSegs", "TCPTimeouts", "TCPLossProbes", "TCPLostRetransmit")
#: The client's: segments it received, and those it dropped or pruned for want of memory or
#: buffer space (the receive side of the testbed, not the path).
RECEIVER_COUNTERS = ("InSegs", "TCPRcvQDrop", "PruneCalled", "RcvPruned", "OfoPruned", "TCPOFODrop",
                     "TCPBacklogDrop", "TCPZeroWindowDrop", "TCPMemoryPressures")


def tcp_counters(cmd_prefix: List[str]) -> Dict[str, int]:
    """The kernel's Tcp and TcpExt counters in the namespace `cmd_prefix` runs in."""
    text = run(cmd_prefix + ["cat", "/proc/net/snmp", "/proc/net/netstat"]).stdout
    counters: Dict[str, int] = {}
    for group in ("Tcp:", "TcpExt:"):
        rows = [line.split() for line in text.splitlines() if line.startswith(group)]
        if len(rows) != 2:
            raise RunError(f"no {group[:-1]} counters in /proc/net")
        counters.update((k, int(v)) for k, v in zip(rows[0][1:], rows[1][1:]))
    return counters


def tcp_aborts(counters: Dict[str, int]) -> Dict[str, int]:
    """The TCPAbort* counters of `tcp_counters`."""
    return {k: v for k, v in counters.items() if k.startswith("TCPAbort")}


def softnet_drops() -> int:
    """Packets the kernel dropped machine-wide because a CPU's input backlog was full
    (/proc/net/softnet_stat, second column, summed over CPUs): a veth hands each packet to the
    peer's backlog, so the bursts of thousands of flows overflow it (net.core.netdev_max_backlog)
    and the flows see real losses that are the testbed's, not the path's."""
    with open("/proc/net/softnet_stat") as f:
        return sum(int(line.split()[1], 16) for line in f if line.strip())


#: mm-delay's devices: the TUN it reads in the namespace it was started from (`delay-<pid>`,
#: what the server sends toward the clients queues there) and the one its shell's programs send
#: through (`ingress`, the clients' ACKs).
DELAY_SHELL_OUTER_PREFIX = "delay-"
DELAY_SHELL_INNER = "ingress"
#: The queue of mahimahi's TUN devices, packets (txqueuelen as it leaves them).
MAHIMAHI_TUN_QUEUE_PACKETS = 500
#: The delay shell's queues by default, per flow (DelayShell.size_queues): 10k flows at
#: 10 kbit/s each still lost 55k packets as their connections opened and filled their receive
#: buffers at 2 per flow, none at 8.
DELAY_QUEUE_PACKETS_PER_FLOW = 8
#: The longest queue a TUN device in use takes: its ring of packet pointers is one kmalloc, at
#: most KMALLOC_MAX_SIZE (4 MiB here), 8 bytes a packet. Longer, the kernel refuses the resize
#: as "Operation not permitted" (the TUN's notifier answers NOTIFY_BAD, read as EPERM); the
#: per-flow default reached it at 65,536 flows through a delay.
TUN_QUEUE_MAX_PACKETS = 524_288


def tx_drops(net_dev: str) -> Dict[str, int]:
    """Each device's transmit drops in a /proc/net/dev listing."""
    drops = {}
    for line in net_dev.splitlines()[2:]:
        name, sep, fields = line.partition(":")
        if sep:
            drops[name.strip()] = int(fields.split()[11])
    return drops


def _descendants(roots: List[int]) -> List[int]:
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue  # gone, or not a process
            children.setdefault(ppid, []).append(int(entry))
    found, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def _outer_devices() -> Dict[str, int]:
    """The delay shells' outer devices in this process's namespace, with their transmit drops."""
    with open("/proc/self/net/dev") as f:
        return {n: d for n, d in tx_drops(f.read()).items() if n.startswith(DELAY_SHELL_OUTER_PREFIX)}


class DelayShell:
    """A delay shell a fetch runs in (started as process `root`): its outer device, its inner one
    and a process in its namespace, found once it has made them. mm-delay forwards every packet
    through one user-space process, so packets it has not read yet wait in these devices'
    queues, and what does not fit is lost by the testbed, not the path."""

    def __init__(self, root: int, outer_before: set, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        own = os.readlink("/proc/self/ns/net")
        while True:
            outer = sorted(set(_outer_devices()) - outer_before)
            inner = [pid for pid in _descendants([root]) if self._inner_drops(pid, own) is not None]
            if outer and inner:
                break
            if time.monotonic() > deadline:
                raise RunError(f"mm-delay's devices ({DELAY_SHELL_OUTER_PREFIX}*, {DELAY_SHELL_INNER}) did not "
                               f"appear within {timeout_s:g} s (process {root})")
            time.sleep(0.01)
        self.outer, self.inner_pid = outer[0], inner[0]

    @staticmethod
    def _inner_drops(pid: int, own_netns: str) -> Optional[int]:
        try:
            if os.readlink(f"/proc/{pid}/ns/net") == own_netns:
                return None
            with open(f"/proc/{pid}/net/dev") as f:
                return tx_drops(f.read()).get(DELAY_SHELL_INNER)
        except OSError:
            return None  # exited meanwhile

    def netns_cmd(self) -> List[str]:
        """A command prefix that runs in the shell's namespace (where its fetch's sockets are)."""
        return ["nsenter", "-t", str(self.inner_pid), "-n"]

    def size_queues(self, packets: int) -> None:
        """Gives both devices a queue of `packets` (txqueuelen, 500 as mahimahi leaves it):
        thousands of flows send in bursts, and 10k flows read at 3 kbit/s each, 30 Mbit/s in
        all, lost 2.9k packets a second toward the clients and 1.1k toward the server at 500
        (experiments/measured/delay-shell-rates-2026-11-27) and retransmitted a quarter of what
        they sent."""
        run(["ip", "link", "set", "dev", self.outer, "txqueuelen", str(packets)])
        run(self.netns_cmd() + ["ip", "link", "set", "dev", DELAY_SHELL_INNER, "txqueuelen", str(packets)])

    def drops(self) -> Dict[str, int]:
        """Transmit drops so far: toward the clients (the outer device), toward the server (inner)."""
        to_server = self._inner_drops(self.inner_pid, os.readlink("/proc/self/ns/net"))
        if to_server is None:
            raise RunError(f"the delay shell of {self.outer} is gone (its fetch exited early?)")
        return {"to_clients": _outer_devices().get(self.outer, 0), "to_server": to_server}


def _summed(counts: List[Dict[str, int]]) -> Dict[str, int]:
    total: Dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            total[k] = total.get(k, 0) + v
    return total


def delay_shell_drops(shells: List["DelayShell"]) -> Dict[str, int]:
    """The shells' drops (DelayShell.drops), summed."""
    return _summed([{"to_clients": 0, "to_server": 0}] + [shell.drops() for shell in shells])


def client_counters(shells: List["DelayShell"]) -> Dict[str, int]:
    """The Tcp and TcpExt counters of the clients' namespaces: this one without a delay shell,
    else each shell's (a namespace of its own, its counters from 0), summed."""
    return _summed([tcp_counters(shell.netns_cmd()) for shell in shells]) if shells else tcp_counters([])


class ShimWindow:
    """A shim's measurement window: SIGUSR1 begins it, SIGUSR2 ends it; each shim logs a line
    once it has acted (`started`, then `ended`), which is waited for."""

    started = "measurement window started"

    def __init__(self, pid: int, log_path: str, ended: str) -> None:
        self.pid, self.log_path, self.ended = pid, log_path, ended

    def start(self) -> None:
        self._signal(signal.SIGUSR1, self.started)

    def end(self) -> None:
        self._signal(signal.SIGUSR2, self.ended)

    def _signal(self, edge: int, logged: str, timeout_s: float = 5.0) -> None:
        try:
            os.kill(self.pid, edge)
        except ProcessLookupError:
            raise RunError(f"the shim (pid {self.pid}) is gone") from None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with open(self.log_path, errors="replace") as f:
                if any(logged in line for line in f):
                    return
            time.sleep(0.05)
        raise RunError(f"the shim did not log {logged!r} within {timeout_s:g} s; see {self.log_path}")


def pin_process(pid: int, cpus: set) -> None:
    """Every thread of `pid` onto `cpus` (threads it starts later inherit it)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass


def cpu_jiffies() -> Dict[str, int]:
    """The machine's CPU time so far (/proc/stat's `cpu` line, all CPUs), in clock ticks, by
    kind: busy (all but idle and iowait), softirq, and total."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return {"total": sum(v[:8]), "busy": sum(v[:8]) - v[3] - v[4], "softirq": v[6]}


def size_tcp_mem(r: Runner, pressure_pages: int) -> int:
    """Raise net.ipv4.tcp_mem (restored after the run) so that its pressure threshold is at
    least `pressure_pages`, keeping the ratios of its three values; never lowers it. Returns
    the hard limit in pages."""
    pages = [int(v) for v in read_sysctl("net.ipv4.tcp_mem").split()]
    if pages[0] < pressure_pages:
        pages = [v * pressure_pages // pages[0] for v in pages]
        r.sysctls.set("net.ipv4.tcp_mem", " ".join(map(str, pages)))
    return pages[2]


def tcp_sockstat() -> Dict[str, int]:
    """The TCP line of /proc/net/sockstat: `mem` (pages of TCP buffer memory) and `orphan`
    (sockets closed by their process, still sending or closing) count every namespace: both
    are machine-wide."""
    with open("/proc/net/sockstat") as f:
        for line in f:
            if line.startswith("TCP:"):
                fields = line.split()[1:]
                return {k: int(v) for k, v in zip(fields[::2], fields[1::2])}
    raise RunError("/proc/net/sockstat has no TCP line")


def tcp_mem_pages() -> int:
    """Pages of TCP buffer memory allocated machine-wide (tcp_mem is one pool)."""
    return tcp_sockstat()["mem"]


class PeakSampler:
    """Samples a reading every `period_s` in a thread between start() and stop(); `peak` is
    the largest."""

    def __init__(self, read: Callable[[], int], period_s: float = 0.25) -> None:
        self._read, self._period = read, period_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.peak = 0

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._read())
            self._stop.wait(self._period)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._read())
        return self.peak


class PathLoss:
    """Random loss of the server's packets towards the clients, in the kernel: an iptables
    `statistic` rule in the root namespace's INPUT (fetcher in the root namespace) and FORWARD
    (fetcher behind mm-delay) chains, marked with LOSS_RULE_COMMENT and removed at teardown.
    Cheap enough for 10k flows at 1 Gbit/s, where a user-space element (mm-loss, ccswitch-schedule)
    would cap the ACK rate as mm-delay does."""

    CHAINS = ("INPUT", "FORWARD")

    def __init__(self, r: Runner, server_ip: str, loss_pct: float) -> None:
        self.spec = ["-s", f"{server_ip}/32", "-p", "tcp", "-m", "statistic", "--mode", "random",
                     "--probability", f"{loss_pct / 100:.6f}", "-m", "comment", "--comment", LOSS_RULE_COMMENT,
                     "-j", "DROP"]
        self._installed: List[str] = []
        r.teardown.push("remove the path-loss rules", self.remove)
        for chain in self.CHAINS:
            run(["iptables", "-I", chain, "1"] + self.spec)
            self._installed.append(chain)

    def dropped(self) -> int:
        """Packets the rules have dropped so far (their counters)."""
        return sum(rule_packets(chain, lambda line: LOSS_RULE_COMMENT in line) for chain in self._installed)

    def remove(self) -> None:
        while self._installed:
            chain = self._installed.pop()
            run(["iptables", "-D", chain] + self.spec, check=False)


def realtime_priority(pid: int) -> Optional[int]:
    """The real-time priority `pid` runs at (SCHED_FIFO or SCHED_RR), read from /proc; None
    under the normal scheduler."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    rt_priority, policy = int(fields[37]), int(fields[38])  # proc(5): stat fields 40 and 41
    return rt_priority if policy in (os.SCHED_FIFO, os.SCHED_RR) else None


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class KernelSide:
    """The kernel datapath: the agent and the kernel shim, the server's congestion control
    ccswitch; figures from the shim's `ccsw_cong_control` and stats map, and its exit log."""

    def __init__(self, r: Runner) -> None:
        self.r = r
        r.prepare_scheme(r.sc.schemes[0])
        self.log = os.path.join(r.log_dir, "kernel-shim.log")
        progs = _programs(_logged_ids(self.log, r"prog_ids=\[([0-9, ]+)\]"))
        if "ccsw_cong_control" not in progs:
            raise RunError(f"no ccsw_cong_control among the shim's programs: {sorted(progs)}")
        self.programs = progs
        self.cong_control = progs["ccsw_cong_control"]["id"]
        self.stats_map = _map_named(progs["ccsw_cong_control"], "ccsw_stats")["id"]
        # the latency line is the last the shim logs at the window's end (after its flows)
        self.window = ShimWindow(r.daemons.shim.pid, self.log, "report to directive latency")

    def pids(self) -> Dict[str, int]:
        """The processes whose CPU and memory are counted: the agent's only when it is a
        process of its own (in-process, the shim's figures are both)."""
        d = self.r.daemons
        return {"shim": d.shim.pid} if d.in_process else {"shim": d.shim.pid, "agent": d.agent.pid}

    def end_window(self) -> None:
        """The shim logs the window's flows and latency at once."""
        self.window.end()
        self.window_flows = _log_fields(self.log, "measurement window flows")
        self.window_latency = _log_fields(self.log, "report to directive latency")

    def snapshot(self) -> Dict[str, int]:
        return {**_run_stats(self.cong_control), **_per_cpu_counters(self.stats_map)}

    def finish(self, d: Dict[str, int], dt: float) -> Dict[str, object]:
        self.r.daemons.stop()  # the shim logs its totals on the way out
        totals = _log_fields(self.log, "shim totals")
        lat, flows = self.window_latency, self.window_flows
        reasons = {
            "agent_late": int(flows.get("flows_fell_back_agent_late", 0)),
            "no_directive": int(flows.get("flows_fell_back_no_directive", 0)),
        }
        acks = d["run_cnt"]
        return {
            "acks_per_s": acks / dt,
            "bpf_ns_per_ack": d["run_time_ns"] / acks if acks else None,
            "acks_folded_per_s": d.get("acks_folded", 0) / dt,
            "reports_per_s": d.get("reports", 0) / dt,
            # routine records' age limit, outside cong_control (one IPI each)
            "routine_timer_wakeups_per_s": d.get("routine_timer_wakeups", 0) / dt,
            "acks_fallback_in_window": d.get("acks_fallback", 0),
            # of which: before the agent's first directive, past its deadline (the rest: a
            # directed flow found no directive)
            "acks_fallback_awaiting_agent": d.get("acks_fallback_awaiting", 0),
            "acks_fallback_agent_late": d.get("acks_fallback_agent_late", 0),
            "flows_fallen_back": sum(reasons.values()),
            "fallback_reasons": {k: v for k, v in reasons.items() if v},
            "flows_rejoined": int(flows.get("flows_rejoined", 0)),
            "flows_first_directed": int(flows.get("flows_directed", 0)),
            "ring_records_lost": d.get("drops", 0),
            "answer_p50_us": lat.get("p50_us"),
            "answer_p99_us": lat.get("p99_us"),
            "answer_p999_us": lat.get("p999_us"),
            "urgent_answers": lat.get("urgent"),
            "urgent_p99_us": lat.get("urgent_p99_us"),
            # of which: from the report to the shim reading it, from reading it to sending it
            # to the agent, and from sending it to the answer's arrival (in-process: the
            # agent's work)
            "urgent_read_p50_us": lat.get("urgent_read_p50_us"),
            "urgent_read_p99_us": lat.get("urgent_read_p99_us"),
            "urgent_queued_p50_us": lat.get("urgent_queued_p50_us"),
            "urgent_queued_p99_us": lat.get("urgent_queued_p99_us"),
            "urgent_agent_p50_us": lat.get("urgent_agent_p50_us"),
            "urgent_agent_p99_us": lat.get("urgent_agent_p99_us"),
            "reports_untimed": lat.get("untimed"),
            "reports_awaiting_at_end": lat.get("awaiting"),
            "directives_refused": totals.get("directives_refused", 0),
            "reports_dropped": totals.get("reports_dropped", 0),
            "agent_errors": totals.get("agent_errors", 0),
        }


class _NoWindow:
    """The floor has no shim to start and end a window: its figures are read around it."""

    def start(self) -> None:
        pass

    def end(self) -> None:
        pass


class FloorSide:
    """`--floor`: no ccswitch. The server's congestion control is `ccsw_floor`
    (`ccswitch-kernel --floor-cc`, a BPF Reno on the hook ccswitch's program uses and nothing
    more, as `make bench` runs it), so its BPF time per ACK under the same load, the sockets as
    cold, is what this machine charges any program there. No shim, no agent, no reports: their
    figures are None. It is unregistered with the run; its programs go once the kernel has
    closed the server's orphaned sockets that still use it (a minute or two)."""

    def __init__(self, r: Runner) -> None:
        self.r = r
        self.proc, self.prog = start_floor_cc(r)
        self.stopped = False
        r.teardown.push("stop ccsw_floor", self._stop)
        self.programs: Dict[str, dict] = {}  # no maps
        self.window = _NoWindow()

    def _stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            stop_floor_cc(self.r, self.proc)

    def pids(self) -> Dict[str, int]:
        return {}

    def end_window(self) -> None:
        pass

    def snapshot(self) -> Dict[str, int]:
        return _run_stats(self.prog)

    def finish(self, d: Dict[str, int], dt: float) -> Dict[str, object]:
        self._stop()
        acks = d["run_cnt"]
        return {
            "congestion_control": FLOOR_CC,
            "acks_per_s": acks / dt,
            "bpf_ns_per_ack": d["run_time_ns"] / acks if acks else None,
        }


#: `ccswitch-ovs`'s frame slab by default (its --slab-slots), sized for 1,000 flows with
#: 64-segment windows, and the bytes of one slot (FRAME_MAX), the most a frame it holds can be.
DEFAULT_SLAB_SLOTS, FRAME_SLOT_BYTES = 65_536, 1536
#: Slots a scale run gives each flow: each holds its unacknowledged frames, those waiting in
#: the bridge's queue included (10k flows held 38k slots at the end of a run; 16 per flow ran
#: none out).
SLAB_SLOTS_PER_FLOW = 16


class OvsSide:
    """The ovs datapath: the agent and `ccswitch-ovs` on the bridge port in front of a
    stock-Cubic server; figures from the port programs, their stats map and the shim's stats
    file."""

    def __init__(self, r: Runner, flows: int) -> None:
        self.r = r
        r.prepare_scheme(r.sc.schemes[0])
        shim = r.ovs_shim
        shim.max_flows = max(100_000, 2 * flows)
        slots = max(DEFAULT_SLAB_SLOTS, SLAB_SLOTS_PER_FLOW * flows)
        # a byte budget the slab always runs out of first
        shim.extra_args = ["--slab-slots", str(slots), "--total-buffer-bytes", str(slots * FRAME_SLOT_BYTES)]
        shim.start("scale")
        progs = _programs(_logged_ids(shim.log_path, r"programs=(\S+)"))
        self.programs = progs
        self.progs = {name: progs[name]["id"] for name in ("ccsw_ingress", "ccsw_egress")}
        self.stats_map = _map_named(progs["ccsw_egress"], "stats")["id"]
        # at its end the shim keeps the window's figures for its stats file
        self.window = ShimWindow(shim.proc.pid, shim.log_path, "measurement window window=")

    def pids(self) -> Dict[str, int]:
        return {"shim": self.r.ovs_shim.proc.pid, "agent": self.r.daemons.agent.pid}

    def end_window(self) -> None:
        self.window.end()

    def snapshot(self) -> Dict[str, int]:
        out = _per_cpu_counters(self.stats_map)
        fabric = self.r.ovs_shim.fabric
        bridge = fabric.packet_socket_drops()
        out["bridge_drops_from_server"] = bridge.get(fabric.server_port, 0)
        out["bridge_drops_from_clients"] = bridge.get(fabric.uplink, 0)
        for name, pid in self.progs.items():
            for k, v in _run_stats(pid).items():
                out[f"{name}_{k}"] = v
        return out

    def finish(self, d: Dict[str, int], dt: float) -> Dict[str, object]:
        shim = self.r.ovs_shim
        status = shim.stop()
        with open(shim.stats_path) as f:
            doc = json.load(f)
        st, window = doc["shim"], doc.get("window") or {}
        lat, reasons = window.get("answer_latency_us", {}), window.get("fallbacks", {})
        per = lambda prog: (d[f"{prog}_run_time_ns"] / d[f"{prog}_run_cnt"]) if d.get(f"{prog}_run_cnt") else None
        return {
            "packets_per_s": (d.get("ccsw_ingress_run_cnt", 0) + d.get("ccsw_egress_run_cnt", 0)) / dt,
            "acks_per_s": d.get("acks", 0) / dt,
            "bpf_ns_per_packet_ingress": per("ccsw_ingress"),
            "bpf_ns_per_packet_egress": per("ccsw_egress"),
            # the egress program is the one that runs on each ACK
            "bpf_ns_per_ack": per("ccsw_egress"),
            "acks_rewritten_per_s": d.get("acks_rewritten", 0) / dt,
            # the standard program folded in the egress program: ACKs that never went up,
            # and the fold's reports
            "acks_folded_per_s": d.get("acks_folded", 0) / dt,
            "folded_reports_per_s": d.get("folded_reports", 0) / dt,
            "segments_copied_per_s": d.get("segments", 0) / dt,
            # frames Open vSwitch's packet sockets dropped (it fell behind): the testbed's own
            # losses, which the shim recovers as if the path had lost them
            "bridge_drops_from_server_per_s": d.get("bridge_drops_from_server", 0) / dt,
            "bridge_drops_from_clients_per_s": d.get("bridge_drops_from_clients", 0) / dt,
            "ring_records_lost": d.get("ring_drops", 0),
            "flows_unbuffered": d.get("unbuffered", 0),
            "flows_seen_by_shim": st.get("flows", 0),
            "flows_fallen_back": sum(reasons.values()),
            "fallback_reasons": reasons,
            "flows_fallen_back_whole_run": sum((st.get("fallbacks") or {}).values()),
            "directives_refused": st.get("directives_refused", 0),
            "answer_p50_us": lat.get("all", {}).get("p50"),
            "answer_p99_us": lat.get("all", {}).get("p99"),
            "answer_p999_us": lat.get("all", {}).get("p999"),
            "urgent_answers": lat.get("urgent", {}).get("count"),
            "urgent_p99_us": lat.get("urgent", {}).get("p99"),
            "reports_untimed": window.get("untimed"),
            "reports_awaiting_at_end": window.get("awaiting"),
            "reports_dropped": st.get("reports_dropped", 0),
            "agent_errors": st.get("agent_errors", 0),
            "shim_exit": status,
        }


def scale(flows: int, seconds: float, rate_kbps: float, delay_ms: int, out_dir: str, *,
          datapath: str = "kernel", algorithm: str = "cubic", ramp_s: Optional[float] = None,
          quiet: bool = False, agent_transport: Optional[str] = None, loss_pct: float = 0.0,
          own_cpu: bool = False, delay_queue_packets: Optional[int] = None, floor: bool = False) -> Dict[str, object]:
    """One run; `agent_transport` (daemons.AGENT_TRANSPORTS, default as for any run) says how
    the kernel shim reaches the agent; `loss_pct` drops that share of the server's packets at
    random on their way to the clients (PathLoss). `own_cpu` gives the shim and the agent CPU 0
    and the load generator (and mm-delay) the others, so that the testbed's packet processing,
    which runs in softirqs on the CPU of the process that sends, does not interrupt the shim.
    `delay_queue_packets` sizes the delay shell's queues (DelayShell.size_queues; default
    DELAY_QUEUE_PACKETS_PER_FLOW per flow, at least MAHIMAHI_TUN_QUEUE_PACKETS, at most
    TUN_QUEUE_MAX_PACKETS). `floor` runs the
    same load under `ccsw_floor` instead of ccswitch (FloorSide)."""
    if flows < 1 or seconds <= 0 or rate_kbps <= 0 or delay_ms < 0:
        raise RunError("--flows, --seconds and --rate-kbps must be positive, --delay-ms >= 0")
    if delay_queue_packets is None:
        delay_queue_packets = min(TUN_QUEUE_MAX_PACKETS,
                                  max(MAHIMAHI_TUN_QUEUE_PACKETS, DELAY_QUEUE_PACKETS_PER_FLOW * flows))
    if not 1 <= delay_queue_packets <= TUN_QUEUE_MAX_PACKETS:
        raise RunError(f"--delay-queue-packets {delay_queue_packets}: at least 1 and at most "
                       f"{TUN_QUEUE_MAX_PACKETS:,} (the longest queue a TUN device takes)")
    if not 0 <= loss_pct < 100:
        raise RunError(f"--loss-pct {loss_pct:g}: a percentage, at least 0 and below 100")
    if floor and datapath != "kernel":
        raise RunError("--floor: the floor is a kernel congestion control (--datapath kernel)")
    if datapath != "kernel" and agent_transport == "in-process":
        raise RunError("--agent-transport in-process: only the kernel shim hosts the agent")
    ramp_s = ramp_s if ramp_s is not None else max(1.0, flows / 2000)
    sc = scenario(algorithm, delay_ms, datapath)
    r = Runner(sc, out_dir, quiet=quiet, agent_transport=agent_transport if datapath == "kernel" else "socket")
    say = (lambda m: None) if quiet else log
    sockstat0 = tcp_sockstat()
    with torn_down_on_exit(r.teardown):
        r.setup()
        loadgen = os.path.join(r.bin_dir, LOADGEN)
        if not os.access(loadgen, os.X_OK):
            raise RunError(f"{loadgen} not found (build the workspace: cargo build --release)")
        r.sysctls.set("kernel.bpf_stats_enabled", "1")
        side = FloorSide(r) if floor else KernelSide(r) if datapath == "kernel" else OvsSide(r, flows)
        # Room for a burst of every flow at once in each CPU's input backlog: a veth hands each
        # packet to it, and at the default (1,000) the synchronised bursts of thousands of
        # flows overflow it. At 100k flows the zero-window probes of the 4 KiB flows and
        # their answers were dropped so often that 18-19k server sockets hit 15 unanswered
        # probes and were aborted (TCPAbortOnTimeout); at 10k flows a third of the reports
        # were of these losses. Drops that remain are counted (softnet_drops_per_s).
        backlog = int(read_sysctl("net.core.netdev_max_backlog"))
        if backlog < flows:
            r.sysctls.set("net.core.netdev_max_backlog", str(flows))
        # Room for every handshake of the ramp in the server's accept and SYN queues.
        r.ns.sysctl("net.core.somaxconn", str(max(4096, flows)))
        r.ns.sysctl("net.ipv4.tcp_max_syn_backlog", str(max(4096, flows)))
        # A process holds at most 20k descriptors here (the hard limit, which this container
        # cannot raise), and one client address reaches a server port from ~28k local ports:
        # a pair of loadgen processes, on a port of their own, per FLOWS_PER_PROCESS flows.
        shards = [min(FLOWS_PER_PROCESS, flows - k) for k in range(0, flows, FLOWS_PER_PROCESS)]
        ports = [LOADGEN_PORT + k for k in range(len(shards))]
        # Past 20k flows, small socket buffers. Either way, room for every flow's buffers in
        # net.ipv4.tcp_mem (machine-wide): at its hard limit receivers drop in-window segments
        # and the kernel resets connections ("TCP: out of memory": 100k flows lost 401 that way
        # at the default). The losses would be the testbed's, not the path's; --loss-pct asks
        # for path losses.
        small = flows > 20_000
        tcp_mem_limit = size_tcp_mem(r, flows * (TCP_MEM_PAGES_PER_SMALL_FLOW if small else TCP_MEM_PAGES_PER_FLOW))
        loss = PathLoss(r, r.ns.server_ip, loss_pct) if loss_pct > 0 else None
        pids = side.pids()
        load_cpus: List[str] = []
        if own_cpu:
            cpus = sorted(os.sched_getaffinity(0))
            if len(cpus) < 2:
                raise RunError("--own-cpu: needs at least 2 CPUs")
            for pid in pids.values():
                pin_process(pid, {cpus[0]})
            load_cpus = ["taskset", "-c", ",".join(map(str, cpus[1:]))]
        for port in ports:
            serve = load_cpus + [loadgen, "serve", "--bind", f"{r.ns.server_ip}:{port}"] + (["--sndbuf", str(SMALL_BUFFER_BYTES)] if small else [])
            r.procs.start_and_wait(
                f"ccswitch-loadgen serve :{port}", r.ns.exec_cmd(serve),
                os.path.join(r.log_dir, f"loadgen-serve-{port}.log"),
                lambda port=port: bool(run(r.ns.exec_cmd(["ss", "-Htln", f"sport = :{port}"])).stdout.strip()),
                timeout_s=10, waiting_for=f"listening on {r.ns.server_ip}:{port}")
        rss0 = {k: rss_kib(pid) for k, pid in pids.items()}
        maps_kib = map_bytes(side.programs, flows) / 1024
        shells: List[DelayShell] = []
        # A delay shell's namespace, where its fetch's sockets are, starts with its counters at 0.
        counters = lambda: {"server": tcp_counters(r.ns.exec_cmd([])), "client": client_counters(shells)}
        tcp0 = {"server": tcp_counters(r.ns.exec_cmd([])), "client": client_counters([]) if delay_ms == 0 else {}}
        fetch_s = seconds + 3.0
        # The window begins once every flow is open and past its first round trips.
        settle_s = ramp_s + 1.0 + 4 * delay_ms / 1000
        say(f"{datapath}: {flows} flows at {rate_kbps:g} kbit/s each over {2 * delay_ms} ms, ramp {ramp_s:g} s, "
            f"window {seconds:g} s, {FLOOR_CC if floor else algorithm}" + (f", {len(shards)} loadgen pairs" if len(shards) > 1 else ""))
        fetches = []
        for port, n in zip(ports, shards):
            cmd = [loadgen, "fetch", "--connect", f"{r.ns.server_ip}:{port}", "--flows", str(n),
                   "--rate-bps", str(int(rate_kbps * 1000)), "--seconds", f"{fetch_s:g}", "--ramp-ms", str(int(ramp_s * 1000)),
                   "--window-from-ms", str(int(settle_s * 1000)), "--window-ms", str(int(seconds * 1000))]
            if small:
                cmd += ["--rcvbuf", str(SMALL_BUFFER_BYTES)]
            # mm-delay forwards every packet through one user-space process, which caps this
            # 2-core machine near 13k ACKs/s whatever the flows ask for; --delay-ms 0 leaves it
            # out (the fetcher runs in the root namespace, a veth away from the server).
            if delay_ms > 0:
                cmd = ["runuser", "-u", MM_USER, "--", "mm-delay", str(delay_ms)] + cmd
            cmd = load_cpus + cmd
            outer_before = set(_outer_devices())
            fetch = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)
            r.procs.track(f"ccswitch-loadgen fetch :{port}", fetch)
            fetches.append(fetch)
            if delay_ms > 0:
                shells.append(DelayShell(fetch.pid, outer_before))
                if delay_queue_packets != MAHIMAHI_TUN_QUEUE_PACKETS:
                    shells[-1].size_queues(delay_queue_packets)
        time.sleep(settle_s)
        for fetch in fetches:
            if fetch.poll() is not None:
                raise RunError(f"ccswitch-loadgen fetch exited early ({fetch.returncode}): {fetch.stderr.read().strip()}")
        side.window.start()
        t0, b0 = time.monotonic(), side.snapshot()
        drops0 = softnet_drops()
        shell_drops0 = delay_shell_drops(shells)
        machine0 = cpu_jiffies()
        lost0 = loss.dropped() if loss else 0
        tcp_mem = PeakSampler(tcp_mem_pages)
        tcp_mem.start()
        window_tcp0 = counters()
        cpu0 = {k: cpu_seconds(pid) for k, pid in pids.items()}
        rss1 = {k: rss_kib(pid) for k, pid in pids.items()}
        time.sleep(seconds)
        t1, b1 = time.monotonic(), side.snapshot()
        drops1 = softnet_drops()
        shell_drops1 = delay_shell_drops(shells)
        machine1 = cpu_jiffies()
        lost1 = loss.dropped() if loss else 0
        tcp_mem.stop()
        cpu1 = {k: cpu_seconds(pid) for k, pid in pids.items()}
        shim_realtime = realtime_priority(pids["shim"]) if "shim" in pids else None
        tcp1 = counters()
        side.end_window()
        reports = []
        for fetch in fetches:
            out, err = fetch.communicate(timeout=fetch_s + 60)
            r.procs.forget(fetch)
            if fetch.returncode != 0:
                raise RunError(f"ccswitch-loadgen fetch failed ({fetch.returncode}): {err.strip()}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
        load = merge_loads(reports)
        # A delay shell's namespace is gone with its fetch: its close is not counted.
        tcp2 = {"server": tcp_counters(r.ns.exec_cmd([])), "client": client_counters([]) if delay_ms == 0 else None}
        dt = t1 - t0
        figures = side.finish({k: b1.get(k, 0) - b0.get(k, 0) for k in b1}, dt)

    sockstat1 = tcp_sockstat()
    cpu = {k: 100 * (cpu1[k] - cpu0[k]) / dt for k in pids}
    result = {
        "datapath": datapath,
        "agent_transport": r.daemons.agent_transport,
        "shim_own_cpu": own_cpu,
        "shim_realtime_priority": shim_realtime,
        "algorithm": FLOOR_CC if floor else algorithm,
        "flows": flows,
        "rate_kbps_per_flow": rate_kbps,
        "rtt_ms": 2 * delay_ms,
        "window_s": round(dt, 3),
        "flows_opened": load["opened"],
        "flows_receiving": load["receiving"],
        "flows_silent": load["silent"],
        "flows_failed": load["failed"],
        "flows_closed_early": load["closed_early"],
        # Every byte each flow read compared with the one the server sent.
        "flows_checked": load["flows_checked"],
        "flows_corrupt": load["corrupt"],
        # Within the window (flows open at its start), and since the last flow opened (which
        # includes the catch-up of the flows that opened last).
        "goodput_mbps": load["window_bits_per_s"] / 1e6,
        "goodput_offered_mbps": flows * rate_kbps / 1e3,
        "goodput_since_all_open_mbps": load["steady_bits_per_s"] / 1e6,
        "flow_kbps_p1": load["window_flow_bps_p1"] / 1e3,
        "flow_kbps_p50": load["window_flow_bps_p50"] / 1e3,
        "flows_below_half_rate": load["window_flows_below_half_rate"],
        "tcp_aborts": _counter_deltas(*({k: tcp_aborts(c) for k, c in t.items()} for t in (tcp0, tcp1))),
        "tcp_aborts_at_close": _counter_deltas(*({k: tcp_aborts(c) for k, c in t.items() if c is not None} for t in (tcp1, tcp2))),
        "server_tcp_per_s": {k: (tcp1["server"][k] - window_tcp0["server"][k]) / dt for k in SENDER_COUNTERS},
        "client_tcp_per_s": {k: (tcp1["client"].get(k, 0) - window_tcp0["client"].get(k, 0)) / dt for k in RECEIVER_COUNTERS},
        # Losses of the testbed (a full input backlog), per second of the window.
        "softnet_drops_per_s": (drops1 - drops0) / dt,
        # Losses of the testbed: packets mm-delay fell behind on (delay_shell_drops), per second.
        "delay_shell_drops_per_s": {k: (shell_drops1[k] - v) / dt for k, v in shell_drops0.items()},
        # How busy the whole machine was in the window (% of all its CPUs; /proc/stat ticks):
        # a shim waits for a CPU when the testbed (veth softirqs, the load generator) fills them.
        "machine_cpu_busy_pct": 100 * (machine1["busy"] - machine0["busy"]) / max(1, machine1["total"] - machine0["total"]),
        "machine_cpu_softirq_pct": 100 * (machine1["softirq"] - machine0["softirq"]) / max(1, machine1["total"] - machine0["total"]),
        # Machine-wide TCP buffer memory: its peak over the window, and the hard limit the run
        # set (size_tcp_mem); at the limit receivers drop segments.
        "tcp_mem_peak_pages": tcp_mem.peak,
        "tcp_mem_limit_pages": tcp_mem_limit,
        # What the run left behind, machine-wide, once torn down (after less before the run):
        # orphaned sockets and their buffers hold tcp_mem for minutes, and the pressure they
        # put on the restored limit slows whatever runs next (the load generator resets its
        # connections as it closes them, so that there are none).
        "tcp_orphans_left": sockstat1["orphan"] - sockstat0["orphan"],
        "tcp_mem_left_pages": sockstat1["mem"] - sockstat0["mem"],
        # Losses asked for (--loss-pct): packets of the server dropped on the way, per second.
        "path_loss_pct": loss_pct,
        "path_drops_per_s": (lost1 - lost0) / dt,
        **figures,
        # in-process, the agent's CPU and memory are the shim's (None: not apart)
        "shim_cpu_pct": cpu.get("shim"),
        "agent_cpu_pct": cpu.get("agent"),
        "shim_agent_cpu_pct": sum(cpu.values()) if cpu else None,
        "shim_kib_per_flow": (rss1["shim"] - rss0["shim"]) / flows if "shim" in pids else None,
        "agent_kib_per_flow": (rss1["agent"] - rss0["agent"]) / flows if "agent" in pids else None,
        # every map, preallocated for --max-flows whatever the flows: per flow of this run
        "maps_kib_per_flow": maps_kib / flows,
        "loadgen_errors": load["errors"],
        "delay_queue_packets": delay_queue_packets if delay_ms > 0 else None,
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "scale.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


def _counter_deltas(before: Dict[str, Dict[str, int]], after: Dict[str, Dict[str, int]]) -> Dict[str, Dict[str, int]]:
    """Per namespace read after, the counters that changed (a counter not read before was 0)."""
    return {ns: {k: v - before[ns].get(k, 0) for k, v in counts.items() if v != before[ns].get(k, 0)}
            for ns, counts in after.items()}


def merge_loads(reports: List[Dict[str, object]]) -> Dict[str, object]:
    """One figure set of several `ccswitch-loadgen fetch` reports: counts and rates add up,
    the first five errors are kept."""
    merged: Dict[str, object] = {k: sum(r[k] for r in reports) for k in ("opened", "receiving", "silent", "failed", "closed_early", "flows_checked", "corrupt", "steady_bits_per_s")}
    merged["errors"] = [e for r in reports for e in r["errors"]][:5]
    windows = [r.get("window") or {} for r in reports]
    merged["window_bits_per_s"] = sum(w.get("bits_per_s", 0.0) for w in windows)
    merged["window_flows_below_half_rate"] = sum(w.get("flows_below_half_rate", 0) for w in windows)
    # per-flow quantiles of several processes: the worst process's low quantile, and the
    # median of the process medians (the processes carry equal shares of the flows)
    merged["window_flow_bps_p1"] = min((w.get("flow_bps_p1", 0.0) for w in windows), default=0.0)
    merged["window_flow_bps_p50"] = statistics.median([w.get("flow_bps_p50", 0.0) for w in windows]) if windows else 0.0
    return merged


def print_scale(x: Dict[str, object]) -> None:
    def fmt(v):
        return f"{v:,.1f}" if isinstance(v, float) else str(v)
    width = max(len(k) for k in x)
    for k, v in x.items():
        print(f"  {k:<{width}}  {fmt(v)}", file=sys.stderr)
