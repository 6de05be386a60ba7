"""Python algorithms in the agent (`--algorithm py:MODULE:CLASS`, scheme
`ccswitch:py:MODULE:CLASS`): the example NewReno drives a real transfer on the kernel
datapath; bad targets make the agent refuse to start with a clear error; a class whose
on_report raises is logged and the flow goes on. The live tests need root, mahimahi and the
Rust binaries; they fail rather than skip without them."""

import os
import re
import subprocess
import time

import pytest

from ccswitch.experiments import runner
from ccswitch.experiments.topology import python_agent_env
from live import set_up_runner

EXAMPLE = "py:ccswitch.examples.reno:Reno"

# Kept beside the scenario file: the harness puts the scenario's directory on the agent's
# PYTHONPATH.
FAULTY_MODULE = '''
from ccswitch.algorithm import Algorithm

class Raises(Algorithm):
    def on_report(self, flow):
        flow.cwnd = 1  # never applied: the call fails
        raise RuntimeError("deliberately broken algorithm")
'''

SCENARIO = f"""
name = "python-algorithm"
repetitions = 1
schemes = ["ccswitch:{EXAMPLE}", "ccswitch:py:faulty_alg:Raises"]
timeout_s = 60
agent_settle_s = 0.5
[[clients]]
name = "wan-50ms"
delay_ms = 25
link = {{ mbps = 24 }}
queue_packets = 200
file_sizes = [1_000_000, 8_000_000]
"""


def agent_binary():
    path = os.path.join(runner.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("pyalg")
    (d / "faulty_alg.py").write_text(FAULTY_MODULE)
    with set_up_runner(d, SCENARIO) as r:
        yield r


def agent_log(r, algorithm):
    """The log of the (latest) agent started with `algorithm`."""
    names = sorted(n for n in os.listdir(r.log_dir) if n.startswith("agent-") and n.endswith(f"-{algorithm}.log"))
    assert names, f"no agent log for {algorithm} in {os.listdir(r.log_dir)}"
    with open(os.path.join(r.log_dir, names[-1])) as f:
        return f.read()


def closed_flows(log_text, name):
    """(reports answered, final window) per closed flow run by the algorithm named `name`."""
    pattern = rf"flow closed .*?algorithm=\"?{re.escape(name)}\"? reports=(\d+) cwnd=(?:Some\()?(\d+)"
    return [(int(n), int(cwnd)) for n, cwnd in re.findall(pattern, log_text)]


def wait_for_closed_flows(r, algorithm, name):
    deadline = time.monotonic() + 10
    while True:
        log = agent_log(r, algorithm)
        reports = closed_flows(log, name)
        if reports or time.monotonic() > deadline:
            return log, reports
        time.sleep(0.2)  # the flow's close reaches the agent once the server socket is released


def transfer(r, scheme_index, size):
    scheme, client = r.sc.schemes[scheme_index], r.sc.clients[0]
    r.prepare_scheme(scheme)
    row = r.transfer(0, client, scheme, size)
    assert row["error"] is None, row
    assert row["sha256_ok"], row
    assert row["cc_observed"] == r.daemons.cc_name, "the flow ran on the kernel datapath"
    return row


def test_example_python_reno_controls_a_kernel_datapath_flow(run):
    r = run
    transfer(r, 0, 8_000_000)
    log, reports = wait_for_closed_flows(r, EXAMPLE, "Reno")
    assert "python interpreter ready" in log
    assert re.search(r"flow created .*algorithm=\"?Reno\"? ", log), log[-3000:]
    assert reports and max(n for n, _ in reports) > 10, f"the Python Reno answered the flow's reports: {reports}\n{log[-3000:]}"
    init_cwnd = int(re.search(r"flow created .*init_cwnd=(\d+)", log).group(1))
    assert all(cwnd > init_cwnd for _, cwnd in reports), f"the Python Reno grew the window: {reports}"
    assert "on_report raised" not in log, log[-3000:]
    assert r.daemons.agent.poll() is None


def test_a_raising_python_algorithm_is_logged_and_the_flow_completes(run):
    r = run
    transfer(r, 1, 1_000_000)
    log, reports = wait_for_closed_flows(r, "py:faulty_alg:Raises", "Raises")
    assert r.daemons.agent.poll() is None, "the agent survives"
    assert reports and max(n for n, _ in reports) > 5, f"reports were still answered: {reports}\n{log[-3000:]}"
    assert "Raises (py:faulty_alg:Raises): on_report raised; the flow keeps its window" in log
    assert "Traceback (most recent call last)" in log
    assert "RuntimeError: deliberately broken algorithm" in log
    # The window stayed at the initial one, never the 1 byte assigned before the raise.
    init_cwnd = int(re.search(r"flow created .*algorithm=\"?Raises\"? .*init_cwnd=(\d+)", log).group(1))
    assert all(cwnd == init_cwnd for _, cwnd in reports), reports


def start_agent_with(tmp_path, algorithm):
    """Start an agent with `algorithm`; it should refuse, so wait for it to exit."""
    (tmp_path / "broken_algs.py").write_text(
        "class NoCallback:\n    pass\n"
        "class BadInit:\n    def __init__(self):\n        raise ValueError('cannot build')\n"
        "    def on_report(self, flow):\n        pass\n"
    )
    env = python_agent_env(dict(os.environ), [str(tmp_path)])
    sock = tmp_path / "agent.sock"
    cp = subprocess.run([agent_binary(), "--socket", str(sock), "--algorithm", algorithm],
                        capture_output=True, text=True, env=env, timeout=30)
    assert not sock.exists(), "the agent must not start serving"
    return cp


@pytest.mark.parametrize("algorithm, expected", [
    ("py:nonexistent.mod:X", r"cannot import nonexistent\.mod: .*ModuleNotFoundError: No module named 'nonexistent'"),
    ("py:ccswitch.examples.reno:NoSuchClass", r"cannot find class NoSuchClass in module ccswitch\.examples\.reno"),
    ("py:broken_algs:NoCallback", r"broken_algs:NoCallback has no on_report\(self, flow\) method"),
    ("py:broken_algs:BadInit", r"cannot instantiate broken_algs:BadInit: .*ValueError: cannot build"),
])
def test_a_bad_target_stops_the_agent_with_a_clear_error(tmp_path, algorithm, expected):
    cp = start_agent_with(tmp_path, algorithm)
    assert cp.returncode != 0
    assert f"--algorithm {algorithm}: " in cp.stderr, cp.stderr
    assert re.search(expected, cp.stderr, re.S), cp.stderr


def test_the_example_loads_from_the_installed_package(tmp_path):
    """With only the venv (no PYTHONPATH), the agent finds ccswitch through VIRTUAL_ENV."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    venv = os.path.join(runner.repo_root(), ".venv")
    if not os.path.isdir(venv):
        pytest.fail(f"{venv} missing (make setup)")
    env["VIRTUAL_ENV"] = venv
    cp = subprocess.run([agent_binary(), "--algorithm", EXAMPLE, "--bench-reports", "100", "--log-level", "warn"],
                        capture_output=True, text=True, env=env, timeout=30, cwd=str(tmp_path))
    assert cp.returncode == 0, cp.stderr
    assert '"name":"Reno"' in cp.stdout
