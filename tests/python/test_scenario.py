import os
import re

import pytest

from ccswitch.experiments.scenario import (Flow, ScenarioError, ScheduleStep, Workload, check_schemes, load_scenario,
                                          load_scenario_report, loads_scenario, parse_scheme)

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

GOOD = """
name = "demo"
repetitions = 3
schemes = ["native:cubic", "native:bbr", "kernel:reno"]
[[clients]]
name = "clean"
delay_ms = 25
loss_downlink = 0.01
link = { mbps = 24 }
queue_packets = 120
file_bytes = 4_000_000
[[clients]]
name = "asym"
link = { uplink_mbps = 2, downlink_mbps = 12.5 }
file_sizes = [1000, 2000]
"""


def parse(text):
    return loads_scenario(text, check_files=False)


def test_good_scenario():
    sc = parse(GOOD)
    assert sc.name == "demo" and sc.repetitions == 3 and sc.timeout_s == 120
    assert [s.label for s in sc.schemes] == ["native:cubic", "native:bbr", "kernel:reno"]
    assert [s.kernel_cc for s in sc.schemes] == ["cubic", "bbr", "ccswitch"]
    c0, c1 = sc.clients
    assert (c0.delay_ms, c0.loss_downlink, c0.loss_uplink, c0.queue_packets) == (25, 0.01, 0.0, 120)
    assert c0.link.uplink_mbps == c0.link.downlink_mbps == 24 and c0.link.is_constant
    assert c0.file_sizes == (4_000_000,)
    assert (c1.link.uplink_mbps, c1.link.downlink_mbps, c1.delay_ms, c1.queue_packets) == (2, 12.5, 0, None)
    assert c1.file_sizes == (1000, 2000)
    assert sc.uses_kernel
    assert sc.n_transfers == 3 * 3 * 3 == len(list(sc.transfers()))


def test_scheme_order_rotates_each_repetition():
    sc = parse(GOOD)
    orders = [[s.label for s in sc.scheme_order(r)] for r in range(4)]
    assert orders[0] == ["native:cubic", "native:bbr", "kernel:reno"]
    assert orders[1] == ["native:bbr", "kernel:reno", "native:cubic"]
    assert orders[2] == ["kernel:reno", "native:cubic", "native:bbr"]
    assert orders[3] == orders[0]
    sched = list(sc.transfers())
    # repetition-major, then client, then scheme, then size
    assert [(r, c.name) for r, c, _, _ in sched[:4]] == [(0, "clean")] * 3 + [(0, "asym")]


def test_trace_link_relative_to_scenario(tmp_path):
    (tmp_path / "u.trace").write_text("1\n")
    (tmp_path / "d.trace").write_text("1\n")
    f = tmp_path / "s.toml"
    f.write_text('name="t"\nschemes=["native:reno"]\n[[clients]]\nname="c"\n'
                 'link={uplink="u.trace", downlink="d.trace"}\nfile_bytes=10\n')
    sc = load_scenario(f)
    assert sc.clients[0].link.downlink_trace == str(tmp_path / "d.trace")
    assert not sc.clients[0].link.is_constant


def test_repo_scenarios_are_valid():
    for name in ("demo.toml", "kernel-fidelity.toml", "algorithms-grid.toml", "ovs-vs-native.toml",
                 "ovs-smoke.toml"):
        sc = load_scenario(os.path.join(REPO, "experiments", name), check_files=False)
        assert sc.clients and sc.schemes


def test_kernel_fidelity_shape():
    sc = load_scenario(os.path.join(REPO, "experiments", "kernel-fidelity.toml"))
    assert {s.label for s in sc.schemes} == {f"{kind}:{alg}" for kind in ("native", "kernel")
                                             for alg in ("reno", "cubic", "bbr")}
    assert sc.repetitions >= 5
    constant = [c for c in sc.clients if c.link.is_constant]
    # clean, 1% by mm-loss, and 1% drawn per segment by the schedule (the same drops for all)
    downlink_loss = [c.loss_downlink + sum(step.loss_downlink for step in c.schedule) for c in constant]
    assert sorted(downlink_loss) == [0.0, 0.01, 0.01]
    assert [c.loss_draws for c in constant if c.schedule] == ["segment"]
    for c in constant:
        assert c.delay_ms == 25 and c.link.downlink_mbps == 24
    assert [c for c in sc.clients if not c.link.is_constant], "one cellular trace"
    for c in sc.clients:
        assert c.file_sizes == (10_485_760,)


def test_algorithms_grid_covers_every_algorithm():
    from ccswitch.agent.algorithms import list_algorithms
    sc = load_scenario(os.path.join(REPO, "experiments", "algorithms-grid.toml"))
    in_grid = {s.algorithm for s in sc.schemes if s.kind == "kernel"}
    simple = {a["name"] for a in list_algorithms() if a["api"] == "simple"}
    assert simple <= in_grid, f"missing from the grid: {simple - in_grid}"
    assert {s.algorithm for s in sc.schemes if s.kind == "native"} == {"reno", "cubic", "bbr"}
    rtts = {2 * c.delay_ms for c in sc.clients if c.link.is_constant}
    losses = {c.loss_downlink for c in sc.clients if c.link.is_constant}
    assert min(rtts) <= 50 and max(rtts) >= 300 and 0.0 in losses and max(losses) >= 0.03
    assert len([c for c in sc.clients if c.link.is_constant]) == len(rtts) * len(losses)
    assert [c for c in sc.clients if not c.link.is_constant], "one cellular trace"


def replace(old, new):
    assert old in GOOD
    return GOOD.replace(old, new, 1)


@pytest.mark.parametrize("text, message", [
    (replace('name = "demo"', 'nam = "demo"'), "nam: unknown key"),
    (replace('name = "demo"', ''), "name: required"),
    (replace('name = "demo"', 'name = "a b"'), "name: must match"),
    (replace("repetitions = 3", "repetitions = 0"), "repetitions: must be an integer >= 1"),
    (replace("repetitions = 3", "repetitions = 2.5"), "repetitions: must be an integer >= 1"),
    (replace("repetitions = 3", "timeout_s = -1"), "timeout_s: must be a number"),
    (replace('"native:bbr"', '"native:vegas"'), "schemes[1]: 'native:vegas': native algorithm must be one of"),
    (replace('"native:bbr"', '"tcp:bbr"'), "schemes[1]: 'tcp:bbr': kind must be"),
    (replace('"native:bbr"', '"bbr"'), "schemes[1]: 'bbr' is not a scheme"),
    (replace('"native:bbr"', '"native:cubic"'), "schemes: duplicate scheme 'native:cubic'"),
    (replace('schemes = ["native:cubic", "native:bbr", "kernel:reno"]', 'schemes = []'), "schemes: must be a non-empty list"),
    (replace("delay_ms = 25", "delay_ms = -3"), "clients[0].delay_ms: must be an integer >= 0, got -3"),
    (replace("delay_ms = 25", "delay_ms = 2.5"), "clients[0].delay_ms: must be an integer >= 0"),
    (replace("delay_ms = 25", "dleay_ms = 25"), "clients[0].dleay_ms: unknown key"),
    (replace("loss_downlink = 0.01", "loss_downlink = 1.5"), "clients[0].loss_downlink: must be a number in [0.0, 1.0)"),
    (replace("loss_downlink = 0.01", "loss_uplink = -0.1"), "clients[0].loss_uplink: must be a number"),
    (replace("link = { mbps = 24 }", ""), "clients[0].link: required"),
    (replace("link = { mbps = 24 }", "link = { mbps = 0 }"),
     "clients[0].link.mbps: 0 Mbit/s is outside what mahimahi can emulate here (0.012 to 1000 Mbit/s)"),
    (replace("link = { mbps = 24 }", "link = { mbps = 100000 }"),
     "clients[0].link.mbps: 100000 Mbit/s is outside what mahimahi can emulate here"),
    (replace("link = { mbps = 24 }", "link = { mbps = 0.001 }"), "clients[0].link.mbps: 0.001 Mbit/s is outside"),
    (replace("link = { mbps = 24 }", 'link = { mbps = "fast" }'), "clients[0].link.mbps: must be a rate in Mbit/s, got 'fast'"),
    (replace("uplink_mbps = 2, ", "uplink_mbps = 5000, "), "clients[1].link.uplink_mbps: 5000 Mbit/s is outside"),
    (replace("file_bytes = 4_000_000", "file_bytes = 4_000_000_000"),
     "clients[0].file_bytes: 4000000000 bytes take at least 1333 s at 24 Mbit/s, more than timeout_s = 120"),
    (replace("link = { mbps = 24 }", "link = { mbps = 24, uplink = \"x\" }"), "clients[0].link: give either a rate"),
    (replace("link = { mbps = 24 }", "link = { rate = 24 }"), "clients[0].link.rate: unknown key"),
    (replace("link = { mbps = 24 }", "link = { uplink = \"x\" }"), "clients[0].link.downlink: required"),
    (replace("link = { mbps = 24 }", "link = 24"), "clients[0].link: must be a table"),
    (replace("uplink_mbps = 2, ", ""), "clients[1].link.uplink_mbps: required"),
    (replace("queue_packets = 120", "queue_packets = 0"), "clients[0].queue_packets: must be an integer >= 1"),
    (replace("file_bytes = 4_000_000", ""), "clients[0].file_bytes: required"),
    (replace("file_bytes = 4_000_000", "file_bytes = 4_000_000\nfile_sizes = [1]"), "clients[0].file_sizes: give either"),
    (replace("file_sizes = [1000, 2000]", "file_sizes = [1000, -2]"), "clients[1].file_sizes[1]: must be an integer >= 1"),
    (replace("file_sizes = [1000, 2000]", "file_sizes = []"), "clients[1].file_sizes: must be a non-empty list"),
    (replace('name = "asym"', 'name = "clean"'), "clients: duplicate client name 'clean'"),
    (replace('name = "asym"', ''), "clients[1].name: required"),
    ('name = "x"\nschemes = ["native:reno"]\n', "clients: required"),
    ('name = "x"\nschemes = ["native:reno"\n', "TOML syntax error"),
])
def test_errors_name_the_key(text, message):
    with pytest.raises(ScenarioError) as e:
        parse(text)
    assert message in str(e.value)


def test_missing_trace_file_is_reported(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('name="t"\nschemes=["native:reno"]\n[[clients]]\nname="c"\n'
                 'link={uplink="/nonexistent/u", downlink="/nonexistent/d"}\nfile_bytes=10\n')
    with pytest.raises(ScenarioError, match=r"clients\[0\]\.link\.uplink: trace file not found"):
        load_scenario(f)


def test_unreadable_file_is_reported(tmp_path):
    with pytest.raises(ScenarioError, match="cannot read scenario"):
        load_scenario(tmp_path / "missing.toml")


@pytest.mark.parametrize("old, new", [
    ("ccswitch:bbr", "kernel:bbr"),
    ("ccswitch:cubic:beta=0.8", "kernel:cubic:beta=0.8"),
    ("ccswitch:py:ccswitch.examples.reno:Reno", "kernel:py:ccswitch.authoring.examples.reno:Reno"),
    ("ccswitch:policy:mystique", "kernel:policy:mystique"),
    ("switch:reno", "ovs:reno"),
    ("switch:policy:mcc-wifi", "ovs:policy:mcc-wifi"),
])
def test_old_scheme_names_are_refused_with_the_new_ones(old, new):
    with pytest.raises(ScenarioError) as e:
        parse_scheme(old, "schemes[1]")
    assert str(e.value) == (f'schemes[1]: scheme "{old}": renamed, write "{new}" '
                            '(the kernel datapath is "kernel:", the Open vSwitch one "ovs:")')
    assert parse_scheme(old, stored=True).label == new, "stored runs keep being read"


def test_old_scenario_key_is_refused_but_read_in_stored_runs():
    text = OVS.replace('name = "sw"', 'name = "sw"\nswitch_server_cc = "reno"')
    with pytest.raises(ScenarioError, match="switch_server_cc: renamed, write ovs_server_cc"):
        parse(text)
    old = text.replace('"ovs:', '"switch:')
    sc = loads_scenario(old, stored=True)
    assert sc.ovs_server_cc == "reno" and sc.schemes[0].label == "ovs:bbr"


def test_compare_names_pairs_of_the_runs_schemes():
    assert parse(GOOD).compare == ()
    sc = parse(GOOD.replace('repetitions = 3', 'repetitions = 3\ncompare = [["kernel:reno", "native:cubic"]]'))
    assert sc.compare == (("kernel:reno", "native:cubic"),)
    for bad, message in [('[["ovs:bbr", "native:cubic"]]', "compare[0]: 'ovs:bbr' is not one of the schemes"),
                         ('[["kernel:reno"]]', 'compare[0]: must be a pair of schemes'),
                         ('"kernel:reno"', 'compare: must be a list of scheme pairs'),
                         ('[["native:bbr", "native:bbr"]]', "compare[0]: compares 'native:bbr' with itself")]:
        with pytest.raises(ScenarioError, match=re.escape(message)):
            parse(GOOD.replace('repetitions = 3', f'repetitions = 3\ncompare = {bad}'))
    old = OVS.replace('"ovs:', '"switch:').replace('name = "sw"', 'name = "sw"\ncompare = [["switch:bbr", "native:cubic"]]')
    assert loads_scenario(old, stored=True).compare == (("ovs:bbr", "native:cubic"),)


def test_parse_scheme():
    assert parse_scheme("kernel:my_alg-2").label == "kernel:my_alg-2"
    with pytest.raises(ScenarioError):
        parse_scheme("kernel:Bad Name")


OVS = """
name = "sw"
schemes = ["ovs:bbr", "native:cubic", "ovs:cubic:beta=0.7", "ovs:py:mymod:MyAlg"]
[[clients]]
name = "c"
link = { mbps = 24 }
file_bytes = 1000
"""


def test_ovs_schemes_get_an_ovs_bridge_and_a_stock_server():
    sc = parse(OVS)
    assert [s.kind for s in sc.schemes] == ["ovs", "native", "ovs", "ovs"]
    assert sc.schemes[2].algorithm == "cubic:beta=0.7" and sc.schemes[3].algorithm == "py:mymod:MyAlg"
    assert sc.uses_ovs and sc.uses_agent and not sc.uses_kernel
    assert sc.bridge is None and sc.bridge_kind == "ovs", "every scheme crosses the bridge"
    assert sc.schemes[0].kernel_cc is None and sc.schemes[0].uses_agent
    assert [sc.server_cc(s) for s in sc.schemes] == ["cubic"] * 4
    sc = parse(OVS.replace('name = "sw"', 'name = "sw"\novs_server_cc = "reno"\nbridge = "linux"'))
    assert sc.bridge_kind == "linux"
    assert [sc.server_cc(s) for s in sc.schemes] == ["reno", "cubic", "reno", "reno"]


def test_bridge_defaults_and_explicit_values():
    assert parse(GOOD).bridge_kind == "none"
    assert not parse(GOOD).uses_ovs
    for b in ("ovs", "linux", "none"):
        assert parse(GOOD.replace("repetitions = 3", f'repetitions = 3\nbridge = "{b}"')).bridge_kind == b


@pytest.mark.parametrize("text, message", [
    (OVS.replace('name = "sw"', 'name = "sw"\nbridge = "none"'),
     "bridge: 'ovs:bbr' needs a bridge (\"ovs\" or \"linux\")"),
    (OVS.replace('name = "sw"', 'name = "sw"\nbridge = "vde"'), "bridge: must be one of 'none', 'ovs', 'linux'"),
    (OVS.replace('name = "sw"', 'name = "sw"\nbridge = 1'), "bridge: must be one of"),
    (OVS.replace('name = "sw"', 'name = "sw"\novs_server_cc = "vegas"'), "ovs_server_cc: must be one of"),
    (OVS.replace('"ovs:bbr"', '"ovs:b br"'), "schemes[0]: 'ovs:b br': bad algorithm"),
    (OVS.replace('"ovs:bbr"', '"ovs:"'), "schemes[0]: 'ovs:': bad algorithm"),
    (OVS.replace('"native:cubic"', '"ovs:bbr"'), "schemes: duplicate scheme 'ovs:bbr'"),
    (OVS.replace('"ovs:bbr"', '"ovz:bbr"'), "kind must be 'native', 'kernel' or 'ovs'"),
])
def test_ovs_errors_name_the_key(text, message):
    with pytest.raises(ScenarioError) as e:
        parse(text)
    assert message in str(e.value)


def test_bridge_check_after_schemes_are_replaced():
    """`ccswitch run --schemes switch:...` on a scenario without ovs schemes gets a bridge;
    an explicit bridge = "none" refuses them."""
    sc = parse(GOOD)
    sc.schemes = [parse_scheme("ovs:reno")]
    sc.check_bridge()
    assert sc.bridge_kind == "ovs"
    sc.bridge = "none"
    with pytest.raises(ScenarioError, match="needs a bridge"):
        sc.check_bridge()


def test_ovs_vs_native_shape():
    sc = load_scenario(os.path.join(REPO, "experiments", "ovs-vs-native.toml"))
    assert [s.label for s in sc.schemes] == ["ovs:bbr", "native:bbr", "native:cubic", "ovs:reno", "native:reno"]
    assert sc.bridge_kind == "ovs" and sc.ovs_server_cc == "cubic" and sc.repetitions >= 5
    constant = [c for c in sc.clients if c.link.is_constant]
    grid = {(2 * c.delay_ms, c.loss_downlink) for c in constant}
    assert grid == {(rtt, loss) for rtt in (20, 100, 200) for loss in (0.0, 0.01, 0.02)}
    for c in constant:
        assert c.link.uplink_mbps == c.link.downlink_mbps == 24
        bdp_packets = 24e6 * 2 * c.delay_ms / 1000 / (1500 * 8)
        assert c.queue_packets >= 30 and 0.75 * bdp_packets <= c.queue_packets <= 1.5 * max(bdp_packets, 30), c
    cellular = [c for c in sc.clients if not c.link.is_constant]
    assert len(cellular) == 1 and "TMobile-LTE-short" in cellular[0].link.downlink_trace
    assert cellular[0].queue_packets is not None
    for c in sc.clients:
        assert c.file_sizes == (10_485_760,)
    # Mathis' rate for a loss-based sender at 2 % and 200 ms, with margin for timeouts
    slowest_s = 10_485_760 * 8 / (1448 * 8 / 0.2 * 1.22 / 0.02 ** 0.5)
    assert sc.timeout_s >= 2 * slowest_s


# ------------------------------------------------- schemes judged by the agent, paths in words

MIXED = """
name = "mixed"
schemes = ["native:cubic", "kernel:reno", "kernel:cubic:betta=0.5", "ovs:reno", "kernel:policy:mystique"]
[[clients]]
name = "c"
link = { mbps = 24 }
file_bytes = 1000
"""


def test_check_schemes_asks_every_agent_command_line_once_and_names_the_refused_scheme():
    sc = parse(MIXED)
    asked = []

    def checker(algorithm, policy):
        asked.append((algorithm, policy))
        return 'cubic has no parameter "betta"; it takes: beta, c' if algorithm == "cubic:betta=0.5" else None

    with pytest.raises(ScenarioError) as e:
        check_schemes(sc, checker)
    assert str(e.value) == "schemes[2]: 'kernel:cubic:betta=0.5': cubic has no parameter \"betta\"; it takes: beta, c"
    # kernel:reno and ovs:reno start the same agent: asked once; native schemes never; a
    # refusal does not stop the others being asked
    assert asked == [("reno", None), ("cubic:betta=0.5", None), (None, "mystique")]
    asked.clear()
    good = parse(MIXED.replace('"kernel:cubic:betta=0.5", ', ""))
    check_schemes(good, checker)
    assert asked == [("reno", None), (None, "mystique")]


def test_a_scheme_given_on_the_command_line_is_named_as_such():
    sc = parse(MIXED)
    sc.schemes = [parse_scheme("kernel:bbrr", "--schemes")]
    with pytest.raises(ScenarioError, match=r"^--schemes: 'kernel:bbrr': unknown algorithm"):
        check_schemes(sc, lambda a, p: f'unknown algorithm "{a}"')


def test_algorithm_names_and_parameters_are_left_to_the_agent():
    """No copy of the agent's list in Python: anything word-like passes loading (and is then
    judged by check_schemes); only what cannot be a word is refused here."""
    for alg in ("bbrr", "cubic:beta=abc", "py:nonexistent.mod:X", "BBR"):
        assert parse_scheme(f"kernel:{alg}").algorithm == alg
    with pytest.raises(ScenarioError, match="bad algorithm"):
        parse_scheme("kernel:")


def test_clients_describe_their_path_in_words_and_as_columns():
    sc = parse(GOOD)
    clean = sc.clients[0]
    assert clean.describe_path() == "RTT 50 ms, 24 Mbit/s, loss 1% down, queue 120 pkts"
    f = clean.path_fields()
    assert (f["rtt_ms"], f["delay_ms"], f["loss_downlink"], f["downlink_mbps"], f["queue_packets"]) == (50, 25, 0.01, 24.0, 120)
    assert f["downlink_trace"] is None and f["path"] == clean.describe_path()
    asym = sc.clients[1]
    assert asym.describe_path() == "RTT 0 ms, 2/12.5 Mbit/s up/down, unbounded queue"


def test_timeouts_are_checked_again_after_an_override():
    sc = parse(GOOD)
    sc.timeout_s = 1.0  # --timeout 1: 4 MB at 24 Mbit/s needs 1.3 s
    with pytest.raises(ScenarioError, match=r"clients\[0\]\.file_bytes: 4000000 bytes take at least 1 s at 24 Mbit/s, "
                                            r"more than timeout_s = 1"):
        sc.check_timeouts()


# ------------------------------------------------- every problem in one report

def problems_of(text, **kw):
    with pytest.raises(ScenarioError) as e:
        loads_scenario(text, check_files=False, **kw)
    return e.value.problems


def test_every_problem_of_a_file_is_reported_at_once_each_on_its_own_line():
    text = (GOOD.replace('"native:bbr"', '"native:vegas"').replace("delay_ms = 25", "delay_ms = -3")
            .replace("queue_packets = 120", "queue_packets = 0").replace("repetitions = 3", "repetitions = 0"))
    with pytest.raises(ScenarioError) as e:
        loads_scenario(text, source="x.toml", check_files=False)
    assert e.value.problems == [
        "repetitions: must be an integer >= 1, got 0",
        "schemes[1]: 'native:vegas': native algorithm must be one of reno, cubic, bbr (the only built-in "
        "congestion controls of this kernel)",
        "clients[0].delay_ms: must be an integer >= 0, got -3",
        "clients[0].queue_packets: must be an integer >= 1, got 0",
    ]
    assert str(e.value) == "4 problems in x.toml:\n" + "\n".join(e.value.problems)
    # the schemes that parsed are kept for the agent to judge
    assert [s.label for s in e.value.partial_schemes] == ["native:cubic", "kernel:reno"]


def test_one_problem_is_one_line_after_the_files_name():
    with pytest.raises(ScenarioError) as e:
        loads_scenario(GOOD.replace("delay_ms = 25", "delay_ms = -3"), source="x.toml", check_files=False)
    assert str(e.value) == "x.toml: clients[0].delay_ms: must be an integer >= 0, got -3"
    assert e.value.problems == ["clients[0].delay_ms: must be an integer >= 0, got -3"]


def test_a_bad_client_is_left_out_but_the_others_are_still_checked():
    text = GOOD.replace("link = { mbps = 24 }", "link = 24").replace("file_sizes = [1000, 2000]", "file_sizes = [0]")
    assert problems_of(text) == [
        "clients[0].link: must be a table, e.g. { mbps = 24 } or { uplink = \"FILE\", downlink = \"FILE\" }",
        "clients[1].file_sizes[0]: must be an integer >= 1, got 0",
    ]


def test_a_bad_scheme_is_not_reported_again_by_the_keys_that_name_it():
    text = GOOD.replace('"native:bbr"', '"native:vegas"').replace(
        "repetitions = 3", 'repetitions = 3\ncompare = [["native:vegas", "native:cubic"]]\nplot_schemes = ["native:vegas"]')
    assert problems_of(text) == ["schemes[1]: 'native:vegas': native algorithm must be one of reno, cubic, bbr "
                                 "(the only built-in congestion controls of this kernel)"]


def test_unknown_keys_are_each_named():
    text = GOOD.replace("delay_ms = 25", "dleay_ms = 25\nqueue = 3")
    assert [p.split(":")[0] for p in problems_of(text)] == ["clients[0].dleay_ms", "clients[0].queue"]


def test_the_agents_refusals_join_the_files_own_problems_in_the_order_of_the_schemes(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text(GOOD.replace('["native:cubic", "native:bbr", "kernel:reno"]',
                              '["kernel:cubic:betta=0.5", "native:vegas", "kernel:nosuch", "kernel:reno"]')
                 .replace("delay_ms = 25", "delay_ms = -3"))
    refusals = {"cubic:betta=0.5": "no betta", "nosuch": "unknown algorithm"}
    with pytest.raises(ScenarioError) as e:
        load_scenario_report(f, lambda a, p: refusals.get(a))
    assert e.value.problems == [
        "schemes[0]: 'kernel:cubic:betta=0.5': no betta",
        "schemes[1]: 'native:vegas': native algorithm must be one of reno, cubic, bbr (the only built-in "
        "congestion controls of this kernel)",
        "schemes[2]: 'kernel:nosuch': unknown algorithm",
        "clients[0].delay_ms: must be an integer >= 0, got -3",
    ]
    assert str(e.value).startswith(f"4 problems in {f}:\n")
    # a file without problems of its own: the agent's refusals alone, all of them
    f.write_text(GOOD.replace('["native:cubic", "native:bbr", "kernel:reno"]', '["kernel:nosuch", "kernel:cubic:betta=0.5"]'))
    with pytest.raises(ScenarioError) as e:
        load_scenario_report(f, lambda a, p: refusals.get(a))
    assert e.value.problems == ["schemes[0]: 'kernel:nosuch': unknown algorithm",
                                "schemes[1]: 'kernel:cubic:betta=0.5': no betta"]
    f.write_text(GOOD)
    assert load_scenario_report(f, lambda a, p: None).name == "demo"


SIX_FAULTS = """
name = "six-faults"
schemes = ["kernel:cubic:betta=0.5", "kernel:nosuch", "native:vegas", "native:cubic"]
[[clients]]
name = "near"
delay_ms = 10
link = { mbps = 24 }
file_bytes = 100_000
[[clients]]
name = "negative"
delay_ms = -3
link = { mbps = 24 }
file_bytes = 100_000
[[clients]]
name = "no-trace"
link = { uplink = "missing.up", downlink = "missing.down" }
file_bytes = 100_000
[[clients]]
name = "no-queue"
link = { mbps = 24 }
queue_packets = 0
file_bytes = 100_000
"""


def six_fault_file(tmp_path):
    f = tmp_path / "six.toml"
    f.write_text(SIX_FAULTS)
    return f


def expected_six(tmp_path):
    return [
        "schemes[0]: 'kernel:cubic:betta=0.5': cubic has no parameter \"betta\"; it takes: beta, c",
        "schemes[1]: 'kernel:nosuch': unknown algorithm \"nosuch\"",
        "schemes[2]: 'native:vegas': native algorithm must be one of reno, cubic, bbr",
        "clients[1].delay_ms: must be an integer >= 0, got -3",
        f"clients[2].link.uplink: trace file not found: {tmp_path / 'missing.up'}",
        "clients[3].queue_packets: must be an integer >= 1, got 0",
    ]


def test_a_file_with_six_faults_is_refused_with_all_six_named_by_the_agent_itself(tmp_path):
    """The agent-judged problems come from the real agent binary (its own reasons)."""
    from ccswitch.experiments import environment
    from ccswitch.topology.daemons import agent_check_env, check_agent_spec
    agent = os.path.join(environment.bin_dir(), "ccswitch-agent")
    assert os.access(agent, os.X_OK), f"{agent} not built (make build)"
    env = agent_check_env([str(tmp_path)])
    with pytest.raises(ScenarioError) as e:
        load_scenario_report(six_fault_file(tmp_path), lambda a, p: check_agent_spec(agent, a, p, env))
    problems = e.value.problems
    assert len(problems) == 6, "\n".join(problems)
    for line, start in zip(problems, expected_six(tmp_path)):
        assert line.startswith(start), (line, start)
    assert str(e.value).startswith(f"6 problems in {tmp_path / 'six.toml'}:\n")


def test_ccswitch_run_prints_all_six_problems_and_exits_2(tmp_path):
    import subprocess
    import sys
    f = six_fault_file(tmp_path)
    out = tmp_path / "out"
    cp = subprocess.run([sys.executable, "-m", "ccswitch", "run", str(f), "--out", str(out)],
                        capture_output=True, text=True, timeout=120,
                        env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert cp.returncode == 2, cp.stderr
    assert f"6 problems in {f}:" in cp.stderr, cp.stderr
    lines = cp.stderr.splitlines()
    for start in expected_six(tmp_path):
        assert any(line.startswith(start) for line in lines), (start, cp.stderr)
    assert not out.exists()


# ------------------------------------------------- competing flows, workloads, schedules

NEW = """
name = "new"
schemes = ["kernel:bbr", "native:cubic"]
timeout_s = 60
[[clients]]
name = "compete"
delay_ms = 20
link = { mbps = 24 }
queue_packets = 320
file_bytes = 20_000_000
"""


def new_client(extra, base=NEW):
    return loads_scenario(base + extra, check_files=False).clients[0]


def test_flows_entries_default_to_one_flow_of_the_scheme_under_test_from_the_start():
    c = new_client('flows = [{ scheme = "native:cubic", start_s = 0 }, { start_s = 2, count = 3, file_bytes = 1000 }]\n')
    competitor, own = c.flows
    assert competitor.scheme.label == "native:cubic" and (competitor.start_s, competitor.count) == (0.0, 1)
    assert competitor.file_bytes is None, "the unit's file size"
    assert own == Flow(scheme=None, start_s=2.0, count=3, file_bytes=1000)
    assert c.n_flows == 4 and c.describe_path().endswith("queue 320 pkts, 4 flows")
    assert new_client("").flows == () and new_client("").n_flows == 1


def test_a_schedule_fills_left_out_keys_from_the_step_before():
    c = new_client("schedule = [{ at_s = 0, delay_ms = 20 }, { at_s = 5, delay_ms = 150, loss_downlink = 0.01 },"
                   " { at_s = 8, loss_uplink = 0.02 }]\n")
    assert c.schedule == (ScheduleStep(0.0, 20.0, 0.0, 0.0), ScheduleStep(5.0, 150.0, 0.01, 0.0),
                          ScheduleStep(8.0, 150.0, 0.01, 0.02))
    assert c.describe_path() == ("RTT 40 ms, 24 Mbit/s, queue 320 pkts, "
                                 "schedule: 20 ms -> 150 ms +1% loss at 5 s +2% loss up at 8 s")
    assert c.path_fields()["schedule"] == [
        {"at_s": 0.0, "delay_ms": 20.0, "loss_downlink": 0.0, "loss_uplink": 0.0},
        {"at_s": 5.0, "delay_ms": 150.0, "loss_downlink": 0.01, "loss_uplink": 0.0},
        {"at_s": 8.0, "delay_ms": 150.0, "loss_downlink": 0.01, "loss_uplink": 0.02}]
    assert new_client("").path_fields()["schedule"] is None



def test_a_schedule_may_draw_its_loss_per_segment_and_the_unit_key_says_so():
    from ccswitch.experiments.units import unit_key
    steps = "schedule = [{ at_s = 0, delay_ms = 25, loss_downlink = 0.01 }]\n"
    per_packet, per_segment = new_client(steps), new_client(steps + 'loss_draws = "segment"\n')
    assert per_packet.loss_draws == "packet" and per_segment.loss_draws == "segment"
    assert per_segment.describe_path().endswith("schedule: 25 ms 1% loss, loss drawn per segment")
    assert per_segment.path_fields()["loss_draws"] == "segment"
    assert new_client("").path_fields()["loss_draws"] is None
    sc = loads_scenario(NEW, check_files=False)
    keys = {unit_key(sc, 0, c, sc.schemes[0], 1000) for c in (per_packet, per_segment)}
    assert len(keys) == 2, "a run resumed with the other draws must not find its units finished"


WORKLOAD_BASE = NEW.replace("file_bytes = 20_000_000\n", "")


def test_a_workload_needs_no_file_size_and_is_one_unit_per_scheme_and_repetition():
    sc = loads_scenario(WORKLOAD_BASE + 'workload = { kind = "poisson", load = 0.5, duration_s = 20, sizes = "pareto" }\n',
                        check_files=False)
    c = sc.clients[0]
    assert c.workload == Workload(kind="poisson", load=0.5, duration_s=20.0, downlink_mbps=24.0, sizes="pareto", seed=1,
                                  pareto_shape=1.2, min_bytes=10_000, max_bytes=10_000_000)
    assert c.file_sizes == (0,) and sc.n_transfers == 2
    assert c.describe_path().endswith("web load 50%")


@pytest.mark.parametrize("extra, message", [
    ("schedule = [{ at_s = 0 }, { at_s = 5, delay_ms = 30 }, { at_s = 3, delay_ms = 10 }]\n",
     "clients[0].schedule[2].at_s: steps out of order or overlapping: 3 after 5"),
    ("schedule = [{ at_s = 0 }, { at_s = 5 }, { at_s = 5 }]\n",
     "clients[0].schedule[2].at_s: steps out of order or overlapping: 5 after 5"),
    ("schedule = [{ at_s = 1, delay_ms = 30 }]\n", "clients[0].schedule[0].at_s: the first step must be at 0, got 1"),
    ("schedule = [{ at_s = 0, delay_ms = -5 }]\n",
     "clients[0].schedule[0].delay_ms: must be a number in [0.0, 10000.0], got -5"),
    ("schedule = [{ at_s = 0, loss_downlink = 1 }]\n",
     "clients[0].schedule[0].loss_downlink: must be a number in [0.0, 1.0), got 1"),
    ("schedule = [{ at_s = 0, loss_uplink = -0.1 }]\n",
     "clients[0].schedule[0].loss_uplink: must be a number in [0.0, 1.0), got -0.1"),
    ("schedule = [{ at_s = 0 }, { at_s = 60 }]\n", "clients[0].schedule[1].at_s: 60 s is beyond the run (timeout_s = 60)"),
    ("schedule = [{ at_s = 0, delay = 3 }]\n", "clients[0].schedule[0].delay: unknown key"),
    ("schedule = []\n", "clients[0].schedule: must be a non-empty list of steps"),
    ('loss_draws = "segment"\n', "clients[0].loss_draws: 'segment' needs a schedule"),
    ('schedule = [{ at_s = 0 }]\nloss_draws = "byte"\n',
     "clients[0].loss_draws: must be one of 'packet', 'segment', got 'byte'"),
    ("flows = [{ start_s = 75 }]\n", "clients[0].flows[0].start_s: 75 s is beyond the run (timeout_s = 60)"),
    ("flows = [{ start_s = -1 }]\n", "clients[0].flows[0].start_s: must be a number >= 0, got -1"),
    ("flows = [{ start_s = 0, count = 0 }]\n", "clients[0].flows[0].count: must be an integer >= 1, got 0"),
    ('flows = [{ scheme = "native:cubic" }, { start_s = 1 }, { scheme = "kernel:bbr" }]\n',
     "clients[0].flows[2].scheme: 'kernel:bbr': a competing flow must be native:ALG (it needs a server namespace of "
     "its own; only the scheme under test runs on the agent)"),
    ('flows = [{ scheme = "ovs:reno" }, { start_s = 1 }]\n', "clients[0].flows[0].scheme: 'ovs:reno': a competing flow"),
    ('flows = [{ scheme = "native:vegas" }, { start_s = 1 }]\n',
     "clients[0].flows[0].scheme: 'native:vegas': native algorithm must be one of"),
    ('flows = [{ scheme = "native:cubic" }]\n', "clients[0].flows: no flow of the scheme under test"),
    ('flows = [{ start_s = 0, count = 3 }]\n',
     "clients[0].flows: 3 flows of 60000000 bytes in all end at least 20 s after the start at 24 Mbit/s, more than "
     "timeout_s = 60"),
])
def test_each_new_key_refuses_bad_values_naming_them(extra, message):
    text = NEW + extra
    if "count = 3" in extra:
        text = text.replace("timeout_s = 60", "timeout_s = 19")
        message = message.replace("timeout_s = 60", "timeout_s = 19")
    problems = problems_of(text)
    assert any(p.startswith(message) for p in problems), problems


@pytest.mark.parametrize("workload, message", [
    ('{ kind = "poisson", load = 0.5, duration_s = 20, sizes = "lognormal" }',
     "clients[0].workload.sizes: unknown workload distribution 'lognormal' (known: pareto)"),
    ('{ kind = "closed", load = 0.5, duration_s = 20 }', 'clients[0].workload.kind: must be "poisson"'),
    ('{ kind = "poisson", load = 0, duration_s = 20 }', "clients[0].workload.load: must be a number in (0.0, 1.5]"),
    ('{ kind = "poisson", load = 1.6, duration_s = 20 }', "clients[0].workload.load: must be a number in (0.0, 1.5]"),
    ('{ kind = "poisson", duration_s = 20 }', "clients[0].workload.load: required"),
    ('{ kind = "poisson", load = 0.5, duration_s = 0 }', "clients[0].workload.duration_s: must be a number in (0.0"),
    ('{ kind = "poisson", load = 0.5, duration_s = 31 }',
     "clients[0].workload.duration_s: 31 s of arrivals plus 30 s for the last requests exceed timeout_s = 60"),
    ('{ kind = "poisson", load = 0.5, duration_s = 20, min_bytes = 5000, max_bytes = 5000 }',
     "clients[0].workload.max_bytes: must be greater than min_bytes (5000), got 5000"),
    ('{ kind = "poisson", load = 0.5, duration_s = 20, seed = "a" }', "clients[0].workload.seed: must be an integer"),
    ('{ kind = "poisson", load = 0.5, duration_s = 20, rate = 3 }', "clients[0].workload.rate: unknown key"),
])
def test_a_bad_workload_is_refused_naming_the_key(workload, message):
    problems = problems_of(WORKLOAD_BASE + f"workload = {workload}\n")
    assert any(p.startswith(message) for p in problems), problems


def test_a_workload_excludes_flows_and_file_sizes_and_needs_a_constant_rate():
    w = 'workload = { kind = "poisson", load = 0.5, duration_s = 20 }\n'
    assert "clients[0].workload: give either flows (competing flows) or workload (web requests), not both" in problems_of(
        WORKLOAD_BASE + w + "flows = [{ start_s = 0 }]\n")
    assert "clients[0].file_bytes: not with a workload (its request sizes come from the distribution)" in problems_of(
        NEW + w)
    trace = WORKLOAD_BASE.replace("link = { mbps = 24 }", 'link = { uplink = "u", downlink = "d" }')
    assert any(p.startswith("clients[0].workload.load: needs a constant-rate link") for p in problems_of(trace + w))


def test_a_workloads_requests_are_seeded_poisson_arrivals_of_bounded_pareto_sizes():
    w = Workload(kind="poisson", load=0.5, duration_s=20_000.0, downlink_mbps=24.0)
    a, b, other = w.sample(7), w.sample(7), w.sample(8)
    assert a == b and a != other
    times = [t for t, _ in a]
    sizes = [s for _, s in a]
    assert times == sorted(times) and 0 <= times[0] and times[-1] < w.duration_s
    assert min(sizes) >= w.min_bytes and max(sizes) <= w.max_bytes
    # over about 70000 arrivals the rate is within 2% of load * link rate / mean size
    # (Poisson: relative standard deviation 1/sqrt(n), about 0.4%)
    expected = w.arrival_rate() * w.duration_s
    assert abs(len(a) - expected) < 0.02 * expected, (len(a), expected)
    # the offered bytes are near the load (the heavy tail makes the mean slow to converge: 10%)
    offered = sum(sizes) * 8 / w.duration_s / 24e6
    assert 0.45 < offered < 0.55, offered


def test_the_bounded_pareto_mean_matches_its_integral():
    import numpy as np
    w = Workload(kind="poisson", load=0.5, duration_s=1.0, downlink_mbps=24.0)
    x = np.logspace(np.log10(w.min_bytes), np.log10(w.max_bytes), 200_001)
    a, lo, hi = w.pareto_shape, w.min_bytes, w.max_bytes
    pdf = a * lo ** a * x ** (-a - 1) / (1 - (lo / hi) ** a)
    y = x * pdf
    integral = float(np.sum((y[1:] + y[:-1]) / 2 * np.diff(x)))
    assert abs(w.mean_bytes() - integral) < 1e-4 * integral
    one = Workload(kind="poisson", load=0.5, duration_s=1.0, downlink_mbps=24.0, pareto_shape=1.0)
    assert one.mean_bytes() == pytest.approx(lo * hi / (hi - lo) * np.log(hi / lo))
