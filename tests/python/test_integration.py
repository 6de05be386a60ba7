"""End-to-end runs for real: root, mahimahi, nginx, curl, network namespaces.

These tests FAIL (they do not skip) when the machine cannot run them: CI runs as root with
scripts/setup.sh applied. The ccswitch-scheme test skips only while the Rust binaries are
not built.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from ccswitch.experiments import client_driver, environment, results, runner
from ccswitch.topology.probe import PROBE_BIN
from ccswitch.topology.namespaces import read_sysctl
from ccswitch.topology.daemons import CcswitchDaemons

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PYTHONPATH = os.path.join(REPO, "python")

TINY = """
name = "tiny"
repetitions = {reps}
schemes = [{schemes}]
timeout_s = 60
[[clients]]
name = "clean-10ms"
delay_ms = 10
link = {{ mbps = 24 }}
file_bytes = {size}
"""


def require_machine():
    problems = []
    if os.geteuid() != 0:
        problems.append("not root")
    for tool in ("mm-delay", "mm-link", "mm-loss", "nginx", "curl", "runuser", "ip"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} missing")
    if subprocess.run(["id", environment.MM_USER], capture_output=True).returncode != 0:
        problems.append(f"user {environment.MM_USER} missing")
    if problems:
        pytest.fail("integration test needs root + mahimahi + nginx (scripts/setup.sh): " + ", ".join(problems))


def write_scenario(tmp_path, schemes, size=1_000_000, reps=1):
    p = tmp_path / "tiny.toml"
    p.write_text(TINY.format(schemes=", ".join(f'"{s}"' for s in schemes), size=size, reps=reps))
    return p


def start_cli(args):
    env = dict(os.environ, PYTHONPATH=PYTHONPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "ccswitch", "run"] + args, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def created_objects(stderr):
    m = re.search(r"server netns (\S+) at \S+ \(nginx pid (\d+)\), work dir (\S+),", stderr)
    assert m, f"no topology line in stderr:\n{stderr}"
    return m.group(1), int(m.group(2)), m.group(3)


def netns_list():
    return subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    except FileNotFoundError:
        return False


def assert_torn_down(netns, nginx_pid, work):
    assert netns not in netns_list().split(), f"netns {netns} left behind"
    assert not os.path.exists(f"/run/netns/{netns}")
    assert not pid_alive(nginx_pid), f"nginx (pid {nginx_pid}) left running"
    assert not os.path.exists(work), f"work dir {work} left behind"


def test_native_end_to_end(tmp_path):
    require_machine()
    allowed_before = read_sysctl("net.ipv4.tcp_allowed_congestion_control")
    forward_before = read_sysctl("net.ipv4.ip_forward")
    sc = write_scenario(tmp_path, ["native:cubic", "native:reno"])
    out = tmp_path / "out"
    proc = start_cli([str(sc), "--json", "--out", str(out)])
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 0, stderr
    netns, nginx_pid, work = created_objects(stderr)

    doc = json.loads(stdout)  # stdout holds only the JSON document
    assert [(r["client"], r["scheme"]) for r in doc["rows"]] == [("clean-10ms", "native:cubic"), ("clean-10ms", "native:reno")]
    for r in doc["rows"]:
        assert r["n"] == 1 and r["integrity_failures"] == 0
        assert 0 < r["tct_median_s"] < 30

    rows = results.read_transfers_parquet(out / "transfers.parquet")
    assert {r["scheme"] for r in rows} == {"native:cubic", "native:reno"}
    for r in rows:
        assert r["sha256_ok"] and r["error"] is None and r["bytes"] == 1_000_000 and r["http_code"] == 200
        assert r["cc_observed"] in (None, r["scheme"].split(":")[1])  # the sysctl took effect
    for name in ("summary.json", "summary.txt", "tct.png", "scenario.toml", "transfers.jsonl"):
        assert (out / name).exists(), name
    assert_torn_down(netns, nginx_pid, work)
    assert read_sysctl("net.ipv4.tcp_allowed_congestion_control") == allowed_before
    assert read_sysctl("net.ipv4.ip_forward") == forward_before


def test_interrupt_tears_down_and_writes_no_parquet(tmp_path):
    require_machine()
    allowed_before = read_sysctl("net.ipv4.tcp_allowed_congestion_control")
    sc = write_scenario(tmp_path, ["native:cubic", "native:reno"], size=20_000_000, reps=3)
    out = tmp_path / "out"
    proc = start_cli([str(sc), "--out", str(out)])
    # wait until the first transfer is under way
    deadline = time.monotonic() + 60
    while not (out / "transfers.jsonl").exists() or not os.path.exists(out / "logs"):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline
        time.sleep(0.1)
    time.sleep(2.0)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGINT, stderr
    assert "interrupted" in stderr
    netns, nginx_pid, work = created_objects(stderr)
    assert not (out / "transfers.parquet").exists()
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]
    assert_torn_down(netns, nginx_pid, work)
    assert read_sysctl("net.ipv4.tcp_allowed_congestion_control") == allowed_before
    # the transfer in flight was stopped too (only this run's: its work directory is in the
    # command line; another run on the machine may have transfers of its own)
    time.sleep(0.5)
    ps = subprocess.run(["ps", "-eww", "-o", "stat,args"], capture_output=True, text=True).stdout
    mine = [l for l in ps.splitlines() if client_driver.CURL_MARK in l and work in l and not l.startswith("Z")]
    assert not mine, ps


def test_kernel_schemes_end_to_end(tmp_path):
    require_machine()
    bdir = environment.bin_dir()
    missing = CcswitchDaemons.missing_binaries(bdir)
    if missing:
        pytest.fail(f"Rust binaries not built ({', '.join(missing)}); run `make build`")
    allowed_before = read_sysctl("net.ipv4.tcp_allowed_congestion_control")
    sc = write_scenario(tmp_path, ["kernel:reno", "native:reno", "kernel:cubic"])
    out = tmp_path / "out"
    proc = start_cli([str(sc), "--json", "--out", str(out)])
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    netns, nginx_pid, work = created_objects(stderr)
    doc = json.loads(stdout)
    assert {r["scheme"] for r in doc["rows"]} == {"kernel:reno", "native:reno", "kernel:cubic"}
    rows = results.read_transfers_parquet(out / "transfers.parquet")
    for r in rows:
        assert r["sha256_ok"] and r["error"] is None, r
        if r["scheme"].startswith("kernel:") and r["cc_observed"] is not None:
            assert r["cc_observed"].startswith("ccsw"), r
    logs = os.listdir(out / "logs")
    assert "kernel-shim.log" in logs and any(l.startswith("agent-") for l in logs)
    assert_torn_down(netns, nginx_pid, work)
    assert read_sysctl("net.ipv4.tcp_allowed_congestion_control") == allowed_before
    # the congestion control this run registered is gone (others' runs may have their own)
    shim_log = (out / "logs" / "kernel-shim.log").read_text()
    registered = set(re.findall(r"congestion control registered cc=(\S+)", shim_log))
    assert registered, shim_log[-2000:]
    available = read_sysctl("net.ipv4.tcp_available_congestion_control").split()
    assert not registered & set(available), (registered, available)


def test_kernel_schemes_end_to_end_with_the_agent_in_the_shims_process(tmp_path):
    """`ccswitch run --agent-transport in-process`: one process, `ccswitch-kernel
    --agent-in-process`, is shim and agent, restarted for each scheme (a Rust algorithm, a
    Python one): every transfer intact under the ccswitch congestion control, the flows in the
    agent's events, no agent process or log of its own, and nothing left registered."""
    require_machine()
    missing = CcswitchDaemons.missing_binaries(environment.bin_dir())
    if missing:
        pytest.fail(f"Rust binaries not built ({', '.join(missing)}); run `make build`")
    schemes = ["kernel:reno", "kernel:py:ccswitch.authoring.examples.reno:Reno", "kernel:cubic"]
    sc = write_scenario(tmp_path, schemes)
    out = tmp_path / "out"
    proc = start_cli([str(sc), "--json", "--out", str(out), "--agent-transport", "in-process"])
    stdout, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    netns, nginx_pid, work = created_objects(stderr)
    rows = results.read_transfers_parquet(out / "transfers.parquet")
    assert sorted(r["scheme"] for r in rows) == sorted(schemes)
    for r in rows:
        assert r["sha256_ok"] and r["error"] is None, r
        if r["cc_observed"] is not None:
            assert r["cc_observed"].startswith("ccsw"), r
    logs = os.listdir(out / "logs")
    assert "kernel-shim.log" in logs and not any(l.startswith("agent-") for l in logs), logs
    shim_log = (out / "logs" / "kernel-shim.log").read_text()
    # one start per scheme, each connected to its own agent in process
    assert shim_log.count("in_process=true") >= len(schemes), shim_log[-3000:]
    events = sorted(os.listdir(out / "events"))
    assert len(events) == len(schemes), events
    algorithms = set()
    for name in events:
        for line in (out / "events" / name).read_text().splitlines():
            e = json.loads(line)
            if e["event"] == "flow":
                algorithms.add(e["algorithm"])
    assert {"reno", "cubic"} <= algorithms and any("Reno" in a for a in algorithms - {"reno"}), algorithms
    assert_torn_down(netns, nginx_pid, work)
    registered = set(re.findall(r"congestion control registered cc=(\S+)", shim_log))
    available = read_sysctl("net.ipv4.tcp_available_congestion_control").split()
    assert registered and not registered & set(available), (registered, available)


def test_ccswitch_daemon_failure_is_reported_and_torn_down(tmp_path):
    """With stand-in binaries (an agent that just waits, a shim that fails to load), the run
    stops with a clear error and leaves nothing behind: not the agent, not the namespace."""
    require_machine()
    bins = tmp_path / "bin"
    bins.mkdir()
    agent_pid = tmp_path / "agent.pid"
    (bins / "ccswitch-agent").write_text(f'#!/bin/sh\necho $$ > {agent_pid}\ntouch "$2"\nexec sleep 600\n')
    (bins / "ccswitch-kernel").write_text('#!/bin/sh\necho "stand-in shim: cannot load BPF"\nexit 1\n')
    for f in bins.iterdir():
        f.chmod(0o755)
    # the packet probe is the real one: only the datapath's daemons stand in
    os.symlink(os.path.join(environment.bin_dir(), PROBE_BIN), bins / PROBE_BIN)
    allowed_before = read_sysctl("net.ipv4.tcp_allowed_congestion_control")
    sc = write_scenario(tmp_path, ["native:reno", "kernel:reno"])
    out = tmp_path / "out"
    env_before = os.environ.get("CCSWITCH_BIN_DIR")
    os.environ["CCSWITCH_BIN_DIR"] = str(bins)
    try:
        proc = start_cli([str(sc), "--json", "--out", str(out)])
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if env_before is None:
            del os.environ["CCSWITCH_BIN_DIR"]
        else:
            os.environ["CCSWITCH_BIN_DIR"] = env_before
    assert proc.returncode == 1, stderr
    assert stdout == ""
    assert "ccswitch-kernel exited with status 1 before registering" in stderr
    assert "cannot load BPF" in (out / "logs" / "kernel-shim.log").read_text()
    netns, nginx_pid, work = created_objects(stderr)
    assert_torn_down(netns, nginx_pid, work)
    assert not pid_alive(int(agent_pid.read_text())), "stand-in agent left running"
    rows = results.read_transfers_parquet(out / "transfers.parquet")
    assert rows and {r["scheme"] for r in rows} == {"native:reno"}, "what ran before the failure is summarised"
    assert read_sysctl("net.ipv4.tcp_allowed_congestion_control") == allowed_before


def test_missing_binaries_give_a_clear_error(tmp_path):
    require_machine()
    sc = write_scenario(tmp_path, ["kernel:reno"])
    env = dict(os.environ, CCSWITCH_BIN_DIR=str(tmp_path / "nowhere"),
               PYTHONPATH=PYTHONPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cp = subprocess.run([sys.executable, "-m", "ccswitch", "run", str(sc), "--out", str(tmp_path / "o")],
                        capture_output=True, text=True, env=env, timeout=60)
    assert cp.returncode == 1
    assert "ccswitch-agent, not found or not executable" in cp.stderr and "cargo build --release" in cp.stderr
    assert "server netns" not in cp.stderr  # nothing was set up
