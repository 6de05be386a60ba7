"""The `ccswitch` command line itself: --version, the scheme grammar in `run --help`, the
built-in policies in `ccswitch algorithms` (taken from the agent), and `analyze` naming
--kind. Needs the agent binary (make build) for the listings; fails rather than skips."""

import json
import os
import subprocess
import sys

import tomllib

import pytest

import ccswitch
from ccswitch import cli
from ccswitch.agent import algorithms
from ccswitch.experiments import environment


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "ccswitch", *args], capture_output=True, text=True, timeout=60,
                          env=dict(env if env is not None else os.environ, PYTHONPATH=os.pathsep.join(sys.path)))


def agent_binary():
    path = os.path.join(environment.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")
    return path


def workspace_version():
    with open(os.path.join(environment.repo_root(), "Cargo.toml"), "rb") as f:
        return tomllib.load(f)["workspace"]["package"]["version"]


def test_version_is_the_package_version_and_the_workspace_version():
    r = run_cli("--version")
    assert r.returncode == 0, r
    assert r.stdout.strip() == f"ccswitch {ccswitch.__version__}"
    assert ccswitch.__version__ == workspace_version(), "pyproject.toml and Cargo.toml disagree"
    agent = subprocess.run([agent_binary(), "--version"], capture_output=True, text=True, check=True)
    assert agent.stdout.strip() == f"ccswitch-agent {workspace_version()}"


def test_run_help_explains_every_scheme_form():
    r = run_cli("run", "--help")
    assert r.returncode == 0, r
    for form in ["native:reno|cubic|bbr", "kernel:ALG", "ovs:ALG", "NAME:PARAM=VALUE,...",
                 "py:MODULE:CLASS", "policy:NAME[:KEY=VALUE,...]", "policy:FILE[:KEY=VALUE,...]",
                 "kernel:cubic:beta=0.8", "kernel:policy:mystique", "ovs_server_cc"]:
        assert form in r.stdout, f"{form!r} not in run --help:\n{r.stdout}"
    # Kept as written: one line per form, not re-wrapped into a paragraph.
    assert "\n  kernel:ALG " in r.stdout, r.stdout


def test_every_example_scheme_in_the_help_parses():
    from ccswitch.experiments.scenario import parse_scheme
    import re

    examples = re.findall(r"e\.g\. ((?:native|kernel|ovs):\S+)", cli.SCHEMES_HELP)
    assert len(examples) >= 3, examples
    for text in examples:
        parse_scheme(text, "help")


def test_algorithms_lists_the_agents_builtin_policies_with_their_rules():
    agent = subprocess.run([agent_binary(), "--list-policies", "--json"], capture_output=True, text=True, check=True)
    from_agent = json.loads(agent.stdout)
    names = [p["name"] for p in from_agent]
    assert "mystique" in names and "mcc-wifi" in names, names

    r = run_cli("algorithms")
    assert r.returncode == 0, r
    assert "Built-in policies" in r.stdout
    for p in from_agent:
        assert f"{p['name']} (built-in {p['name']}): {p['description']}" in r.stdout
        assert f"initial: {p['initial']}" in r.stdout
        for i, rule in enumerate(p["rules"], 1):
            assert f"rule {i}: {rule['when']} -> {rule['use']}" in r.stdout, r.stdout
    mystique = next(p for p in from_agent if p["name"] == "mystique")
    assert [rule["use"] for rule in mystique["rules"]] == ["hybla", "illinois"]
    assert mystique["default"] == "bbr"

    r = run_cli("algorithms", "--json")
    assert r.returncode == 0, r
    listing = json.loads(r.stdout)
    assert listing["policies"] == from_agent
    assert [a["name"] for a in listing["algorithms"]] == [a["name"] for a in algorithms.list_algorithms()]


def test_analyze_without_an_analysis_names_the_kind_option(tmp_path):
    (tmp_path / "scenario.toml").write_text(
        'name = "plain"\nschemes = ["native:cubic"]\n'
        '[[clients]]\nname = "c"\nlink = { mbps = 24 }\nfile_bytes = 1000\n')
    r = run_cli("analyze", str(tmp_path))
    assert r.returncode == 2, r
    assert "the scenario names no analysis; choose one with --kind smoothness|mix|mcc" in r.stderr, r.stderr


def test_the_readme_calls_the_cli_one_way_without_sudo():
    with open(os.path.join(environment.repo_root(), "README.md")) as f:
        text = f.read()
    blocks = text.split("```")[1::2]  # the insides of the code blocks
    commands = [line.strip() for block in blocks for line in block.splitlines()]
    assert not [c for c in commands if c.startswith("sudo ")], "README runs commands with sudo"
    bare = [c for c in commands if c.startswith("ccswitch ")]
    assert not bare, f"README calls ccswitch without .venv/bin/: {bare}"
    assert sum(c.startswith(".venv/bin/ccswitch ") for c in commands) >= 10


def test_a_renamed_command_is_refused_with_its_new_name():
    r = run_cli("switching", "smoothness", "somewhere")
    assert r.returncode == 2 and "`ccswitch switching` was renamed: use `ccswitch handover`" in r.stderr, r


def test_the_old_operator_command_is_refused_with_its_new_name():
    r = run_cli("control", "list", "--socket", "/nowhere")
    assert r.returncode == 2 and "`ccswitch control` was renamed: use `ccswitch operator`" in r.stderr, r


def test_the_agents_old_operator_option_is_refused_with_its_new_name():
    r = subprocess.run([agent_binary(), "--control-socket", "/nowhere"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--control-socket was renamed: use --operator-socket" in r.stderr, r


def test_the_old_operator_socket_variable_is_refused_with_its_new_name():
    env = {k: v for k, v in os.environ.items() if k != "CCSWITCH_OPERATOR_SOCKET"}
    r = run_cli("operator", "list", env=dict(env, CCSWITCH_CONTROL_SOCKET="/nowhere"))
    assert r.returncode == 2 and "$CCSWITCH_CONTROL_SOCKET was renamed: set $CCSWITCH_OPERATOR_SOCKET" in r.stderr, r
