"""Data integrity under the ovs datapath, for real: transfers through the OVS bridge while
`ccswitch-ovs` controls them, with TCP options negotiated off, under random loss, and with
the agent killed in the middle. Each transfer's SHA-256 must match, and the shim's stats file
must show that the flow really was controlled (ACKs rewritten; under loss, the shim's own
retransmissions and hidden duplicate ACKs). Needs root, mahimahi, openvswitch-switch and the
Rust binaries; fails rather than skips without them."""

import contextlib
import json
import os
import re
import signal
import threading
import time

import pytest

from ccswitch.experiments import environment, runner, scenario
from ccswitch.topology.bridges import OVS_BIN, normalize_stats
from ccswitch.topology.namespaces import run as runner_run
from ccswitch.topology.daemons import CcswitchDaemons
from test_ovs_topology import require_bridge_tools

FILE_BYTES = 3_000_000

SCENARIO = f"""
name = "ovs-integrity"
repetitions = 1
schemes = ["ovs:bbr", "ovs:reno"]
bridge = "ovs"
timeout_s = 120
agent_settle_s = 0.5
[[clients]]
name = "rtt50"
delay_ms = 25
link = {{ mbps = 24 }}
queue_packets = 100
file_sizes = [{FILE_BYTES}, 8_000_000]
[[clients]]
name = "rtt50-loss1"
delay_ms = 25
loss_downlink = 0.01
link = {{ mbps = 24 }}
queue_packets = 100
file_bytes = {FILE_BYTES}
[[clients]]
name = "rtt50-loss5"
delay_ms = 25
loss_downlink = 0.05
link = {{ mbps = 24 }}
queue_packets = 100
file_bytes = {FILE_BYTES}
"""


@contextlib.contextmanager
def set_up_ovs_runner(tmp_path, scenario_text):
    """A Runner whose bridged topology is up and whose first scheme is prepared (agent
    running); torn down on exit. Shared with the other ovs tests."""
    require_bridge_tools()
    missing = CcswitchDaemons.missing_binaries(environment.bin_dir(), ("ccswitch-agent", OVS_BIN))
    if missing:
        pytest.fail(f"Rust binaries not built (cargo build --release --workspace): {missing}")
    path = tmp_path / "scenario.toml"
    path.write_text(scenario_text)
    sc = scenario.load_scenario(str(path))
    r = runner.Runner(sc, str(tmp_path / "out"), quiet=True)
    try:
        r.setup()
        r.prepare_scheme(sc.schemes[0])
        yield r
    finally:
        r.teardown.run()


@pytest.fixture(scope="module")
def r(tmp_path_factory):
    with set_up_ovs_runner(tmp_path_factory.mktemp("ovs-integrity"), SCENARIO) as r:
        yield r


def scheme(r, label):
    return next(s for s in r.sc.schemes if s.label == label)


def client(r, name):
    return next(c for c in r.sc.clients if c.name == name)


def stats_of(r, row):
    assert row.get("ovs_stats"), f"no stats file: {row}"
    with open(os.path.join(r.out_dir, row["ovs_stats"])) as f:
        return normalize_stats(json.load(f))


def shim_log(r, row):
    with open(os.path.join(r.out_dir, row["ovs_log"])) as f:
        return f.read()


SERVER_LOSS_COUNTERS = ("TCPSackRecovery", "TCPRenoRecovery", "TCPSACKReneging", "TCPSackShifted",
                        "TCPLossProbes", "TCPTimeouts", "TCPDSACKRecv")


def server_tcp_counters(r):
    """The server namespace's TcpExt MIB counters that show loss handling by its own TCP."""
    lines = [l.split() for l in runner_run(r.ns.exec_cmd(["cat", "/proc/net/netstat"])).stdout.splitlines()
             if l.startswith("TcpExt:")]
    mib = dict(zip(lines[0][1:], map(int, lines[1][1:])))
    return {k: mib.get(k, 0) for k in SERVER_LOSS_COUNTERS}


def transfer(r, client_name, label, size=FILE_BYTES):
    s = scheme(r, label)
    r.prepare_scheme(s)
    before = server_tcp_counters(r)
    row = r.transfer(0, client(r, client_name), s, size)
    after = server_tcp_counters(r)
    row["server_tcp"] = {k: after[k] - before[k] for k in after if after[k] != before[k]}
    row["server_recoveries"] = sum(row["server_tcp"].get(k, 0) for k in ("TCPSackRecovery", "TCPRenoRecovery"))
    return row


def assert_intact_and_controlled(r, row, *, lossy):
    assert row["error"] is None and row["sha256_ok"], row
    assert row["cc_observed"] in (None, "cubic"), "the server kept its stock congestion control"
    assert row["ovs_exit"] == 0, row
    doc = stats_of(r, row)
    st, totals = doc["stats"], doc["totals"]
    assert st["established"] >= 1 and st["segments"] > FILE_BYTES // 1500, st
    assert st["acks_rewritten"] > 0, f"the flow was controlled: {st}"
    assert totals["reports"] > 0 and totals["directives"] > 0, totals
    if lossy:
        retx = sum(totals[k] for k in ("retransmissions_fast", "retransmissions_rack", "retransmissions_timeout"))
        assert retx > 0, f"the shim retransmitted the lost segments itself: {totals}"
        # A duplicate ACK is either dropped or, when SACKed bytes widen the clamp, forwarded as
        # a window update; neither is a duplicate to the server, which never enters recovery.
        assert st["dupacks_hidden"] + st["dupacks_opened"] > 0, f"duplicate ACKs were kept from the server: {st}"
        if totals["fallbacks"] == 0:
            assert row["server_recoveries"] == 0, f"the server's TCP saw the losses: {row}"
    return doc


@pytest.mark.parametrize("sysctl", ["net.ipv4.tcp_window_scaling", "net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps"])
def test_option_negotiated_off(r, sysctl):
    """Under 1 % loss, so that recovery without the option is exercised too."""
    r.ns.sysctl(sysctl, "0")
    try:
        row = transfer(r, "rtt50-loss1", "ovs:bbr")
    finally:
        r.ns.sysctl(sysctl, "1")
    doc = assert_intact_and_controlled(r, row, lossy=True)
    if sysctl == "net.ipv4.tcp_sack":
        assert doc["stats"]["sack_stripped"] == 0, "no SACK blocks when SACK is not negotiated"


@pytest.mark.parametrize("client_name", ["rtt50-loss1", "rtt50-loss5"])
def test_random_loss(r, client_name):
    row = transfer(r, client_name, "ovs:bbr")
    assert_intact_and_controlled(r, row, lossy=True)


def test_reno_under_loss(r):
    row = transfer(r, "rtt50-loss1", "ovs:reno")
    assert_intact_and_controlled(r, row, lossy=True)


def test_agent_killed_mid_transfer(r):
    """SIGKILL the agent once a third of the file has arrived: the port stops controlling, the
    server's own TCP finishes the transfer, intact."""
    size = 8_000_000
    s = scheme(r, "ovs:reno")
    r.prepare_scheme(s)
    agent = r.daemons.agent
    result = {}
    t = threading.Thread(target=lambda: result.update(r.transfer(0, client(r, "rtt50"), s, size)))
    t.start()
    killed_at = None
    deadline = time.monotonic() + 60
    while t.is_alive() and time.monotonic() < deadline:
        path = r.current_download
        if path and os.path.exists(path) and os.path.getsize(path) >= size // 3:
            killed_at = os.path.getsize(path)
            os.kill(agent.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    assert killed_at is not None and killed_at < size, "the agent was killed during the transfer"
    t.join(timeout=120)
    assert not t.is_alive()
    assert agent.poll() is not None
    # Not the scheme's transfer any more (no TCT), but the server's own TCP delivered every byte.
    assert result["agent_died"] and result["error"].startswith("ccswitch-agent exited"), result
    assert result["sha256_ok"] and result["tct_s"] is None, result
    assert result["ovs_exit"] == 0, result
    st = stats_of(r, result)["stats"]
    assert st["acks_rewritten"] > 0, "the flow was controlled before the agent died"
    assert st["acks_rewritten"] < st["acks"], f"after the fallback the port passed ACKs unchanged: {st}"
    log = shim_log(r, result)
    assert re.search(r"agent lost: flows fall back", log), log[-3000:]
    # a new agent is started for the next transfer
    r.prepare_scheme(s)
    assert r.daemons.agent.pid != agent.pid and r.daemons.agent.poll() is None
