"""The bridged topology of ovs experiments, for real: a native-scheme transfer crosses a
private Open vSwitch (or a Linux bridge) in the bridge namespace intact, and the teardown
leaves nothing behind, after a normal end, an interrupt, or a failed start. Needs root,
mahimahi, nginx and openvswitch-switch (scripts/setup.sh); fails rather than skips without
them. No Rust binary is involved."""

import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from ccswitch.experiments import runner, scenario
from ccswitch.topology.bridges import BridgeFabric
from ccswitch.topology.namespaces import Teardown, create_netns, read_sysctl
from test_integration import assert_torn_down, created_objects, netns_list, pid_alive, require_machine, start_cli

FILE_BYTES = 2_000_000
#: every data frame of the transfer crosses the bridge (plus handshake and ACKs the other way)
MIN_FRAMES = FILE_BYTES // 1500

SCENARIO = """
name = "bridge-{bridge}"
repetitions = 1
schemes = ["native:cubic"]
bridge = "{bridge}"
timeout_s = 60
[[clients]]
name = "wan-20ms"
delay_ms = 10
link = {{ mbps = 24 }}
queue_packets = 100
file_bytes = {size}
"""

SYSCTLS = ("net.core.rmem_default", "net.core.rmem_max", "net.ipv4.tcp_allowed_congestion_control",
           "net.ipv4.ip_forward")


def require_bridge_tools():
    require_machine()
    missing = [t for t in ("ovs-vsctl", "ovs-vswitchd", "ovsdb-server", "ovsdb-tool", "ethtool")
               if shutil.which(t) is None]
    if missing:
        pytest.fail(f"ovs topology tests need openvswitch-switch and ethtool (scripts/setup.sh): {missing}")


def links(netns=None):
    cmd = ["ip", "-o", "link", "show"]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    return subprocess.run(cmd, capture_output=True, text=True).stdout


def offloads_off(dev, netns=None):
    cmd = ["ethtool", "-k", dev]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return ("tx-checksumming: off" in out and "tx-tcp-segmentation: off" in out
            and "tx-tcp6-segmentation: off" in out), out


def run_one_transfer(tmp_path, bridge):
    """Set up the runner, make one transfer, return (runner, row, counters before/after)."""
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(bridge=bridge, size=FILE_BYTES))
    sc = scenario.load_scenario(str(path))
    r = runner.Runner(sc, str(tmp_path / "out"), quiet=True)
    r.setup()
    r.prepare_scheme(sc.schemes[0])
    f = r.fabric
    before = {d: f.link_stats(d) for d in (f.server_port, f.uplink)}
    row = r.transfer(0, sc.clients[0], sc.schemes[0], FILE_BYTES)
    after = {d: f.link_stats(d) for d in (f.server_port, f.uplink)}
    return r, row, before, after


def check_common(r, row, before, after):
    f = r.fabric
    assert row["error"] is None and row["sha256_ok"], row
    assert row["bytes"] == FILE_BYTES
    assert row["cc_observed"] in (None, "cubic")
    # The server's frames entered the bridge at its port and left through the uplink, and the
    # clients' frames the other way: the bridge carried the transfer.
    d = {dev: {k: after[dev][k] - before[dev][k] for k in after[dev]} for dev in after}
    assert d[f.server_port]["rx_packets"] >= MIN_FRAMES, d
    assert d[f.uplink]["tx_packets"] >= MIN_FRAMES, d
    assert d[f.server_port]["tx_packets"] > 0 and d[f.uplink]["rx_packets"] > 0, d
    assert d[f.server_port]["rx_bytes"] >= FILE_BYTES, d
    # The root namespace reaches the server only through the gateway veth into the bridge namespace.
    assert f.server_port not in links(), "the server's outer veth end must be in the bridge namespace"
    addrs = subprocess.run(["ip", "-o", "-4", "addr", "show", "dev", f.gateway], capture_output=True, text=True).stdout
    assert f"{r.ns.root_ip}/30" in addrs, addrs
    for dev, ns in ((f.gateway, None), (f.uplink, f.ns_name), (f.server_port, f.ns_name), (r.ns.veth_srv, r.ns.name)):
        ok, out = offloads_off(dev, ns)
        assert ok, f"{dev}: checksum offload / TSO still on:\n{out}"
    assert int(read_sysctl("net.core.rmem_default")) >= 8 << 20 or f.kind == "linux"
    return d


def check_torn_down(r, extra_pids=()):
    f = r.fabric
    assert r.ns.name not in netns_list().split() and f.ns_name not in netns_list().split()
    assert not os.path.exists(f"/run/netns/{f.ns_name}")
    root_links = links()
    for dev in (f.gateway, f.uplink, f.server_port, f.bridge):
        assert f"{dev}:" not in root_links and f"{dev}@" not in root_links, f"{dev} left in the root namespace"
    for pid in list(f.daemon_pids().values()) + list(extra_pids):
        assert not pid_alive(pid), f"pid {pid} left running"
    assert not os.path.exists(r.work)


def test_native_transfer_through_private_ovs(tmp_path):
    require_bridge_tools()
    sysctls_before = {k: read_sysctl(k) for k in SYSCTLS}
    r = None
    try:
        r, row, before, after = run_one_transfer(tmp_path, "ovs")
        f = r.fabric
        assert f.kind == "ovs" and set(f.daemon_pids()) == {"ovs-vswitchd", "ovsdb-server"}
        check_common(r, row, before, after)
        # Open vSwitch itself forwarded them (its own port counters), in the userspace datapath.
        ovs_rx = f.ovs_port_stats(f.server_port)["rx_packets"]
        ovs_tx = f.ovs_port_stats(f.uplink)["tx_packets"]
        assert ovs_rx >= MIN_FRAMES and ovs_tx >= MIN_FRAMES, (ovs_rx, ovs_tx)
        assert f.vsctl("get", "bridge", f.bridge, "datapath_type") == "netdev"
        assert sorted(f.vsctl("list-ports", f.bridge).split()) == sorted([f.server_port, f.uplink])
        # its two packet sockets are found, and every frame they dropped is counted
        drops = f.packet_socket_drops()
        assert {f.server_port, f.uplink} <= set(drops) and min(drops.values()) >= 0, drops
        # the OVS datapath device of this run is in its own namespace, not the root's
        assert "ovs-netdev" in links(f.ns_name)
        # the daemons run from the run's private directories, not the system's
        for pid in f.daemon_pids().values():
            assert r.work in open(f"/proc/{pid}/cmdline").read().replace("\0", " ")
    finally:
        if r is not None:
            r.teardown.run()
    check_torn_down(r)
    assert {k: read_sysctl(k) for k in SYSCTLS} == sysctls_before


def test_native_transfer_through_linux_bridge(tmp_path):
    require_bridge_tools()
    sysctls_before = {k: read_sysctl(k) for k in SYSCTLS}
    r = None
    try:
        r, row, before, after = run_one_transfer(tmp_path, "linux")
        f = r.fabric
        assert f.kind == "linux" and f.daemon_pids() == {}
        check_common(r, row, before, after)
        for port in (f.server_port, f.uplink):
            master = subprocess.run(["ip", "netns", "exec", f.ns_name, "readlink", f"/sys/class/net/{port}/master"],
                                    capture_output=True, text=True).stdout.strip()
            assert master.endswith("/" + f.bridge), (port, master)
    finally:
        if r is not None:
            r.teardown.run()
    check_torn_down(r)
    assert {k: read_sysctl(k) for k in SYSCTLS} == sysctls_before


def bridge_objects(stderr):
    m = re.search(r"bridge netns (\S+): ovs bridge \S+ \(ovs-vswitchd pid (\d+), ovsdb-server pid (\d+)\)", stderr)
    assert m, stderr
    return m.group(1), int(m.group(2)), int(m.group(3))


def test_interrupted_ovs_run_is_torn_down(tmp_path):
    require_bridge_tools()
    sysctls_before = {k: read_sysctl(k) for k in SYSCTLS}
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(bridge="ovs", size=30_000_000))
    out = tmp_path / "out"
    proc = start_cli([str(path), "--out", str(out)])
    deadline = time.monotonic() + 60
    while not (out / "transfers.jsonl").exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(2.0)  # into the transfer
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, stderr
    netns, nginx_pid, work = created_objects(stderr)
    sw_ns, vswitchd, ovsdb = bridge_objects(stderr)
    assert_torn_down(netns, nginx_pid, work)
    assert sw_ns not in netns_list().split()
    assert not pid_alive(vswitchd) and not pid_alive(ovsdb)
    assert {k: read_sysctl(k) for k in SYSCTLS} == sysctls_before


def test_failed_ovs_start_is_torn_down(tmp_path):
    """An ovs-vswitchd that dies at start: a clear error, and the namespaces, the gateway
    link and the already running ovsdb-server are gone."""
    require_bridge_tools()
    stub = tmp_path / "bin"
    stub.mkdir()
    (stub / "ovs-vswitchd").write_text("#!/bin/sh\necho 'stand-in ovs-vswitchd: cannot start' >&2\nexit 1\n")
    (stub / "ovs-vswitchd").chmod(0o755)
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(bridge="ovs", size=FILE_BYTES))
    out = tmp_path / "out"
    ns_before = set(netns_list().split())
    old_path = os.environ["PATH"]
    os.environ["PATH"] = f"{stub}{os.pathsep}{old_path}"
    try:
        proc = start_cli([str(path), "--out", str(out)])
        _, stderr = proc.communicate(timeout=120)
    finally:
        os.environ["PATH"] = old_path
    assert proc.returncode == 1, stderr
    assert "ovs-vswitchd exited with status 1 before its operator socket" in stderr
    assert "cannot start" in (out / "logs" / "ovs-vswitchd.out").read_text()
    new_ns = {n for n in set(netns_list().split()) - ns_before if n.startswith("ccsw-")}
    assert not new_ns, new_ns
    # this run's daemons name its log directory on their command lines
    ps = subprocess.run(["ps", "-eww", "-o", "stat=,args="], capture_output=True, text=True).stdout
    left = [l for l in ps.splitlines() if str(out) in l and not l.startswith("Z")]
    assert not left, left
    assert not (out / "transfers.parquet").exists()


def test_frames_a_packet_socket_could_not_take_are_counted_as_its_ports_drops(tmp_path):
    """The bridge's own losses: a packet socket with a 4 KiB receive buffer, never read, keeps
    the first frames sent to its port; `packet_socket_drops` counts the rest, by port."""
    require_bridge_tools()
    teardown = Teardown()
    ns = f"ccsw-drops-{os.getpid()}"
    try:
        create_netns(ns, teardown)
        x = lambda cmd: subprocess.run(["ip", "netns", "exec", ns] + cmd, check=True, capture_output=True, text=True)
        x(["ip", "link", "add", "dropsa", "type", "veth", "peer", "name", "dropsb"])
        x(["ip", "link", "set", "dropsa", "up"])
        x(["ip", "link", "set", "dropsb", "up"])
        frames = 200
        holder = subprocess.Popen(["ip", "netns", "exec", ns, "python3", "-c", f"""
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
s.bind(("dropsa", 0))
t = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
t.bind(("dropsb", 0))
for _ in range({frames}):
    t.send(b"\\xff" * 6 + b"\\x02" * 6 + b"\\x08\\x00" + b"x" * 100)
print("sent", flush=True)
sys.stdin.read()
"""], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert holder.stdout.readline().strip() == "sent"
            fabric = BridgeFabric.__new__(BridgeFabric)
            fabric.ns_name = ns
            drops = fabric.packet_socket_drops()
        finally:
            holder.stdin.close()
            holder.wait(timeout=10)
        # the buffer holds a few frames; the rest were dropped, at the receiving port only
        assert frames - 20 <= drops["dropsa"] < frames, drops
        assert drops.get("dropsb", 0) == 0, drops
    finally:
        teardown.run()
    assert ns not in netns_list().split()
