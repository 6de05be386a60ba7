"""The bridged topology of `ovs:` schemes, the ovs datapath's shim, and its figures.

    mahimahi shells            root netns            bridge netns ccsw-sw-T                 server netns ccsw-srv-T
    curl ─ mm-link ─ ... ─NAT─ ccswTg 198.18.N.1 ══ ccswTu ─[ bridge ]─ ccswTr ══ ccswTs 198.18.N.2:8080 nginx
                                                                        ▲ TC programs of ccswitch-ovs

The bridge (Open vSwitch with the userspace datapath, or a Linux bridge) lives in a namespace
of its own, not in the root namespace: the userspace datapath of every ovs-vswitchd in one
namespace is the tap device `ovs-netdev`, so a second private instance in the root namespace
(another run, a test) fails with "creating tap device failed: Device or resource busy". In a
namespace of its own each run has its own `ovs-netdev`. The root namespace joins the bridge
through a veth whose root end carries the gateway address the server routes through; the
bridge namespace itself has no address (a pure layer-2 switch).

Checksum offload is off (`ethtool -K DEV tx off`, which turns TSO off too) on every veth end in
every namespace: Open vSwitch's userspace datapath forwards frames whose checksum was left to
the hardware unfixed (TCP through it fails), and the ovs datapath must see MTU-sized
segments, not 64 KiB GSO super-packets, to keep and retransmit them one by one. Both bridge
kinds get the same treatment so that their figures compare.

Open vSwitch reads its ports with packet sockets, whose receive buffer (net.core.rmem_default,
global: read-only in other namespaces) overflows under load: the run raises it for its
duration.

`OvsShimProcess` runs `ccswitch-ovs run` once per transfer (so each transfer has its own stats
file and log), inside the bridge namespace, against the run's agent; `overhead_rows` turns the
stats files of a run into the figures of its report.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from typing import Dict, List, Optional, Sequence

from .daemons import shim_realtime_args
from .namespaces import (
    Processes, ServerNamespace, SysctlGuard, Teardown, TopologyError, create_netns, log, read_sysctl, run,
)

OVS_SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
OVS_TOOLS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl")
BRIDGE_TOOLS = {"ovs": OVS_TOOLS + ("ethtool",), "linux": ("ethtool",), "none": ()}

#: Receive buffer of Open vSwitch's packet sockets: at 24 Mbit/s a few milliseconds of frames
#: overflow the default 208 KiB when the daemon is descheduled on a 2-core machine. At 10k
#: flows x 100 kbit/s (`bench scale`) Open vSwitch itself is the bottleneck, and this buffer
#: its queue: 8 MiB dropped 10-11k of the server's frames a second, 64 MiB 5.5-6.3k
#: (experiments/measured/ovs-scale-testbed-2026-11-27). At most three sockets use it.
PACKET_RMEM_BYTES = 64 << 20

OVS_BIN = "ccswitch-ovs"
#: The shim's log line once its programs sit on the port.
ATTACHED_RE = re.compile(r"\battached\b")


def ethtool_tx_off(dev: str, netns: Optional[str] = None) -> None:
    cmd = ["ethtool", "-K", dev, "tx", "off"]
    run(["ip", "netns", "exec", netns] + cmd if netns else cmd)


class BridgeFabric:
    """The bridge namespace, its bridge and the root namespace's veth into it."""

    def __init__(self, kind: str, teardown: Teardown, procs: Processes, sysctls: SysctlGuard, workdir: str,
                 log_dir: str, tag: Optional[str] = None) -> None:
        if kind not in ("ovs", "linux"):
            raise ValueError(f"bridge kind {kind!r}")
        tag = tag or str(os.getpid())
        self.kind = kind
        self.teardown, self.procs, self.sysctls = teardown, procs, sysctls
        self.workdir, self.log_dir = workdir, log_dir
        self.ns_name = f"ccsw-sw-{tag}"
        self.bridge = f"ccswbr{tag}"[:15]
        self.uplink = f"ccsw{tag}u"[:15]    # bridge-namespace end of the root link
        self.gateway = f"ccsw{tag}g"[:15]   # root end, carries the server subnet's gateway address
        self.server_port: Optional[str] = None  # bridge-namespace end of the server's veth
        self.ovs_dir = os.path.join(workdir, "ovs")
        self.ovsdb: Optional[subprocess.Popen] = None
        self.vswitchd: Optional[subprocess.Popen] = None

    # -- namespace and links ---------------------------------------------------
    def exec_cmd(self, cmd: Sequence[str]) -> List[str]:
        return ["ip", "netns", "exec", self.ns_name] + list(cmd)

    def create_namespace(self) -> None:
        """First step: the namespace and the root namespace's link into it. Then the server's
        namespace puts its outer veth end in here and its gateway address on `self.gateway`
        (`ServerNamespace.create(outer_netns=self.ns_name, gateway_dev=self.gateway)`)."""
        create_netns(self.ns_name, self.teardown)
        x = self.exec_cmd
        run(x(["ip", "link", "set", "lo", "up"]))
        # A switch speaks no IPv6 of its own (no router solicitations among the test traffic).
        run(x(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"]), check=False)
        run(x(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"]), check=False)
        run(["ip", "link", "add", self.gateway, "type", "veth", "peer", "name", self.uplink])
        self.teardown.push(f"delete veth {self.gateway}", self._delete_gateway)
        run(["ip", "link", "set", self.uplink, "netns", self.ns_name])
        run(x(["ip", "link", "set", self.uplink, "up"]))

    def connect(self, server: ServerNamespace) -> None:
        """Last step: offloads off, the bridge between the server's port and the uplink."""
        self.server_port = server.veth_root
        ethtool_tx_off(self.gateway)
        ethtool_tx_off(self.uplink, self.ns_name)
        ethtool_tx_off(self.server_port, self.ns_name)
        ethtool_tx_off(server.veth_srv, server.name)
        if self.kind == "ovs":
            self._start_ovs()
        else:
            self._start_linux_bridge()

    def _delete_gateway(self) -> None:
        if os.path.exists(f"/sys/class/net/{self.gateway}"):
            run(["ip", "link", "del", self.gateway], check=False)

    # -- Linux bridge -----------------------------------------------------------
    def _start_linux_bridge(self) -> None:
        x = self.exec_cmd
        # forward_delay 0 with STP off: ports forward at once instead of after 15 s of learning
        run(x(["ip", "link", "add", self.bridge, "type", "bridge", "stp_state", "0", "forward_delay", "0"]))
        for port in (self.server_port, self.uplink):
            run(x(["ip", "link", "set", port, "master", self.bridge]))
        run(x(["ip", "link", "set", self.bridge, "up"]))

    # -- Open vSwitch -------------------------------------------------------------
    def packet_socket_drops(self) -> Dict[str, int]:
        """Frames each port's packet socket dropped since it was opened, because Open vSwitch
        had not read its receive buffer in time (the socket's `sk_drops`, from `ss`): the
        bridge's own losses, which no TCP counter or link statistic shows. By port name."""
        out = run(self.exec_cmd(["ss", "--packet", "--all", "--memory"])).stdout
        drops: Dict[str, int] = {}
        for line in out.splitlines()[1:]:
            fields = line.split()  # Netid State Recv-Q Send-Q protocol:port peer skmem:(...)
            skmem = re.search(r"skmem:\(.*\bd(\d+)\)", line)
            if len(fields) > 4 and skmem:
                port = fields[4].rsplit(":", 1)[-1]
                drops[port] = drops.get(port, 0) + int(skmem.group(1))
        return drops

    @property
    def ovs_env(self) -> Dict[str, str]:
        return dict(os.environ, OVS_RUNDIR=self.ovs_dir, OVS_DBDIR=self.ovs_dir, OVS_LOGDIR=self.log_dir)

    @property
    def db_socket(self) -> str:
        return os.path.join(self.ovs_dir, "db.sock")

    def vsctl(self, *args: str, timeout_s: float = 20.0, wait: bool = True) -> str:
        cmd = ["ovs-vsctl", f"--db=unix:{self.db_socket}", f"--timeout={int(timeout_s)}"]
        if not wait:
            cmd.append("--no-wait")
        cp = subprocess.run(cmd + list(args), capture_output=True, text=True, timeout=timeout_s + 5,
                            env=self.ovs_env)
        if cp.returncode != 0:
            raise TopologyError(f"ovs-vsctl {' '.join(args)}: {(cp.stderr or cp.stdout).strip()}")
        return cp.stdout.strip()

    def _start_ovs(self) -> None:
        os.makedirs(self.ovs_dir, exist_ok=True)
        # OVS opens the ports' packet sockets when they are added: the buffer size must be in
        # place before that.
        if int(read_sysctl("net.core.rmem_max")) < PACKET_RMEM_BYTES:
            self.sysctls.set("net.core.rmem_max", str(PACKET_RMEM_BYTES))
        if int(read_sysctl("net.core.rmem_default")) < PACKET_RMEM_BYTES:
            self.sysctls.set("net.core.rmem_default", str(PACKET_RMEM_BYTES))
        db = os.path.join(self.ovs_dir, "conf.db")
        run(["ovsdb-tool", "create", db, OVS_SCHEMA])
        env = self.ovs_env
        # Both daemons run in the foreground under Processes (their own process groups), so the
        # teardown stops them by PID; ovs-vswitchd in the bridge namespace, where its ports are.
        self.ovsdb = self.procs.start_and_wait(
            "ovsdb-server", ["ovsdb-server", db, f"--remote=punix:{self.db_socket}",
                             f"--unixctl={os.path.join(self.ovs_dir, 'ovsdb-server.ctl')}",
                             f"--log-file={os.path.join(self.log_dir, 'ovsdb-server.log')}", "-vconsole:off"],
            os.path.join(self.log_dir, "ovsdb-server.out"), lambda: os.path.exists(self.db_socket),
            timeout_s=15.0, waiting_for=f"its socket {self.db_socket}", env=env)
        self.teardown.push("stop ovsdb-server", lambda: self._stop_daemon("ovsdb"))
        self.vsctl("init", wait=False)
        ctl = os.path.join(self.ovs_dir, "ovs-vswitchd.ctl")
        self.teardown.push("stop ovs-vswitchd", lambda: self._stop_daemon("vswitchd"))
        self.vswitchd = self.procs.start_and_wait(
            "ovs-vswitchd", self.exec_cmd(["ovs-vswitchd", f"unix:{self.db_socket}", f"--unixctl={ctl}",
                                           f"--log-file={os.path.join(self.log_dir, 'ovs-vswitchd.log')}",
                                           "-vconsole:off"]),
            os.path.join(self.log_dir, "ovs-vswitchd.out"), lambda: os.path.exists(ctl),
            timeout_s=15.0, waiting_for=f"its operator socket {ctl}", env=env)
        self.teardown.push(f"delete OVS bridge {self.bridge}", self._delete_ovs_bridge)
        # Without --no-wait, ovs-vsctl returns once ovs-vswitchd has applied the change.
        self.vsctl("add-br", self.bridge, "--", "set", "bridge", self.bridge, "datapath_type=netdev")
        for port in (self.server_port, self.uplink):
            self.vsctl("add-port", self.bridge, port)
        for iface in (self.bridge, self.server_port, self.uplink):
            error = self.vsctl("get", "interface", iface, "error").strip('"[]')
            ofport = self.vsctl("get", "interface", iface, "ofport")
            if error or not ofport.lstrip("-").isdigit() or int(ofport) < 0:
                raise TopologyError(f"OVS could not open {iface} (ofport {ofport}, error {error!r}); "
                                    f"see {self.log_dir}/ovs-vswitchd.log")
        if self.vswitchd.poll() is not None:
            raise TopologyError(f"ovs-vswitchd exited with status {self.vswitchd.returncode}; "
                                f"see {self.log_dir}/ovs-vswitchd.log")

    def _delete_ovs_bridge(self) -> None:
        if self.vswitchd is not None and self.vswitchd.poll() is None and self.ovsdb.poll() is None:
            self.vsctl("--if-exists", "del-br", self.bridge, timeout_s=10.0)

    def _stop_daemon(self, which: str) -> None:
        proc = self.vswitchd if which == "vswitchd" else self.ovsdb
        if proc is not None:
            self.procs.stop(proc, grace_s=5.0)

    def daemon_pids(self) -> Dict[str, int]:
        return {name: p.pid for name, p in (("ovs-vswitchd", self.vswitchd), ("ovsdb-server", self.ovsdb))
                if p is not None}

    # -- inspection -----------------------------------------------------------------
    def link_stats(self, dev: str) -> Dict[str, int]:
        """The kernel's counters of an interface of the bridge namespace (rx/tx packets, bytes,
        drops)."""
        cp = run(self.exec_cmd(["ip", "-s", "-s", "-j", "link", "show", "dev", dev]))
        st = json.loads(cp.stdout)[0]["stats64"]
        return {f"{d}_{k}": int(st[d][k]) for d in ("rx", "tx") for k in ("packets", "bytes", "dropped")}

    def ovs_port_stats(self, port: str) -> Dict[str, int]:
        """Open vSwitch's own counters of a port, live from ovs-vswitchd (the database's copy
        lags by seconds): rx = received from the port's device, tx = sent out through it."""
        cp = subprocess.run(["ovs-ofctl", "dump-ports", self.bridge, port], capture_output=True, text=True,
                            timeout=10, env=self.ovs_env)
        if cp.returncode != 0:
            raise TopologyError(f"ovs-ofctl dump-ports {self.bridge} {port}: {cp.stderr.strip()}")
        out = {}
        for d in ("rx", "tx"):
            m = re.search(rf"{d} pkts=(\d+), bytes=(\d+), drop=(\d+)", cp.stdout)
            if not m:
                raise TopologyError(f"unexpected ovs-ofctl output: {cp.stdout!r}")
            out.update({f"{d}_packets": int(m.group(1)), f"{d}_bytes": int(m.group(2)),
                        f"{d}_dropped": int(m.group(3))})
        return out

    def describe(self) -> str:
        what = f"{self.kind} bridge {self.bridge}"
        if self.kind == "ovs":
            what += " (" + ", ".join(f"{n} pid {p}" for n, p in self.daemon_pids().items()) + ")"
        return f"bridge netns {self.ns_name}: {what}, server port {self.server_port}, gateway {self.gateway}"


# ----------------------------------------------------------------------- the shim


class OvsShimProcess:
    """`ccswitch-ovs run` on the bridge's server-facing port, one instance per transfer."""

    def __init__(self, procs: Processes, fabric: BridgeFabric, daemons, bin_dir: str, out_dir: str,
                 log_dir: str, *, attach_timeout_s: float = 30.0) -> None:
        self.procs, self.fabric, self.daemons = procs, fabric, daemons
        self.bin = os.path.join(bin_dir, OVS_BIN)
        self.out_dir, self.log_dir = out_dir, log_dir
        self.stats_dir = os.path.join(out_dir, "ovs")
        self.attach_timeout_s = attach_timeout_s
        #: --max-flows for the shim (None: its default)
        self.max_flows: Optional[int] = None
        #: further arguments of `ccswitch-ovs run`
        self.extra_args: List[str] = []
        self.proc: Optional[subprocess.Popen] = None
        self.log_path: Optional[str] = None
        self.stats_path: Optional[str] = None
        self._starts = 0

    def start(self, label: str) -> None:
        """Start the shim and return once its programs are attached and it has reached the
        agent (a flow that starts earlier would run uncontrolled)."""
        if self.proc is not None:
            self.stop()
        os.makedirs(self.stats_dir, exist_ok=True)
        self._starts += 1
        safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)
        self.log_path = os.path.join(self.log_dir, f"ovs-{self._starts:03d}-{safe}.log")
        self.stats_path = os.path.join(self.stats_dir, f"{self._starts:03d}-{safe}.json")
        cmd = [self.bin, "run", "--port", self.fabric.server_port, "--agent-socket", self.daemons.shim_socket,
               "--stats-file", self.stats_path, "--log-level", self.daemons.log_level]
        if self.max_flows is not None:
            cmd += ["--max-flows", str(self.max_flows)]
        cmd += self.extra_args + shim_realtime_args()
        connected_before = self.daemons.datapath_connections()
        self.proc = self.procs.start_and_wait(
            OVS_BIN, self.fabric.exec_cmd(cmd), self.log_path, lambda: self._logged(ATTACHED_RE),
            timeout_s=self.attach_timeout_s, waiting_for=f"attaching to {self.fabric.server_port}",
            env=self.daemons.env)
        deadline = time.monotonic() + 5.0
        while self.daemons.datapath_connections() <= connected_before:
            if self.proc.poll() is not None:
                raise TopologyError(f"{OVS_BIN} exited with status {self.proc.returncode} after attaching; "
                                    f"see {self.log_path}")
            if time.monotonic() > deadline:
                log(f"warning: {OVS_BIN} attached but the agent logged no new datapath connection "
                    f"within 5 s; see {self.log_path}")
                break
            time.sleep(0.02)

    def _logged(self, pattern: re.Pattern) -> bool:
        try:
            with open(self.log_path, errors="replace") as f:
                return bool(pattern.search(f.read()))
        except FileNotFoundError:
            return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> Optional[int]:
        """SIGTERM (the shim detaches, writes its stats file and exits); returns its exit status,
        None if it was not running."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        self.procs.stop(proc, sig=signal.SIGTERM, grace_s=10.0)
        return proc.returncode

    def log_text(self) -> str:
        if not self.log_path or not os.path.exists(self.log_path):
            return ""
        with open(self.log_path, errors="replace") as f:
            return f.read()


def load_stats(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (FileNotFoundError, json.JSONDecodeError):
        return None


# ----------------------------------------------------------------------- figures


def normalize_stats(doc: dict) -> dict:
    """One view of a stats file: `stats` (the port programs' counters), `prog_stats`, `totals`
    (the shim's counters, flat: retransmissions_fast/_rack/_timeout, fallbacks as a count and
    fallback_reasons by reason), `cpu_ms`, `buffer_samples` and `max_buffered_segments` (the
    largest buffer of any one flow). ccswitch-ovs writes the counters under `datapath` and
    `shim`, with nested retransmissions and fallbacks by reason, the CPU time as
    `shim_cpu_ms` and the buffer under `buffer`; the flat names are accepted too."""
    shim = dict(doc.get("shim") or doc.get("totals") or {})
    retx = shim.pop("retransmissions", None)
    if isinstance(retx, dict):
        for kind in ("fast", "rack", "timeout"):
            shim[f"retransmissions_{kind}"] = int(retx.get(kind) or 0)
    for kind in ("fast", "rack", "timeout"):
        shim.setdefault(f"retransmissions_{kind}", 0)
    fallbacks = shim.get("fallbacks") or 0
    if isinstance(fallbacks, dict):
        shim["fallback_reasons"] = dict(fallbacks)
        shim["fallbacks"] = sum(int(v) for v in fallbacks.values())
    else:
        shim["fallbacks"] = int(fallbacks)
    buffer = doc.get("buffer") or {}
    samples = buffer.get("samples", doc.get("buffer_samples")) or []
    per_flow = [int(m.get("segments") or 0) for m in buffer.get("max_per_flow") or []]
    per_flow += [int(x.get("segments") or 0) for x in samples]
    cpu = doc.get("shim_cpu_ms", doc.get("cpu_ms"))
    return {
        "stats": doc.get("datapath") or doc.get("stats") or {},
        "prog_stats": doc.get("prog_stats") or [],
        "totals": shim,
        "cpu_ms": float(cpu) if cpu is not None else None,
        "buffer_samples": samples,
        "max_buffered_segments": max(per_flow, default=0),
    }


def transfer_figures(doc: dict) -> Dict[str, Optional[float]]:
    """The overhead and control figures of one transfer's stats file."""
    n = normalize_stats(doc)
    st, totals, progs = n["stats"], n["totals"], n["prog_stats"]
    run_ns = sum(int(p.get("run_time_ns") or 0) for p in progs)
    runs = sum(int(p.get("run_cnt") or 0) for p in progs)
    packets = int(st.get("packets") or 0)
    retx = sum(totals[f"retransmissions_{k}"] for k in ("fast", "rack", "timeout"))
    return {
        "packets": packets,
        "bpf_ns_per_packet": (run_ns / packets) if packets and runs else None,
        "bpf_ns_per_run": (run_ns / runs) if runs else None,
        "cpu_ms": n["cpu_ms"],
        "max_buffered_segments": n["max_buffered_segments"],
        "acks_rewritten": int(st.get("acks_rewritten") or 0),
        "dupacks_hidden": int(st.get("dupacks_hidden") or 0),
        "retransmissions": retx,
        "fallbacks": totals["fallbacks"],
    }


def overhead_rows(rows: Sequence[dict], out_dir: str) -> List[dict]:
    """Per (client, scheme) of a run's `ovs:` transfers: means of the BPF cost per packet, the
    shim's CPU time and the retransmissions, and the largest per-flow buffer seen."""
    groups: Dict[tuple, List[dict]] = {}
    for r in rows:
        rel = r.get("ovs_stats")
        if not rel:
            continue
        doc = load_stats(os.path.join(out_dir, rel))
        if doc is None:
            continue
        groups.setdefault((r["client"], r["scheme"]), []).append(transfer_figures(doc))

    def mean(xs):
        xs = [x for x in xs if x is not None]
        return sum(xs) / len(xs) if xs else None

    out = []
    for (client, scheme), figs in groups.items():
        out.append({
            "client": client, "scheme": scheme, "transfers": len(figs),
            "bpf_ns_per_packet": mean(f["bpf_ns_per_packet"] for f in figs),
            "shim_cpu_ms": mean(f["cpu_ms"] for f in figs),
            "max_buffered_segments": max(f["max_buffered_segments"] for f in figs),
            "acks_rewritten": mean(f["acks_rewritten"] for f in figs),
            "dupacks_hidden": mean(f["dupacks_hidden"] for f in figs),
            "retransmissions": mean(f["retransmissions"] for f in figs),
            "fallbacks": sum(f["fallbacks"] for f in figs),
        })
    return out


def format_overhead(rows: Sequence[dict]) -> str:
    head = ("client", "scheme", "n", "BPF ns/pkt", "shim CPU ms", "max buf segs", "ACKs rewritten",
            "dupACKs hidden", "retx", "fallbacks")

    def f(x, fmt="{:.0f}"):
        return "-" if x is None else fmt.format(x)

    lines = [head] + [(r["client"], r["scheme"], str(r["transfers"]), f(r["bpf_ns_per_packet"]),
                       f(r["shim_cpu_ms"], "{:.1f}"), str(r["max_buffered_segments"]), f(r["acks_rewritten"]),
                       f(r["dupacks_hidden"]), f(r["retransmissions"], "{:.1f}"), str(r["fallbacks"]))
                      for r in rows]
    widths = [max(len(l[i]) for l in lines) for i in range(len(head))]
    text = ["  ".join(c.ljust(w) for c, w in zip(l, widths)).rstrip() for l in lines]
    return "\n".join(["ovs datapath (means per transfer)"] + text)
