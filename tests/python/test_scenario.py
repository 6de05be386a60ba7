import os
import re

import pytest

from ccswitch.experiments.scenario import ScenarioError, check_schemes, load_scenario, loads_scenario, parse_scheme

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
    assert sorted(c.loss_downlink for c in constant) == [0.0, 0.01]
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
