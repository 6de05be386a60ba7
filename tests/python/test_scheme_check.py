"""Every agent scheme is judged by the agent itself before the first transfer
(`environment.check_agent_schemes`): unknown algorithms, bad parameters, `py:` classes that cannot
be imported or built, and bad policy parameters refuse the scenario with the agent's own
reason and the scheme's place in the file. Needs the Rust agent (make build), not root."""

import os
import subprocess
import sys

import pytest

from ccswitch.experiments import environment
from ccswitch.experiments.scenario import ScenarioError, load_scenario

SCENARIO = """
name = "check"
schemes = ["native:cubic", "kernel:reno", {bad}, "ovs:bbr"]
[[clients]]
name = "c"
link = {{ mbps = 24 }}
file_bytes = 1000
"""


def agent_built():
    path = os.path.join(environment.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")


def load(tmp_path, bad):
    (tmp_path / "local_algs.py").write_text(
        "class Fine:\n    def on_report(self, flow):\n        pass\n"
        "class BadInit:\n    def __init__(self):\n        raise ValueError('cannot build')\n"
        "    def on_report(self, flow):\n        pass\n")
    p = tmp_path / "scenario.toml"
    p.write_text(SCENARIO.format(bad=f'"{bad}"'))
    return load_scenario(str(p))


@pytest.mark.parametrize("bad, reason", [
    ("kernel:bbrr", 'unknown algorithm "bbrr"; known: reno, cubic, bbr'),
    ("kernel:cubic:betta=0.5", 'cubic has no parameter "betta"; it takes: beta, c'),
    ("ovs:cubic:beta=abc", 'parameter beta: "abc" is not a number'),
    ("kernel:py:no_such_module:X", "cannot import no_such_module: ModuleNotFoundError"),
    ("kernel:py:local_algs:Missing", "cannot find class Missing in module local_algs"),
    ("kernel:py:local_algs:BadInit", "cannot instantiate local_algs:BadInit: "),
    ("kernel:policy:nope", "no built-in policy \"nope\"; built-in: mystique, mcc-wifi"),
    ("kernel:policy:mystique:nonesuch=1", 'policy built-in mystique: override "nonesuch=1": "mystique" has no parameter "nonesuch"'),
])
def test_a_bad_scheme_among_good_ones_is_refused_with_the_agents_reason(tmp_path, bad, reason):
    agent_built()
    sc = load(tmp_path, bad)
    with pytest.raises(ScenarioError) as e:
        environment.check_agent_schemes(sc)
    assert str(e.value).startswith(f"{tmp_path / 'scenario.toml'}: schemes[2]: '{bad}': {reason}"), str(e.value)
    assert "Stack backtrace" not in str(e.value)


def test_good_schemes_pass_and_python_classes_are_imported_from_the_scenarios_directory(tmp_path):
    agent_built()
    sc = load(tmp_path, "kernel:py:local_algs:Fine")
    environment.check_agent_schemes(sc)  # raises if refused
    sc = load(tmp_path, "kernel:cubic:beta=0.5,c=0.4")
    environment.check_agent_schemes(sc)


def test_ccswitch_run_refuses_the_scenario_before_any_transfer_with_status_2(tmp_path):
    """The command line: exit 2 with the reason, no results directory, nothing set up (the
    refusal comes before the root check, so this runs as any user)."""
    agent_built()
    sc_path = tmp_path / "scenario.toml"
    sc_path.write_text(SCENARIO.format(bad='"kernel:cubic:betta=0.5"'))
    out = tmp_path / "out"
    cp = subprocess.run([sys.executable, "-m", "ccswitch", "run", str(sc_path), "--out", str(out)],
                        capture_output=True, text=True, timeout=60,
                        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert cp.returncode == 2, cp.stderr
    assert f"{sc_path}: schemes[2]: 'kernel:cubic:betta=0.5': cubic has no parameter \"betta\"" in cp.stderr, cp.stderr
    assert not out.exists()
