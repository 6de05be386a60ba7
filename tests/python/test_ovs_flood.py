"""A SYN flood against the ovs datapath, for real: while an `ovs:` transfer runs, 100 000
SYNs from spoofed client addresses and ports cross the bridge toward the server's port. The
transfer completes intact, the shim survives and counts every SYN, and its flow table stays
within --max-flows. Needs root, mahimahi, openvswitch-switch and the Rust binaries; fails
rather than skips without them.

The SYNs are Ethernet frames written with a packet socket on the root namespace's gateway
veth, so they enter the bridge through its uplink as a client's frames would, and touch
neither the root namespace's IP stack nor its connection tracking. Their sources lie in
198.19.0.0/16 (RFC 2544's benchmarking range), which the server's namespace blackholes: the
server's SYN-ACKs go nowhere."""

import ipaddress
import json
import os
import random
import re
import socket
import struct
import subprocess
import threading
import time

import pytest

from ccswitch.topology.bridges import normalize_stats
from test_ovs_integrity import set_up_ovs_runner

SPOOF_NET = ipaddress.ip_network("198.19.0.0/16")
SYN_COUNT = 100_000
MAX_FLOWS = 4096

SCENARIO = """
name = "ovs-flood"
repetitions = 1
schemes = ["ovs:bbr"]
bridge = "ovs"
timeout_s = 90
agent_settle_s = 0.5
[[clients]]
name = "wan-50ms"
delay_ms = 25
link = { mbps = 24 }
queue_packets = 100
file_bytes = 24_000_000
"""


def _csum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


# MSS 1460, NOP, window scale 7, SACK permitted, NOP, NOP: a SYN as Linux clients send it
# (without timestamps), so the port programs parse real options.
SYN_OPTIONS = bytes([2, 4, 0x05, 0xB4, 1, 3, 3, 7, 4, 2, 1, 1])


def syn_frame(src_mac: bytes, dst_mac: bytes, src_ip: bytes, dst_ip: bytes, sport: int, dport: int, seq: int,
              ip_id: int) -> bytes:
    tcp_len = 20 + len(SYN_OPTIONS)
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, (tcp_len // 4) << 4, 0x02, 64240, 0, 0) + SYN_OPTIONS
    pseudo = src_ip + dst_ip + struct.pack("!BBH", 0, socket.IPPROTO_TCP, tcp_len)
    tcp = tcp[:16] + struct.pack("!H", _csum(pseudo + tcp)) + tcp[18:]
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + tcp_len, ip_id, 0x4000, 64, socket.IPPROTO_TCP, 0, src_ip, dst_ip)
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    return dst_mac + src_mac + b"\x08\x00" + ip + tcp


def mac_of(dev: str, netns: str = None) -> bytes:
    cmd = ["cat", f"/sys/class/net/{dev}/address"]
    if netns:
        cmd = ["ip", "netns", "exec", netns] + cmd
    text = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
    return bytes.fromhex(text.replace(":", ""))


def syn_flood(ifname: str, dst_mac: bytes, dst_ip: str, dport: int, count: int, *, seed: int = 1,
              burst: int = 200, pause_s: float = 0.003, deadline_s: float = 60.0) -> int:
    """Send `count` SYNs with random sources from SPOOF_NET and random ports; bounded in count
    and time. Bursts with pauses keep the veth backlog and ovs-vswitchd's socket from
    overflowing, so that every SYN reaches the port. Returns how many were sent."""
    rng = random.Random(seed)
    src_mac = mac_of(ifname)
    dst = socket.inet_aton(dst_ip)
    base = int(SPOOF_NET.network_address)
    sent = 0
    end = time.monotonic() + deadline_s
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW) as s:
        s.bind((ifname, 0))
        while sent < count and time.monotonic() < end:
            for _ in range(min(burst, count - sent)):
                src = struct.pack("!I", base + rng.randrange(1, SPOOF_NET.num_addresses - 1))
                s.send(syn_frame(src_mac, dst_mac, src, dst, rng.randrange(1024, 65536), dport,
                                 rng.getrandbits(32), sent & 0xFFFF))
                sent += 1
            time.sleep(pause_s)
    return sent


def bpftool(*args):
    return json.loads(subprocess.run(["bpftool", "-j"] + list(args), capture_output=True, text=True,
                                     check=True).stdout)


def shim_maps(shim_log: str):
    """The maps of the programs the shim logged as attached ("programs=NAME=ID,...")."""
    m = re.search(r"attached .*programs=(\S+)", shim_log)
    assert m, shim_log[-2000:]
    prog_ids = [int(p.split("=")[1]) for p in m.group(1).split(",")]
    map_ids = {i for pid in prog_ids for i in bpftool("prog", "show", "id", str(pid)).get("map_ids", [])}
    return [bpftool("map", "show", "id", str(i)) for i in sorted(map_ids)]


#: struct ccsw_ovs_flow_slot: its `used` word (after the 40-byte key) and its value when live
SLOT_USED_OFFSET, SLOT_LIVE = 40, 2


def flow_table_entries(map_id: int) -> int:
    """The live slots of the port's flow table (an array: every slot is an element)."""
    live = 0
    for e in bpftool("map", "dump", "id", str(map_id)):
        value = e.get("formatted", e)["value"]
        if isinstance(value, dict):
            used = value["used"]
        else:  # raw bytes, as hex strings
            used = int.from_bytes(bytes(int(b, 16) for b in value[SLOT_USED_OFFSET:SLOT_USED_OFFSET + 4]), "little")
        live += used == SLOT_LIVE
    return live


def server_syns(ns) -> int:
    out = subprocess.run(ns.exec_cmd(["iptables", "-t", "raw", "-L", "PREROUTING", "-v", "-n", "-x"]),
                         capture_output=True, text=True, check=True).stdout
    rows = [l.split() for l in out.splitlines() if str(SPOOF_NET) in l]
    assert len(rows) == 1, out
    return int(rows[0][0])


def test_syn_flood_during_a_controlled_transfer(tmp_path):
    with set_up_ovs_runner(tmp_path, SCENARIO) as r:
        r.ovs_shim.max_flows = MAX_FLOWS
        client, scheme = r.sc.clients[0], r.sc.schemes[0]
        f, ns = r.fabric, r.ns
        # the server's answers to spoofed clients go nowhere (never out of the machine)
        subprocess.run(ns.exec_cmd(["ip", "route", "add", "blackhole", str(SPOOF_NET)]), check=True)
        # counts the spoofed SYNs that reach the server (the rule lives and dies with its namespace)
        subprocess.run(ns.exec_cmd(["iptables", "-t", "raw", "-A", "PREROUTING", "-s", str(SPOOF_NET), "-p", "tcp",
                                    "--syn"]), check=True)
        server_mac = mac_of(ns.veth_srv, ns.name)
        result, flood, table = {}, {}, {}

        def transfer():
            result.update(r.transfer(0, client, scheme, client.file_sizes[0]))

        t = threading.Thread(target=transfer)
        t.start()
        # once the flow is established and the shim runs
        deadline = time.monotonic() + 30
        while not (r.current_download and os.path.exists(r.current_download)
                   and os.path.getsize(r.current_download) > 200_000):
            assert t.is_alive() and time.monotonic() < deadline, result
            time.sleep(0.05)
        flood["sent"] = syn_flood(f.gateway, server_mac, ns.server_ip, 8080, SYN_COUNT)
        # Open vSwitch's userspace datapath drops a few hundred of them while the transfer and
        # the shim compete for the two cores: top up until the server has seen SYN_COUNT.
        for round_ in range(1, 6):
            time.sleep(0.2)  # the last SYNs on their way through the bridge
            missing = SYN_COUNT - server_syns(ns)
            if missing <= 0:
                break
            flood["sent"] += syn_flood(f.gateway, server_mac, ns.server_ip, 8080, missing, seed=1 + round_)
        flood["delivered"] = server_syns(ns)
        flood["ovs_uplink"] = f.ovs_port_stats(f.uplink)
        flood["ovs_port"] = f.ovs_port_stats(f.server_port)
        assert t.is_alive(), "the flood ran while the transfer did: make the file larger"
        assert r.ovs_shim.alive(), "the shim survives the flood"
        maps = shim_maps(r.ovs_shim.log_text())
        flows = [m for m in maps if m.get("name") == "flows"]
        assert len(flows) == 1, maps
        table["max_entries"] = flows[0]["max_entries"]
        table["entries"] = flow_table_entries(flows[0]["id"])
        t.join(timeout=120)
        assert not t.is_alive()

    assert SYN_COUNT <= flood["sent"] <= 1.05 * SYN_COUNT, flood
    assert flood["delivered"] >= SYN_COUNT, json.dumps(flood)
    assert result["error"] is None and result["sha256_ok"], result
    assert result["cc_observed"] in (None, "cubic")
    assert result["ovs_exit"] == 0, f"the shim exits cleanly after the flood: {result}"
    with open(os.path.join(r.out_dir, result["ovs_stats"])) as fh:
        doc = normalize_stats(json.load(fh))
    st = doc["stats"]
    # the port's egress program saw every SYN that reached the server (and the transfer's own)
    assert st["syns"] >= flood["delivered"] + 1, (st, flood)
    assert st["acks_rewritten"] > 0, "the transfer stayed under control during the flood"
    # slots for twice the capacity (AttachOptions::flow_regions)
    assert table["max_entries"] == 2 * MAX_FLOWS
    # the flood filled the table, and it refused what went beyond its capacity
    assert MAX_FLOWS // 2 <= table["entries"] <= MAX_FLOWS, table
