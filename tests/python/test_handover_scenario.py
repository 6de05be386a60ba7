"""Policy schemes in scenarios (`kernel:policy:NAME|FILE`, `ovs:policy:NAME|FILE`), the
scenario keys of the handover experiments, and how the agent is started for them."""

import os

import pytest

from ccswitch.experiments import scenario, tools
from ccswitch.experiments.scenario import (
    ScenarioError, load_scenario, loads_scenario, parse_scheme,
)
from ccswitch.topology.daemons import CcswitchDaemons

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

POLICY = """
name = "tiny"
initial = "cubic"
default = "bbr"
[window]
kind = "sliding"
samples = 1
[[rule]]
when = "elapsed_s < 1"
use = "cubic"
"""


def scenario_text(schemes, extra=""):
    quoted = ", ".join(f'"{s}"' for s in schemes)
    return (f'name = "t"\nschemes = [{quoted}]\n{extra}\n'
            '[[clients]]\nname = "c"\nlink = { mbps = 24 }\nfile_bytes = 1000\n')


def test_builtin_policies_with_and_without_parameters():
    s = parse_scheme("kernel:policy:mystique")
    assert (s.kind, s.algorithm, s.policy, s.label) == ("kernel", "policy:mystique", "mystique",
                                                        "kernel:policy:mystique")
    assert s.is_policy and s.uses_agent and s.kernel_cc == "ccswitch"
    s = parse_scheme("ovs:policy:mcc-wifi:rtt_cov_threshold=0.25,window.samples=30")
    assert s.policy == "mcc-wifi:rtt_cov_threshold=0.25,window.samples=30"
    assert s.kernel_cc is None and s.label == "ovs:policy:mcc-wifi:rtt_cov_threshold=0.25,window.samples=30"
    assert not parse_scheme("kernel:bbr").is_policy


@pytest.mark.parametrize("text, message", [
    ("ovs:policy:", "bad policy ''"),
    ("kernel:policy:mystique:loss_threshold", "bad policy 'mystique:loss_threshold'"),
    ("native:policy:mystique", "native algorithm must be one of"),
])
def test_bad_policy_schemes_say_what_is_wrong(text, message):
    with pytest.raises(ScenarioError) as e:
        parse_scheme(text, "schemes[2]")
    assert str(e.value).startswith(f"schemes[2]: {text!r}: "), str(e.value)
    assert message in str(e.value)


def test_policy_file_is_relative_to_the_scenario(tmp_path):
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "p.toml").write_text(POLICY)
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(["kernel:policy:policies/p.toml",
                                   "ovs:policy:policies/p.toml:default=westwood"]))
    sc = load_scenario(path)
    expected = str(tmp_path / "policies" / "p.toml")
    assert [s.policy for s in sc.schemes] == [expected, expected + ":default=westwood"]
    # labels stay as written
    assert sc.schemes[0].label == "kernel:policy:policies/p.toml"
    assert sc.bridge_kind == "ovs"


def test_missing_policy_file_names_the_scheme_and_the_path(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(["native:cubic", "kernel:policy:policies/absent.toml"]))
    with pytest.raises(ScenarioError) as e:
        load_scenario(path)
    msg = str(e.value)
    assert "schemes[1]: 'kernel:policy:policies/absent.toml'" in msg
    assert f"policy file not found: {tmp_path / 'policies' / 'absent.toml'}" in msg
    # without file checks (a copied scenario in a run directory) it still parses
    sc = load_scenario(path, check_files=False)
    assert sc.schemes[1].policy == str(tmp_path / "policies" / "absent.toml")


def test_malformed_policy_file_is_reported(tmp_path):
    (tmp_path / "bad.toml").write_text("name = \n")
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(["kernel:policy:bad.toml"]))
    with pytest.raises(ScenarioError, match=r"schemes\[0\].*policy file .*bad.toml: TOML syntax error"):
        load_scenario(path)


def test_command_line_policy_files_are_relative_to_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "p.toml").write_text(POLICY)
    monkeypatch.chdir(tmp_path)
    s = parse_scheme("kernel:policy:p.toml", "--schemes", base_dir=os.getcwd())
    assert s.policy == str(tmp_path / "p.toml")
    with pytest.raises(ScenarioError, match="--schemes: 'kernel:policy:q.toml': policy file not found"):
        parse_scheme("kernel:policy:q.toml", "--schemes", base_dir=os.getcwd())


@pytest.mark.parametrize("extra, message", [
    ('analysis = "speed"', "analysis: must be one of 'smoothness', 'mix', 'mcc', got 'speed'"),
    ('plots = ["tct"]', "plots: must be a list of 'flows'"),
    ('plots = "flows"', "plots: must be a list of 'flows'"),
    ('plot_schemes = ["kernel:reno"]', "plot_schemes[0]: 'kernel:reno' is not one of the schemes"),
])
def test_output_keys_are_checked(extra, message):
    with pytest.raises(ScenarioError) as e:
        loads_scenario(scenario_text(["kernel:bbr"], extra))
    assert message in str(e.value)


def test_output_keys():
    sc = loads_scenario(scenario_text(["kernel:bbr", "kernel:policy:mystique"],
                                      'analysis = "mix"\nplots = ["flows"]\nplot_schemes = ["kernel:bbr"]'))
    assert (sc.analysis, sc.plots, sc.plot_schemes) == ("mix", ("flows",), ("kernel:bbr",))
    sc = loads_scenario(scenario_text(["kernel:bbr"]))
    assert (sc.analysis, sc.plots, sc.plot_schemes) == (None, (), ())


def test_the_switching_scenarios():
    smooth = load_scenario(os.path.join(REPO, "experiments", "handover-smoothness.toml"))
    policy_file = os.path.join(REPO, "experiments", "policies", "cubic-bbr-westwood.toml")
    assert {s.kind for s in smooth.schemes if s.policy == policy_file} == {"kernel", "ovs"}
    for kind in ("kernel", "ovs"):
        for alg in ("bbr", "westwood"):
            assert f"{kind}:{alg}" in {s.label for s in smooth.schemes}
    (c,) = smooth.clients
    assert (c.link.downlink_mbps, 2 * c.delay_ms, c.loss_downlink) == (2.0, 30, 0.04)
    assert smooth.analysis == "smoothness" and "flows" in smooth.plots

    mix = load_scenario(os.path.join(REPO, "experiments", "mystique-mix.toml"))
    assert len(mix.clients) >= 5 and mix.analysis == "mix" and mix.bridge_kind == "ovs"
    labels = {s.label for s in mix.schemes}
    for kind in ("kernel", "ovs"):
        assert {f"{kind}:{a}" for a in ("cubic", "hybla", "illinois", "bbr", "policy:mystique")} <= labels
    rtts = [2 * c.delay_ms for c in mix.clients]
    assert min(rtts) <= 2 and max(rtts) >= 300
    assert max(c.loss_downlink for c in mix.clients) == 0.03
    assert any(not c.link.is_constant for c in mix.clients), "one cellular trace"
    assert all(c.file_sizes == (1_200_000, 20_000_000) for c in mix.clients)

    mcc = load_scenario(os.path.join(REPO, "experiments", "mcc-wifi.toml"))
    assert {"kernel:bbr", "kernel:westwood", "kernel:policy:mcc-wifi"} <= {s.label for s in mcc.schemes}
    assert [c.link.is_constant for c in mcc.clients] == [False, True]
    assert mcc.analysis == "mcc"


def daemons(tmp_path, events=True):
    procs = object()  # not used before an agent is started
    return CcswitchDaemons(procs, None, "/bin-dir", str(tmp_path), str(tmp_path / "logs"),
                           events_dir=str(tmp_path / "events") if events else None)


def test_agent_command_for_policies_and_events(tmp_path):
    d = daemons(tmp_path)
    d.events_path = str(tmp_path / "events" / "agent-001.jsonl")
    cmd = d.agent_command("policy:mystique", "mystique")
    assert cmd[0] == "/bin-dir/ccswitch-agent"
    assert cmd[cmd.index("--policy") + 1] == "mystique" and "--algorithm" not in cmd
    assert cmd[cmd.index("--events") + 1] == d.events_path
    cmd = d.agent_command("cubic:beta=0.8")
    assert cmd[cmd.index("--algorithm") + 1] == "cubic:beta=0.8" and "--policy" not in cmd
    d = daemons(tmp_path, events=False)
    assert "--events" not in d.agent_command("reno")


def test_policies_run_without_destination_memory_unless_the_scenario_keeps_it(tmp_path):
    """Every client reaches the server from one NAT address: the memory would carry one
    path's choice to the next path's flows."""
    d = daemons(tmp_path)
    assert "--no-destination-memory" in d.agent_command("policy:mystique", "mystique")
    assert "--no-destination-memory" not in d.agent_command("bbr")
    d.destination_memory = True
    assert "--no-destination-memory" not in d.agent_command("policy:mystique", "mystique")
    base = """
name = "m"
schemes = ["kernel:policy:mystique"]
[[clients]]
name = "c"
link = { mbps = 10 }
file_bytes = 100_000
"""
    assert scenario.loads_scenario(base).destination_memory is False
    assert scenario.loads_scenario("destination_memory = true\n" + base).destination_memory is True
    with pytest.raises(scenario.ScenarioError, match="destination_memory: must be true or false"):
        scenario.loads_scenario("destination_memory = 1\n" + base)


def test_parse_ss_peer():
    text = ("0      0      198.18.0.2:8080 198.18.0.1:49880\n"
            "\t cubic wscale:7,7 rto:204 rtt:30.1/2 mss:1448 cwnd:10\n")
    assert tools.parse_ss_peer(text) == "198.18.0.1:49880"
    assert tools.parse_ss_peer("0 0 [::ffff:198.18.0.2]:8080 [::ffff:198.18.0.1]:5000\n") == "198.18.0.1:5000"
    assert tools.parse_ss_peer("") is None
