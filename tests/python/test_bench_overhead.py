"""`ccswitch bench overhead` (`make bench`'s per-ACK figures), for real (root, mahimahi, the
Rust binaries; fails rather than skips without them): ccswitch's transfers, then the same
transfers with the floor congestion control `ccsw_floor`, each with its own program's BPF time
per ACK; the floor is unregistered and its process gone afterwards. Figures are printed,
never compared with targets."""

import json
import os

from ccswitch.experiments import bench, scenario
from ccswitch.topology.namespaces import read_sysctl
from live import require_machine_and_binaries
from test_integration import pid_alive

SCENARIO = """
name = "overhead-small"
repetitions = 1
schemes = ["kernel:reno"]
timeout_s = 60
[[clients]]
name = "wan-50ms"
delay_ms = 25
link = { mbps = 24 }
queue_packets = 200
file_bytes = 2_000_000
"""


def test_the_floor_runs_the_same_transfers_beside_ccswitch_and_leaves_nothing_registered(tmp_path):
    require_machine_and_binaries()
    sc = scenario.loads_scenario(SCENARIO)
    rows = bench.overhead(sc, str(tmp_path / "out"))
    print(json.dumps(rows, indent=1))
    assert [x["scheme"] for x in rows] == ["kernel:reno", f"native:{bench.FLOOR_CC}"]
    ours, floor = rows
    for x in rows:
        assert x["transfers"] == 1 and x["integrity_failures"] == 0
        # 2 MB at 1,448 bytes a segment, an ACK for every one or two
        assert 600 < x["acks"] < 2_000, x
        assert 0 < x["bpf_ns_per_ack"] <= x["bpf_ns_per_ack_all_programs"] < 1e6
    assert ours["shim_cpu_ms_per_10k_acks"] > 0
    assert floor["shim_cpu_ms_per_10k_acks"] is None and floor["agent_cpu_ms_per_10k_acks"] is None
    assert bench.FLOOR_CC not in read_sysctl("net.ipv4.tcp_available_congestion_control").split()
    with open(tmp_path / "out" / "logs" / "floor-cc.log") as f:
        log = f.read()
    assert "congestion control registered" in log, log
    floor_pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and _is_floor(int(d))]
    assert not floor_pids, f"ccswitch-kernel --floor-cc still running: {floor_pids}"


def _is_floor(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return pid_alive(pid) and b"--floor-cc" in f.read()
    except OSError:
        return False
