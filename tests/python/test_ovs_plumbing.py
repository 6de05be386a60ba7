"""How `ccswitch run` drives the ovs datapath's shim, checked with a stand-in for
`ccswitch-ovs` beside the real agent: one shim per ovs transfer, in the bridge
namespace, on the server's port, connected to the agent, stopped with SIGTERM; its stats file
in the results and its figures in the report; a shim that fails to attach stops the run with a
clear error and a full teardown. Needs root, mahimahi, openvswitch-switch and ccswitch-agent;
fails rather than skips without them."""

import json
import os
import subprocess
import sys

import pytest

from ccswitch.experiments import environment
from ccswitch.topology.probe import PROBE_BIN
from ccswitch.topology.daemons import CcswitchDaemons
from test_integration import assert_torn_down, created_objects, netns_list, pid_alive, start_cli
from test_ovs_topology import require_bridge_tools, bridge_objects

# The stand-in: checks that it runs where its port is, connects to the agent like a datapath,
# says "attached", and on SIGTERM writes a stats file whose counters are the port's real frame
# counts over its lifetime.
STAND_IN = r'''#!PYTHON
import json, os, signal, socket, sys, time
args = sys.argv[1:]
assert args[0] == "run", args
opts = dict(zip(args[1::2], args[2::2]))
port = opts["--port"]
def count(d):
    with open(f"/sys/class/net/{port}/statistics/{d}_packets") as f:
        return int(f.read())
if os.environ.get("STAND_IN_FAIL"):
    print("stand-in: cannot attach to", port, flush=True)
    sys.exit(2)
start = {d: count(d) for d in ("rx", "tx")}
agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
agent.connect(opts["--agent-socket"])
print(f"INFO ccswitch_ovs: attached port={port}", flush=True)
def stop(signum, frame):
    rx, tx = count("rx") - start["rx"], count("tx") - start["tx"]
    doc = {"argv": args, "pid": os.getpid(), "netns_inode": os.stat("/proc/self/ns/net").st_ino,
           "signal": signum,
           "datapath": {"packets": rx + tx, "segments": rx, "acks": tx, "acks_rewritten": tx, "dupacks_hidden": 0,
                        "syns": 1, "established": 1},
           "prog_stats": [{"name": "ccsw_ingress", "id": 1, "run_cnt": rx, "run_time_ns": 100 * rx},
                          {"name": "ccsw_egress", "id": 2, "run_cnt": tx, "run_time_ns": 200 * tx}],
           "shim": {"reports": 1, "directives": 1, "fallbacks": {},
                    "retransmissions": {"fast": 2, "rack": 1, "timeout": 0, "total": 3}},
           "shim_cpu_ms": 12.5,
           "buffer": {"samples": [{"t_s": 0.1, "flow_id": 1, "segments": 7, "bytes": 7 * 1448},
                                  {"t_s": 0.2, "flow_id": 1, "segments": 30, "bytes": 30 * 1448}],
                      "max_per_flow": [{"flow_id": 1, "segments": 30, "bytes": 30 * 1448}]}}
    with open(opts["--stats-file"], "w") as f:
        json.dump(doc, f)
    print("INFO ccswitch_ovs: detached", flush=True)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
while True:
    time.sleep(1)
'''

SCENARIO = """
name = "ovs-plumbing"
repetitions = 2
schemes = ["ovs:reno", "native:cubic"]
timeout_s = 60
agent_settle_s = 0.2
[[clients]]
name = "c-20ms"
delay_ms = 10
link = { mbps = 24 }
queue_packets = 50
file_bytes = 1_000_000
"""


@pytest.fixture
def bins(tmp_path):
    require_bridge_tools()
    agent = os.path.join(environment.bin_dir(), "ccswitch-agent")
    if CcswitchDaemons.missing_binaries(environment.bin_dir(), ("ccswitch-agent",)):
        pytest.fail(f"{agent} not built (cargo build --release)")
    d = tmp_path / "bin"
    d.mkdir()
    os.symlink(agent, d / "ccswitch-agent")
    os.symlink(os.path.join(environment.bin_dir(), PROBE_BIN), d / PROBE_BIN)
    (d / "ccswitch-ovs").write_text(STAND_IN.replace("PYTHON", sys.executable))
    (d / "ccswitch-ovs").chmod(0o755)
    return d


def run_cli(tmp_path, bins, extra_env=None):
    sc = tmp_path / "s.toml"
    sc.write_text(SCENARIO)
    out = tmp_path / "out"
    saved = dict(os.environ)
    os.environ.update({"CCSWITCH_BIN_DIR": str(bins), **(extra_env or {})})
    try:
        proc = start_cli([str(sc), "--json", "--out", str(out)])
        stdout, stderr = proc.communicate(timeout=180)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return proc.returncode, stdout, stderr, out


def test_one_shim_per_ovs_transfer(tmp_path, bins):
    rc, stdout, stderr, out = run_cli(tmp_path, bins)
    assert rc == 0, stderr
    netns, nginx_pid, work = created_objects(stderr)
    sw_ns, vswitchd, ovsdb = bridge_objects(stderr)
    rows = [json.loads(l) for l in (out / "transfers.jsonl").read_text().splitlines()]
    assert [r["scheme"] for r in rows] == ["ovs:reno", "native:cubic", "native:cubic", "ovs:reno"]
    ovs_rows = [r for r in rows if r["scheme"] == "ovs:reno"]
    docs = []
    for r in rows:
        assert r["error"] is None and r["sha256_ok"], r
        assert r["cc_observed"] in (None, "cubic"), "the server keeps Cubic under every scheme"
        if r["scheme"] != "ovs:reno":
            assert "ovs_stats" not in r
            continue
        assert r["ovs_exit"] == 0
        doc = json.loads((out / r["ovs_stats"]).read_text())
        docs.append(doc)
        assert doc["signal"] == 15, "stopped with SIGTERM"
        opts = dict(zip(doc["argv"][1::2], doc["argv"][2::2]))
        assert opts["--stats-file"] == str(out / r["ovs_stats"])
        assert opts["--port"].startswith("ccsw") and opts["--port"].endswith("r")
        assert opts["--agent-socket"].endswith("agent.sock") and opts["--log-level"] == "info"
        # the shim saw this transfer's frames on the port: the data toward the client came in
        # from the server (rx) and the ACKs went out to it (tx)
        assert doc["datapath"]["segments"] >= 1_000_000 // 1500 and doc["datapath"]["acks"] > 0, doc["datapath"]
        assert "attached" in (out / r["ovs_log"]).read_text()
        assert not pid_alive(doc["pid"])
    assert len({d["pid"] for d in docs}) == 2, "a shim of its own for each transfer"
    assert docs[0]["netns_inode"] == docs[1]["netns_inode"] != os.stat("/proc/self/ns/net").st_ino, \
        "the shim runs in the bridge namespace"
    # both shims connected to the one agent
    agent_logs = [f for f in os.listdir(out / "logs") if f.startswith("agent-")]
    assert len(agent_logs) == 1
    assert (out / "logs" / agent_logs[0]).read_text().count("datapath connected") == 2

    summary = json.loads((out / "summary.json").read_text())
    assert summary["run"]["bridge"] == "ovs"
    (ov,) = summary["ovs_overhead"]
    assert (ov["client"], ov["scheme"], ov["transfers"]) == ("c-20ms", "ovs:reno", 2)
    assert ov["max_buffered_segments"] == 30 and ov["shim_cpu_ms"] == 12.5 and ov["retransmissions"] == 3
    expected_ns = sum(100 * d["datapath"]["segments"] + 200 * d["datapath"]["acks"] for d in docs)
    per_transfer = [(100 * d["datapath"]["segments"] + 200 * d["datapath"]["acks"]) / d["datapath"]["packets"]
                    for d in docs]
    assert ov["bpf_ns_per_packet"] == pytest.approx(sum(per_transfer) / 2) and expected_ns > 0
    assert "ovs datapath" in (out / "summary.txt").read_text()
    assert "[ovs: " in stderr, "progress lines carry the shim's figures"

    assert_torn_down(netns, nginx_pid, work)
    assert sw_ns not in netns_list().split()
    assert not pid_alive(vswitchd) and not pid_alive(ovsdb)


def test_shim_that_cannot_attach_stops_the_run(tmp_path, bins):
    rc, stdout, stderr, out = run_cli(tmp_path, bins, {"STAND_IN_FAIL": "1"})
    assert rc == 1, stderr
    assert stdout == ""
    assert "ccswitch-ovs exited with status 2 before attaching" in stderr
    logs = [f for f in os.listdir(out / "logs") if f.startswith("ovs-")]
    assert logs and "cannot attach" in (out / "logs" / logs[0]).read_text()
    netns, nginx_pid, work = created_objects(stderr)
    sw_ns, vswitchd, ovsdb = bridge_objects(stderr)
    assert_torn_down(netns, nginx_pid, work)
    assert sw_ns not in netns_list().split()
    assert not pid_alive(vswitchd) and not pid_alive(ovsdb)
    assert not (out / "transfers.parquet").exists()
