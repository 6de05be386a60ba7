"""Objectives: every formula on a hand-made table (numbers worked out by hand in the comments),
the canonical spelling, every refusal, and how evaluation reports an objective."""

import math

import numpy as np
import pytest

from ccswitch.learner import labels, objectives

NAN = float("nan")

#: Two candidates, four rows:
#:   0: no competitor; b is twice as fast but 150 ms of delay p95
#:   1: a competing flow; a does it harm 0.5, b none
#:   2: a never finished
#:   3: b's delay was not measured
TABLE = {
    "tct_a": [2.0, 4.0, NAN, 1.0], "tct_b": [1.0, 3.0, 5.0, 1.5],
    "thr_a": [10.0, 8.0, NAN, 5.0], "thr_b": [20.0, 10.0, 4.0, 6.0],
    "dp95_a": [50.0, 80.0, NAN, 20.0], "dp95_b": [150.0, 90.0, 40.0, NAN],
    "harm_a": [NAN, 0.5, NAN, NAN], "harm_b": [NAN, 0.0, NAN, NAN],
    "has_competitor": [False, True, False, False],
}
CANDS = ["a", "b"]


def cost(spec, table=TABLE):
    return objectives.cost_matrix(table, CANDS, spec).tolist()


def same(got, want):
    assert np.allclose(np.array(got, dtype=float), np.array(want, dtype=float), equal_nan=True, rtol=1e-12, atol=0), got


# ---- formulas -------------------------------------------------------------------------------


def test_tct_costs_the_transfer_time():
    same(cost("tct"), [[2, 1], [4, 3], [NAN, 5], [1, 1.5]])


def test_power_costs_delay_over_throughput():
    # 50/10, 150/20; 80/8, 90/10; -, 40/4; 20/5, - (no delay measured)
    same(cost("power"), [[5, 7.5], [10, 9], [NAN, 10], [4, NAN]])


def test_a_delay_budget_multiplies_a_miss_by_four():
    # budget 100: b misses on row 0 (150 ms): 4 x 1 s = 4 s, so a (2 s, in budget) is cheaper
    same(cost("tct_delay_budget"), [[2, 4], [4, 3], [NAN, 5], [1, NAN]])
    # budget 60: both miss on row 1 and the faster (b) still ranks first: 16 s against 12 s
    same(cost("tct_delay_budget:budget_ms=60"), [[2, 4], [16, 12], [NAN, 5], [1, NAN]])
    # a miss more than 4x faster wins: 0.4 s x 4 = 1.6 s against 2 s
    fast_miss = dict(TABLE, tct_b=[0.4, 3.0, 5.0, 1.5])
    assert labels.oracle(objectives.cost_matrix(fast_miss, CANDS, "tct_delay_budget"))[0] == 1
    same(objectives.miss_matrix(TABLE, CANDS, "tct_delay_budget"), [[0, 1], [0, 0], [NAN, 0], [0, NAN]])
    assert objectives.miss_matrix(TABLE, CANDS, "tct") is None


def test_harm_scales_the_time_by_one_plus_harm_and_is_zero_without_a_competitor():
    # row 1: 4 x 1.5 = 6 and 3 x 1; elsewhere no competitor: harm 0 whatever the column holds
    same(cost("harm"), [[2, 1], [6, 3], [NAN, 5], [1, 1.5]])
    # a table without any harm columns and no competitor: plain TCT
    bare = {k: v for k, v in TABLE.items() if not k.startswith(("harm_", "has_"))}
    same(cost("harm", bare), [[2, 1], [4, 3], [NAN, 5], [1, 1.5]])
    # a competitor whose harm is unknown: no cost
    unknown = dict(TABLE, harm_a=[NAN, NAN, NAN, NAN])
    same(cost("harm", unknown)[1], [NAN, 3])


def test_weighted_is_a_geometric_product_of_its_terms():
    same(cost("weighted:tct=1,harm=1"), cost("harm"))
    same(cost("weighted:power=1"), cost("power"))
    # tct x delay/throughput: 2 x 5, 1 x 7.5; 4 x 10, 3 x 9; -, 5 x 10; 1 x 4, -
    same(cost("weighted:tct=1,power=1"), [[10, 7.5], [40, 27], [NAN, 50], [4, NAN]])
    # tct^2 x (1 + harm): row 1: 16 x 1.5 = 24 and 9 x 1
    same(cost("weighted:tct=2,harm=1")[1], [24, 9])
    same(cost("weighted:delay_p95=0.5")[0], [math.sqrt(50), math.sqrt(150)])
    # relative regrets compose: b's cost ratio on row 0 is its TCT ratio (0.5) times its
    # delay/throughput ratio (1.5)
    c = np.array(cost("weighted:tct=1,power=1"))
    assert c[0, 1] / c[0, 0] == pytest.approx(0.5 * 1.5)
    # a term of weight 0 needs no column
    only_tct = {k: v for k, v in TABLE.items() if k.startswith("tct_")}
    same(cost("weighted:tct=1,power=0", only_tct), cost("tct"))


def test_an_objective_whose_columns_are_missing_says_which():
    only_tct = {k: v for k, v in TABLE.items() if k.startswith("tct_")}
    with pytest.raises(ValueError, match=r"power needs the thr_<alg>, dp95_<alg> column\(s\)|power needs the dp95_<alg>, thr_<alg>"):
        objectives.cost_matrix(only_tct, CANDS, "power")
    with pytest.raises(ValueError, match=r"harm needs the harm_<alg>"):
        objectives.cost_matrix(dict(only_tct, has_competitor=[True, False, False, False]), CANDS, "harm")


def test_a_throughput_or_delay_of_zero_counts_as_not_measured():
    zero = dict(TABLE, thr_b=[0.0, 10.0, 4.0, 6.0], dp95_a=[50.0, 0.0, NAN, 20.0])
    same(cost("power", zero), [[5, NAN], [NAN, 9], [NAN, 10], [4, NAN]])
    with pytest.raises(ValueError, match="TCT <= 0"):
        cost("tct", dict(TABLE, tct_a=[0.0, 4.0, NAN, 1.0]))


def test_regret_is_relative_to_the_objectives_oracle():
    r = labels.cost_matrix(objectives.cost_matrix(TABLE, CANDS, "power"))
    # row 0: oracle a (5): b 7.5/5 - 1; row 2: a has no cost: 2 x 10 / 10 - 1; row 3: 2 x 4 / 4 - 1
    same(r, [[0, 0.5], [10 / 9 - 1, 0], [1, 0], [0, 1]])


# ---- evaluation -----------------------------------------------------------------------------


def test_evaluation_reports_the_geometric_mean_ratio_and_the_miss_rate():
    c = objectives.cost_matrix(TABLE, CANDS, "tct_delay_budget")
    miss = objectives.miss_matrix(TABLE, CANDS, "tct_delay_budget")
    a = labels.evaluate(c, np.zeros(4, int), miss)
    # chosen 2, 4, -, 1 against the oracle's 2, 3, 5, 1
    assert (a.failed, a.rows) == (1, 4)
    assert a.mean_cost == pytest.approx(7 / 3)
    assert a.mean_regret == pytest.approx((0 + 1 / 3 + 0) / 3)
    assert a.total_regret == pytest.approx(7 / 6 - 1)
    # ratios 1, 4/3, 2 (the failure priced 2 x 5 s over 5 s), 1
    assert a.geomean_ratio == pytest.approx((4 / 3 * 2) ** 0.25)
    assert a.miss_rate == 0.0
    b = labels.evaluate(c, np.ones(4, int), miss)
    assert b.miss_rate == pytest.approx(1 / 3)  # row 0 of rows 0-2 (row 3 has no cost)
    assert labels.evaluate(c, np.zeros(4, int)).miss_rate is None
    fixed = labels.fixed_choices(c, CANDS, miss)
    assert fixed["b"].miss_rate == b.miss_rate
    best = labels.evaluate(c, labels.oracle(c), miss)
    assert (best.geomean_ratio, best.mean_regret) == (1.0, 0.0)


def test_the_best_fixed_choice_and_the_per_path_oracle():
    c = np.array([[1.0, 2.0], [1.0, 2.0], [10.0, 2.0], [3.0, 1.0]])
    # mean cost: 3.75 against 1.75
    assert labels.best_fixed(c) == 1
    # path x (rows 0, 1): a twice; path y (rows 2, 3): b on both
    assert labels.path_oracle(c, ["x", "x", "y", "y"]).tolist() == [0, 0, 1, 1]
    # path z mixes: ratios (1, 2) and (3, 1): a's product 3, b's 2
    assert labels.path_oracle(c[[0, 3]], ["z", "z"]).tolist() == [1, 1]


# ---- spelling -------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, canon", [
    ("tct", "tct"),
    ("power", "power"),
    ("harm", "harm"),
    ("tct_delay_budget", "tct_delay_budget:budget_ms=100"),
    ("tct_delay_budget:budget_ms=100.0", "tct_delay_budget:budget_ms=100"),
    ("tct_delay_budget:budget_ms=50.5", "tct_delay_budget:budget_ms=50.5"),
    ("weighted:tct=1,harm=1", "weighted:harm=1,tct=1"),
    ("weighted: tct = 1.0 , power=0.5,delay_p95=0,", "weighted:power=0.5,tct=1"),
    ("weighted:tct=1e3,tct=2", "weighted:tct=2"),
    ("weighted:harm=1e-05", "weighted:harm=1e-05"),
])
def test_canonical_spelling(spec, canon):
    assert objectives.canonical(spec) == canon
    assert objectives.canonical(canon) == canon


@pytest.mark.parametrize("spec, message", [
    ("foo", "unknown objective 'foo': the built-ins are tct, power, tct_delay_budget, harm, weighted"),
    ("", "unknown objective '': the built-ins are tct, power, tct_delay_budget, harm, weighted"),
    ("tct:x=1", "tct: unknown parameter 'x' (tct takes no parameters)"),
    ("tct_delay_budget:budget=5", "tct_delay_budget: unknown parameter 'budget' (the parameters are budget_ms)"),
    ("weighted:rtt=1", "weighted: unknown weight 'rtt' (the weights are delay_p95, harm, power, tct)"),
    ("tct_delay_budget:budget_ms", "tct_delay_budget: 'budget_ms' is not KEY=VALUE"),
    ("tct_delay_budget:budget_ms=abc", "tct_delay_budget: budget_ms = 'abc' is not a number"),
    ("tct_delay_budget:budget_ms=1_000", "tct_delay_budget: budget_ms = '1_000' is not a number"),
    ("tct_delay_budget:budget_ms=inf", "tct_delay_budget: budget_ms = 'inf' is not a finite number"),
    ("weighted:tct=nan", "weighted: tct = 'nan' is not a finite number"),
    ("weighted:power=-1", "weighted: weight power = -1 is negative; weights must be >= 0"),
    ("weighted:tct=1,harm=-0.5", "weighted: weight harm = -0.5 is negative; weights must be >= 0"),
    ("weighted", "weighted: every weight is 0; give at least one weight > 0"),
    ("weighted:tct=0,power=0", "weighted: every weight is 0; give at least one weight > 0"),
    ("tct_delay_budget:budget_ms=0", "tct_delay_budget: budget_ms = 0 must be > 0"),
    ("tct_delay_budget:budget_ms=-5", "tct_delay_budget: budget_ms = -5 must be > 0"),
])
def test_every_refusal_says_what_is_wrong(spec, message):
    with pytest.raises(objectives.ObjectiveError) as e:
        objectives.parse(spec)
    assert str(e.value) == message
    assert isinstance(e.value, ValueError)


def test_numbers_are_written_as_repr_without_a_trailing_point_zero():
    assert [objectives.format_number(x) for x in (100.0, 0.5, 1.0, 1e16, 2.5e-7)] == ["100", "0.5", "1", "1e+16", "2.5e-07"]
