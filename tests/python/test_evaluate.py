"""`ccswitch evaluate`'s verdicts: a live policy against the best fixed candidate and the per-path
oracle, as geometric means over paths with intervals."""

import math

import pytest

from ccswitch.commands import evaluate


def table(bbr, vegas, policy):
    t = {}
    for name, tcts in (("bbr", bbr), ("vegas", vegas), ("policy0", policy)):
        t["tct_" + name] = list(tcts)
        t["thr_" + name] = [10.0] * len(tcts)
        t["dp95_" + name] = [50.0] * len(tcts)
        t["harm_" + name] = [float("nan")] * len(tcts)
    t["has_competitor"] = [False] * len(bbr)
    return t


def test_the_policy_is_judged_against_the_best_fixed_and_the_oracle_per_path():
    # bbr is best on paths a, b; vegas on c, d; the policy matches the oracle everywhere
    t = table([1, 1, 4, 4], [2, 2, 1, 1], [1, 1, 1, 1])
    runs = {"policy0": [[["bbr"]], [["bbr"]], [["bbr", "vegas"]], [["bbr", "vegas"]]]}
    v = evaluate.judge(t, ["bbr", "vegas"], ["policy0"], "tct", runs, ["a", "b", "c", "d"])
    # bbr is (1 * 1 * 4 * 4) ** (1/4) = 2 times the oracle, vegas (2 * 2 * 1 * 1) ** (1/4) = 1.41
    assert v["fixed_vs_oracle"] == {"bbr": pytest.approx(2.0), "vegas": pytest.approx(2 ** 0.5, abs=1e-4)}
    assert v["best_fixed"] == "vegas"
    e = v["policies"]["policy0"]
    assert e["vs_oracle"]["geomean"] == pytest.approx(1.0)
    assert e["vs_best_fixed"]["geomean"] == pytest.approx(2 ** -0.5)  # (1/2 * 1/2 * 1 * 1) ** (1/4)
    lo, hi = e["vs_best_fixed"]["ci95"]
    assert lo <= 2 ** -0.5 <= hi
    assert "note" not in e


def test_a_policy_that_ran_only_the_best_fixed_algorithm_is_said_to_have_run_it():
    t = table([1, 1, 1], [2, 2, 2], [1, 1, 1])
    runs = {"policy0": [[["bbr"]], [["bbr"]], [["bbr"]]]}
    e = evaluate.judge(t, ["bbr", "vegas"], ["policy0"], "tct", runs, ["a", "b", "c"])["policies"]["policy0"]
    assert e["note"].startswith("ran only bbr")


def test_geometric_mean_interval_brackets_the_mean():
    r = evaluate.geomean_interval([0.5, 1.0, 2.0, 1.0])
    assert r["geomean"] == pytest.approx(1.0) and r["ci95"][0] < 1.0 < r["ci95"][1] and r["paths"] == 4


def test_the_evaluation_scenario_is_a_client_per_path():
    class P:
        def __init__(self, i):
            self.client_name, self.sizes = f"p{i}", [2_000_000]
            self.client_table = {"delay_ms": 10, "link": {"mbps": 12.0}, "queue_packets": 40,
                                 "schedule": [{"at_s": 0, "delay_ms": 0}, {"at_s": 2.0, "delay_ms": 20}]}

    class S:
        name, timeout_s, agent_settle_s = "s", 60.0, 0.5

    import tomllib

    from ccswitch.experiments import scenario

    text = evaluate.scenario_text("e", S(), [P(0), P(1)], ["kernel:bbr"], 2)
    sc = scenario.parse_scenario(tomllib.loads(text))
    assert [c.name for c in sc.clients] == ["p0", "p1"] and sc.repetitions == 2
    assert sc.clients[1].schedule[1].delay_ms == 20 and sc.clients[0].queue_packets == 40


def test_policy_files_are_made_absolute_for_the_scenario_in_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert evaluate.absolute_policy("kernel:policy:m/p.policy.toml:decide.temporal=false") == \
        f"kernel:policy:{tmp_path}/m/p.policy.toml:decide.temporal=false"
    assert evaluate.absolute_policy("kernel:policy:mystique") == "kernel:policy:mystique"
    assert evaluate.absolute_policy("kernel:bbr") == "kernel:bbr"
