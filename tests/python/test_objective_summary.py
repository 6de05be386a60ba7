"""A scenario's `objective`: every scheme's cost per transfer, and each policy against the best
fixed scheme on its client, in the run's summary."""

import pytest

from ccswitch.experiments import scenario, statistics


def rows(scheme, tcts, thr, dp95, algorithms=None):
    return [{"client": "c", "scheme": scheme, "repetition": i, "tct_s": t, "sha256_ok": True, "error": None,
             "throughput_mbps": thr, "delay_p95_ms": dp95, "algorithms": algorithms} for i, t in enumerate(tcts)]


def test_power_costs_are_delay_over_throughput_and_the_policy_is_judged_against_the_best_fixed():
    data = (rows("kernel:bbr", [1.0] * 5, 10.0, 50.0) + rows("kernel:vegas", [1.2] * 5, 8.0, 20.0)
            + rows("kernel:policy:p.toml", [1.1, 1.1, 1.1, 1.1, 1.1], 9.0, 18.0, ["bbr", "vegas"]))
    out = statistics.objective_rows(data, "power")
    by = {r["scheme"]: r for r in out}
    assert by["kernel:bbr"]["cost_median"] == pytest.approx(5.0)
    assert by["kernel:vegas"]["cost_median"] == pytest.approx(2.5) and by["kernel:vegas"]["best_fixed"]
    verdict = by["kernel:policy:p.toml"]["verdict"]
    assert by["kernel:policy:p.toml"]["against"] == "kernel:vegas"
    assert verdict["ratio"] == pytest.approx(2.0 / 2.5)


def test_a_policy_that_ran_only_the_best_fixed_algorithm_has_not_beaten_it():
    data = rows("kernel:bbr", [1.0] * 5, 10.0, 50.0) + rows("kernel:policy:p.toml", [0.9] * 5, 10.0, 50.0, ["bbr"])
    out = {r["scheme"]: r for r in statistics.objective_rows(data, "tct")}
    assert out["kernel:policy:p.toml"]["verdict"]["kind"] == "ran only"


def test_a_delay_budget_miss_costs_four_times_the_transfer():
    data = rows("kernel:bbr", [1.0], 10.0, 150.0) + rows("kernel:vegas", [1.5], 8.0, 40.0)
    out = {r["scheme"]: r for r in statistics.objective_rows(data, "tct_delay_budget:budget_ms=100")}
    assert out["kernel:bbr"]["cost_median"] == pytest.approx(4.0)
    assert out["kernel:vegas"]["cost_median"] == pytest.approx(1.5) and out["kernel:vegas"]["best_fixed"]


@pytest.mark.parametrize("value,message", [
    ('"speed"', "objective: unknown objective 'speed'"),
    ('"harm"', "harm is judged against a reference run"),
    ('"weighted:tct=1,harm=1"', "harm is judged against a reference run"),
    ('"weighted:tct=-1"', "is negative"),
    ("3", "objective: must be a string"),
])
def test_a_scenarios_bad_objective_is_refused(value, message):
    text = f'name = "x"\nschemes = ["kernel:bbr"]\nobjective = {value}\n[[clients]]\nname = "c"\nlink = {{ mbps = 10 }}\nfile_bytes = 1000\n'
    with pytest.raises(scenario.ScenarioError) as e:
        scenario.loads_scenario(text) if hasattr(scenario, "loads_scenario") else scenario.parse_scenario(
            __import__("tomllib").loads(text))
    assert message in str(e.value)


def test_a_scenarios_objective_is_kept_in_canonical_form():
    sc = scenario.parse_scenario({"name": "x", "schemes": ["kernel:bbr"], "objective": "tct_delay_budget",
                                  "clients": [{"name": "c", "link": {"mbps": 10}, "file_bytes": 1000}]})
    assert sc.objective == "tct_delay_budget:budget_ms=100"


def test_the_summary_says_what_each_policy_flow_ran_and_when_it_changed():
    data = rows("kernel:bbr", [1.0] * 2, 10.0, 50.0) + rows("kernel:policy:p.toml", [0.9] * 2, 10.0, 40.0, ["bbr", "vegas"])
    for r in data[2:]:
        r["handover_events"] = [{"t_s": 0.42, "from": "bbr", "to": "vegas"}]
    out = statistics.objective_rows(data, "power")
    text = statistics.format_objective(out, "power")
    assert "c kernel:policy:p ran: bbr > vegas at 0.4 s; bbr > vegas at 0.4 s" in text
