"""Python algorithms in the agent (`--algorithm py:MODULE:CLASS`, scheme
`kernel:py:MODULE:CLASS`): the example NewReno drives a real transfer on the kernel
datapath; bad targets make the agent refuse to start with a clear error; a class whose
on_report raises is logged and the flow goes on. The live tests need root, mahimahi and the
Rust binaries; they fail rather than skip without them."""

import os
import re
import subprocess

import pytest

from ccswitch.experiments import environment, runner
from ccswitch.topology.daemons import python_agent_env
from live import agents_log_debug, set_up_runner

EXAMPLE = "py:ccswitch.authoring.examples.reno:Reno"

# Kept beside the scenario file: the harness puts the scenario's directory on the agent's
# PYTHONPATH.
FAULTY_MODULE = '''
from ccswitch.authoring import Algorithm

class Raises(Algorithm):
    def on_report(self, flow):
        flow.cwnd = 3 * flow.mss  # never applied: the call fails
        raise RuntimeError("deliberately broken algorithm")
'''

SCENARIO = f"""
name = "python-algorithm"
repetitions = 1
schemes = ["kernel:{EXAMPLE}", "kernel:py:faulty_alg:Raises"]
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
    path = os.path.join(environment.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")
    return path


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    d = tmp_path_factory.mktemp("pyalg")
    (d / "faulty_alg.py").write_text(FAULTY_MODULE)
    with agents_log_debug(), set_up_runner(d, SCENARIO) as r:
        yield r


def agent_log(r, algorithm):
    """The log of the (latest) agent started with `algorithm`."""
    names = sorted(n for n in os.listdir(r.log_dir) if n.startswith("agent-") and n.endswith(f"-{algorithm}.log"))
    assert names, f"no agent log for {algorithm} in {os.listdir(r.log_dir)}"
    with open(os.path.join(r.log_dir, names[-1])) as f:
        return f.read()


def flows(log_text, name):
    """sid -> (initial window, [window answered to each report]) of the flows run by the
    algorithm named `name`, from the agent's debug log. A flow's closing line can come long
    after its transfer (the server socket lingers when the client's shell is gone before its
    FIN arrives), so the answers are read report by report instead. A flow of the previous
    scheme still open when the agent was replaced is announced again to the new agent, with
    its window then as its initial window; flows are told apart by sid."""
    created = re.findall(rf"flow created .*?sid=(\d+) algorithm=\"?{re.escape(name)}\"? .*?init_cwnd=(\d+)", log_text)
    out = {int(sid): (int(init), []) for sid, init in created}
    for sid, cwnd in re.findall(r"report answered sid=(\d+) .*?reg_index: 4, value: (\d+)", log_text):
        if int(sid) in out:
            out[int(sid)][1].append(int(cwnd))
    return out


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
    log = agent_log(r, EXAMPLE)
    assert "python interpreter ready" in log
    reno = flows(log, "Reno")
    assert reno, f"no flow created under the Python Reno:\n{log[-3000:]}"
    init_cwnd, windows = max(reno.values(), key=lambda f: len(f[1]))
    assert len(windows) > 10, f"the Python Reno answered {len(windows)} reports\n{log[-3000:]}"
    assert max(windows) > 2 * init_cwnd, f"the Python Reno grew the window: {windows}"
    assert "on_report raised" not in log, log[-3000:]
    assert r.daemons.agent.poll() is None


def test_a_raising_python_algorithm_is_logged_and_the_flow_completes(run):
    r = run
    transfer(r, 1, 1_000_000)
    log = agent_log(r, "py:faulty_alg:Raises")
    assert r.daemons.agent.poll() is None, "the agent survives"
    raises = flows(log, "Raises")
    assert sum(len(w) for _, w in raises.values()) > 5, f"reports were still answered: {raises}\n{log[-3000:]}"
    assert "Raises (py:faulty_alg:Raises): on_report raised; the flow keeps its window" in log
    assert "Traceback (most recent call last)" in log
    assert "RuntimeError: deliberately broken algorithm" in log
    # The window stayed at the initial one, never the 3 segments assigned before the raise.
    assert all(set(w) <= {init} for init, w in raises.values()), raises


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
    ("py:ccswitch.authoring.examples.reno:NoSuchClass", r"cannot find class NoSuchClass in module ccswitch\.authoring\.examples\.reno"),
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
    venv = os.path.join(environment.repo_root(), ".venv")
    if not os.path.isdir(venv):
        pytest.fail(f"{venv} missing (make setup)")
    env["VIRTUAL_ENV"] = venv
    cp = subprocess.run([agent_binary(), "--algorithm", EXAMPLE, "--bench-reports", "100", "--log-level", "warn"],
                        capture_output=True, text=True, env=env, timeout=30, cwd=str(tmp_path))
    assert cp.returncode == 0, cp.stderr
    assert '"name":"Reno"' in cp.stdout
