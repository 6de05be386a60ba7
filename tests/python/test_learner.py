"""The learner's Python half: oracle, regret and cost-sensitive labels on hand-made rows; the
split by path; the model file, golden data and rules policy of ccswitch.learner.export."""

import json
import math

import numpy as np
import pytest
import tomllib
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from ccswitch.learner import export, labels, training

import learner_synthetic

NAN = float("nan")
WINDOW = {"kind": "first", "samples": 20}
DECIDE = {"min_samples": 8}


# ---- labels --------------------------------------------------------------------------------

TCT = np.array([
    [3.0, 2.0, 5.0],
    [1.0, 1.0, 4.0],   # a tie: the first fastest is the oracle
    [NAN, 6.0, 2.0],   # the first candidate never finished here
])


def test_the_oracle_is_the_first_fastest_finished_candidate():
    assert labels.oracle(TCT).tolist() == [1, 0, 2]
    assert labels.oracle_cost(TCT).tolist() == [2.0, 1.0, 2.0]


def test_regret_is_relative_to_the_oracle_and_a_failure_costs_twice_the_slowest():
    cost = labels.cost_matrix(TCT)
    assert cost[0].tolist() == [0.5, 0.0, 1.5]
    assert cost[1].tolist() == [0.0, 0.0, 3.0]
    # the failed candidate: 2 x 6 s (the slowest that finished) over 2 s, minus 1
    assert cost[2].tolist() == [5.0, 2.0, 0.0]
    assert labels.cost_matrix(TCT, failed_factor=1.0)[2, 0] == 2.0
    with pytest.raises(ValueError, match="cheaper"):
        labels.cost_matrix(TCT, failed_factor=0.5)


def test_rows_without_any_finished_candidate_have_no_oracle():
    tct = np.vstack([TCT, [NAN, NAN, NAN]])
    assert labels.usable_rows(tct).tolist() == [True, True, True, False]
    with pytest.raises(ValueError, match="no finished candidate"):
        labels.oracle(tct)


def test_evaluate_scores_choices_and_counts_failed_ones_apart():
    o = labels.evaluate(TCT, np.array([0, 2, 0]))
    assert o.failed == 1 and o.rows == 3
    assert o.mean_cost == pytest.approx(3.5)            # 3 s and 4 s; the failure excluded
    assert o.mean_regret == pytest.approx((0.5 + 3.0) / 2)
    assert o.total_regret == pytest.approx(7.0 / 3.0 - 1)
    assert o.oracle_share == 0.0
    best = labels.evaluate(TCT, labels.oracle(TCT))
    assert (best.mean_regret, best.oracle_share, best.failed) == (0.0, 1.0, 0)
    fixed = labels.fixed_choices(TCT, ["a", "b", "c"])
    assert fixed["b"].mean_cost == pytest.approx(3.0) and fixed["a"].failed == 1


def test_regret_weights_are_what_a_wrong_choice_costs():
    cost = labels.cost_matrix(TCT)
    assert labels.regret_weights(cost, "mean").tolist() == [1.0, 1.5, 3.5]
    assert labels.regret_weights(cost, "max").tolist() == [1.5, 3.0, 5.0]
    flat = np.zeros((2, 3))  # every choice as good: a small floor, not zero
    assert np.all(labels.regret_weights(np.vstack([cost, flat])) > 0)


def test_undecided_flows_keep_the_initial_algorithm():
    assert labels.decided_choice([2, 2, 2], [True, False, True], 0).tolist() == [2, 0, 2]
    with pytest.raises(ValueError, match="initial"):
        labels.decided_choice([2, 2], [True, False], None)


def test_cost_expansion_picks_the_least_total_regret_where_oracle_labels_pick_the_majority():
    # Three rows where A wins by 1 %, one where A takes ten times as long as B. The oracle is A
    # on most rows, yet B loses far less overall.
    tct = np.array([[1.0, 1.01]] * 3 + [[10.0, 1.0]])
    x = np.zeros((4, 1))
    cost = labels.cost_matrix(tct)
    by_oracle = training.fit("oracle", "tree", x, cost, max_depth=1)
    by_cost = training.fit("expanded", "tree", x, cost, max_depth=1)
    assert by_oracle.predict(x).tolist() == [0, 0, 0, 0]
    assert by_cost.predict(x).tolist() == [1, 1, 1, 1]
    xe, ye, we = labels.expand_by_cost(x, cost)
    assert sorted(zip(ye.tolist(), we.tolist()))[:1] == [(0, pytest.approx(0.01))]
    assert len(ye) == 4  # each row's worst choice weighs 0 and is dropped


def test_a_handover_margin_keeps_the_initial_algorithm_unless_the_gain_exceeds_it():
    # Candidate 1 is 3 % faster than the initial 0 on two rows and 30 % faster on another path.
    tct = np.array([[1.03, 1.0], [1.03, 1.0], [1.3, 1.0]])
    x = np.array([[0.0], [0.0], [1.0]])
    cost = labels.cost_matrix(tct)
    plain = training.fit("expanded", "tree", x, cost, max_depth=1, initial_index=0)
    margin = training.fit("expanded", "tree", x, cost, max_depth=1, initial_index=0, handover_margin=0.05)
    assert plain.predict(x).tolist() == [1, 1, 1]
    assert margin.predict(x).tolist() == [0, 0, 1]
    shifted = labels.with_handover_margin(cost, 0, 0.05)
    assert shifted[:, 0].tolist() == cost[:, 0].tolist() and np.allclose(shifted[:, 1], cost[:, 1] + 0.05)
    with pytest.raises(ValueError, match="initial"):
        labels.with_handover_margin(cost, None, 0.05)
    with pytest.raises(ValueError, match="< 0"):
        labels.with_handover_margin(cost, 0, -0.1)


def test_cross_validated_regret_weighted_by_oracle_time_is_the_total_regret():
    # Two paths; the constant choice (candidate 0 on average) is wrong on the long path only.
    tct = np.array([[1.0, 2.0], [1.0, 2.0], [20.0, 10.0], [20.0, 10.0]])
    cost = labels.cost_matrix(tct)
    x, groups = np.zeros((4, 1)), ["a", "a", "b", "b"]
    mean = training.cv_regret("constant", "-", x, cost, groups, folds=2, max_depth=None)
    total = training.cv_regret("constant", "-", x, cost, groups, folds=2, repeats=3,
                               row_weights=labels.oracle_cost(tct), max_depth=None)
    # trained on one path, each fold picks that path's best and is wrong on the other
    assert mean == pytest.approx((1.0 + 1.0 + 1.0 + 1.0) / 4)
    assert total == pytest.approx((2 * 1.0 * 1.0 + 2 * 10.0 * 1.0) / (2 * 1.0 + 2 * 10.0))
    with pytest.raises(ValueError, match="row weights"):
        training.cv_regret("constant", "-", x, cost, groups, folds=2, row_weights=[1.0], max_depth=None)


# ---- split by path -------------------------------------------------------------------------


def test_no_path_falls_on_both_sides_of_the_split():
    cols = learner_synthetic.synthetic_table(n_paths=40, reps=4, seed=3)
    groups = np.array(cols["path_id"])
    for seed in range(5):
        train, test = labels.group_split(groups, 0.3, seed)
        assert not set(groups[train]) & set(groups[test])
        assert sorted(np.concatenate([train, test]).tolist()) == list(range(len(groups)))
        assert len(set(groups[test])) == 12
    a, b = labels.group_split(groups, 0.3, 1), labels.group_split(groups, 0.3, 1)
    assert a[1].tolist() == b[1].tolist()
    with pytest.raises(ValueError, match="two paths"):
        labels.group_split(["p"] * 5, 0.3, 0)
    # Tiny fractions still hold a path out, large ones still train on one.
    assert len(set(labels.group_split(["a", "b", "c"], 0.01, 0)[1])) >= 1
    train, _ = labels.group_split(["a", "b", "c"], 0.99, 0)
    assert len(train) == 1


def test_cross_validation_folds_keep_each_path_in_one_fold():
    groups = np.repeat(np.arange(10), 3).astype(str)
    folds = training.group_folds(groups, 3, 0)
    seen = [set(groups[f]) for f in folds]
    assert sum(len(s) for s in seen) == 10 and set.union(*seen) == set(groups)


# ---- the model file ------------------------------------------------------------------------


def synthetic_xy(n_paths=80, seed=5):
    cols = learner_synthetic.synthetic_table(n_paths=n_paths, reps=3, seed=seed)
    feats = list(learner_synthetic.FEATURES)
    x = np.column_stack([np.asarray(cols["f_" + f], dtype=float) for f in feats])
    tct = labels.tct_matrix(cols, learner_synthetic.CANDIDATES)
    y = np.array(learner_synthetic.CANDIDATES)[labels.oracle(tct)]
    return feats, x, y


@pytest.mark.parametrize("kind", ["tree", "forest"])
def test_the_model_file_round_trips_and_predicts_exactly_as_sklearn(tmp_path, kind):
    feats, x, y = synthetic_xy()
    model = (DecisionTreeClassifier(max_depth=6, random_state=0) if kind == "tree"
             else RandomForestClassifier(n_estimators=15, max_depth=5, random_state=0)).fit(x, y)
    doc = export.model_to_dict(model, name="t", features=feats, window=WINDOW, decide=DECIDE,
                               provenance={"dataset": "synthetic"})
    assert doc["kind"] == kind and doc["classes"] == list(model.classes_)
    assert doc["provenance"]["dataset"] == "synthetic" and "sklearn" in doc["provenance"]
    path = export.write_model(doc, tmp_path / "t.json")
    back = export.read_model(path)
    assert back == json.loads(json.dumps(doc))
    assert back["trees"][0]["threshold"] == [float(t) for t in model_trees(model)[0].tree_.threshold]
    g = export.golden_vectors(back, x, n=10_000)
    assert np.array_equal(export.predict_proba_dict(back, g), model.predict_proba(g))
    assert export.predict_dict(back, g) == model.predict(g).tolist()


def model_trees(model):
    return model.estimators_ if hasattr(model, "estimators_") else [model]


def test_a_malformed_model_file_is_refused_with_every_reason():
    feats, x, y = synthetic_xy(30)
    doc = export.model_to_dict(DecisionTreeClassifier(max_depth=2).fit(x, y), name="t", features=feats,
                               window=WINDOW, decide=DECIDE)
    bad = json.loads(json.dumps(doc))
    bad["features"][0] = "min_rtt"
    bad["decide"]["min_samples"] = 21
    bad["trees"][0]["children_left"][0] = 99
    with pytest.raises(ValueError) as e:
        export.check_model_dict(bad)
    for needle in ["unknown feature", "min_samples 21", "children 99"]:
        assert needle in str(e.value), str(e.value)
    with pytest.raises(ValueError, match="format"):
        export.check_model_dict({**doc, "format": "onnx"})
    with pytest.raises(ValueError, match="columns"):
        export.model_to_dict(DecisionTreeClassifier().fit(x, y), name="t", features=feats[:3],
                             window=WINDOW, decide=DECIDE)


def test_the_model_file_names_its_objective_and_each_nodes_mean_regret_per_class(tmp_path):
    # one feature, five rows; the tree splits at 0.5
    x = np.array([[0.0], [0.0], [1.0], [1.0], [1.0]])
    regret = np.array([[0.0, 0.5], [0.0, 0.1], [0.2, 0.0], [0.4, 0.0], [0.9, 0.0]])
    tree = training.fit("oracle", "tree", x, regret, max_depth=1)
    doc = export.model_to_dict(tree, name="c", features=["min_rtt_ms"], classes=["bbr", "cubic"], window=WINDOW,
                               decide=DECIDE, objective="tct_delay_budget", train_x=x, train_regret=regret,
                               handover_cost={"default": 0.05, "pairs": {"bbr>cubic": 0.1}})
    assert doc["objective"] == "tct_delay_budget:budget_ms=100"
    assert doc["handover_cost"] == {"default": 0.05, "pairs": {"bbr>cubic": 0.1}}
    t = doc["trees"][0]
    assert t["children_left"] == [1, -1, -1]
    # the root: every row (0.3 = 1.5 / 5, 0.12 = 0.6 / 5); a leaf: the rows that reach it
    assert np.allclose(t["cost"], [[0.3, 0.12], [0.0, 0.3], [0.5, 0.0]], rtol=0, atol=1e-15)
    back = export.read_model(export.write_model(doc, tmp_path / "c.json"))
    assert back["trees"][0]["cost"] == t["cost"] and back["objective"] == doc["objective"]
    # a node no row reaches gets its parent's
    assert np.allclose(export.node_costs(tree, x[:2], regret[:2]), [[0.0, 0.3], [0.0, 0.3], [0.0, 0.3]])
    # without a handover cost the key is absent; pairs default to none
    plain = export.model_to_dict(tree, name="c", features=["min_rtt_ms"], classes=["bbr", "cubic"], window=WINDOW,
                                 decide=DECIDE)
    assert "handover_cost" not in plain and plain["objective"] == "tct" and "cost" not in plain["trees"][0]
    assert export.model_to_dict(tree, name="c", features=["min_rtt_ms"], classes=["bbr", "cubic"], window=WINDOW,
                                decide=DECIDE, handover_cost={"default": 0})["handover_cost"] == {"default": 0.0, "pairs": {}}


@pytest.mark.parametrize("kind", ["tree", "forest"])
def test_every_trees_costs_are_the_regret_of_the_training_rows_reaching_each_node(kind):
    cols = learner_synthetic.synthetic_table(n_paths=40, reps=2, seed=4)
    feats = list(learner_synthetic.FEATURES)
    x = np.column_stack([np.asarray(cols["f_" + f], dtype=float) for f in feats])
    regret = labels.cost_matrix(labels.tct_matrix(cols, ["bbr", "cubic", "hybla"]))
    model = training.fit("expanded", kind, x, regret, max_depth=3, n_trees=4)
    cls = model.classes_
    doc = export.model_to_dict(model, name="f", features=feats, classes=[str(c) for c in cls], window=WINDOW,
                               decide=DECIDE, train_x=x, train_regret=regret[:, cls])
    for t, est in zip(doc["trees"], model_trees(model)):
        leaves = est.apply(x)
        for leaf in set(leaves.tolist()):
            assert np.allclose(t["cost"][leaf], regret[leaves == leaf][:, cls].mean(axis=0), rtol=0, atol=1e-12)
    export.check_model_dict(doc)


def test_a_bad_objective_cost_or_handover_cost_is_refused():
    x = np.array([[0.0], [1.0]])
    regret = np.array([[0.0, 0.5], [0.2, 0.0]])
    tree = training.fit("oracle", "tree", x, regret, max_depth=1)
    kw = dict(name="c", features=["min_rtt_ms"], classes=["bbr", "cubic"], window=WINDOW, decide=DECIDE)
    with pytest.raises(ValueError, match="unknown objective 'fast'"):
        export.model_to_dict(tree, objective="fast", **kw)
    with pytest.raises(ValueError, match="one column per class"):
        export.model_to_dict(tree, train_x=x, train_regret=regret[:, :1], **kw)
    with pytest.raises(ValueError, match="together"):
        export.model_to_dict(tree, train_x=x, **kw)
    with pytest.raises(ValueError, match=r"handover_cost.pairs\['bbr'\] = 0.1|key 'bbr' must be FROM>TO"):
        export.model_to_dict(tree, handover_cost={"default": 0.1, "pairs": {"bbr": 0.1}}, **kw)
    with pytest.raises(ValueError, match=r"\['bbr>vegas'\] name algorithms that are not classes of the model"):
        export.model_to_dict(tree, handover_cost={"default": 0.1, "pairs": {"bbr>vegas": 0.1}}, **kw)
    with pytest.raises(ValueError, match="handover_cost.default = -1: must be a finite number >= 0"):
        export.model_to_dict(tree, handover_cost={"default": -1}, **kw)
    doc = export.model_to_dict(tree, train_x=x, train_regret=regret, objective="weighted:tct=1,harm=1", **kw)
    bad = json.loads(json.dumps(doc))
    bad["objective"] = "weighted:tct=1,harm=1"
    bad["trees"][0]["cost"][1] = [0.1]
    bad["handover_cost"] = {"default": 0.1}
    with pytest.raises(ValueError) as e:
        export.check_model_dict(bad)
    for needle in ["not in canonical form ('weighted:harm=1,tct=1')", "node 1: cost [0.1] is not 2 finite regrets",
                   "handover_cost: must hold both 'default' and 'pairs'"]:
        assert needle in str(e.value), str(e.value)


def test_the_policies_name_the_objective():
    feats, x, y = synthetic_xy(30)
    tree = DecisionTreeClassifier(max_depth=2, random_state=0).fit(x, y)
    rules = tomllib.loads(export.tree_to_policy(tree, name="r", features=feats, classes=list(tree.classes_),
                                                initial="cubic", window=WINDOW, decide=DECIDE, objective="power"))
    assert rules["objective"] == "power"
    text = export.model_policy(name="m", model_file="m.json", initial="bbr", window=WINDOW, decide=DECIDE,
                               objective="tct_delay_budget:budget_ms=50.0", description="d", comment="regenerate")
    assert text.startswith("# regenerate\n")
    assert tomllib.loads(text) == {
        "name": "m", "description": "d", "initial": "bbr", "objective": "tct_delay_budget:budget_ms=50",
        "model": "m.json", "window": WINDOW, "decide": {"spatial": True, "temporal": False, "min_samples": 8},
        "hysteresis": {"min_dwell_ms": 3000, "agreeing": 1}}


# ---- golden data ---------------------------------------------------------------------------


def test_golden_csv_has_the_documented_columns_and_sklearns_answers(tmp_path):
    feats, x, y = synthetic_xy()
    model = RandomForestClassifier(n_estimators=10, max_depth=5, random_state=1).fit(x, y)
    doc = export.model_to_dict(model, name="g", features=feats, window=WINDOW, decide=DECIDE)
    g = export.golden_vectors(doc, x, n=10_000, seed=2)
    path = export.write_golden(model, doc, g, tmp_path / "g.golden.csv")
    header = path.read_text().splitlines()[0].split(",")
    assert header == feats + ["label"] + [f"proba_{c}" for c in doc["classes"]]
    names, gx, glabel, gclasses, gp = export.read_golden(path)
    assert len(gx) >= 10_000 and names == feats and gclasses == doc["classes"]
    assert np.array_equal(gx, g)  # exact f64 values survive the text
    assert glabel == model.predict(g).tolist()
    assert np.array_equal(gp, model.predict_proba(g))
    # dataset rows, values exactly at each threshold and at its f32 cast boundary
    assert all(any(np.array_equal(row, r) for r in gx[: len(x)]) for row in x[:5])
    for f, ts in export.thresholds_by_feature(doc).items():
        col = set(gx[:, f].tolist())
        for t in ts:
            assert t in col and export.rule_threshold(t) in col


def test_golden_vectors_catch_an_evaluator_that_forgets_the_f32_cast():
    # Two points whose midpoint threshold is not an f32: between it and the f32 cast's edge,
    # sklearn (cast, then compare) goes left while a plain f64 compare goes right.
    x = np.array([[0.1], [0.2]])
    tree = DecisionTreeClassifier().fit(x, ["bbr", "cubic"])
    doc = export.model_to_dict(tree, name="s", features=["loss_rate"], window=WINDOW, decide=DECIDE)
    g = export.golden_vectors(doc, x, n=100)
    t = tree.tree_.threshold[0]
    no_cast = np.where(g[:, 0] <= t, "bbr", "cubic")
    assert (no_cast != tree.predict(g)).any()
    assert export.predict_dict(doc, g) == tree.predict(g).tolist()


# ---- rules policy --------------------------------------------------------------------------


def f32(v):
    with np.errstate(over="ignore"):  # values past the largest f32 become infinite, as they should
        return float(np.float32(v))


@pytest.mark.parametrize("t", [
    1.0,                                       # an f32 with an even significand: the tie goes left
    float(np.nextafter(np.float32(1), np.float32(2))),  # odd significand: the tie goes right
    0.15000000596046448 / 2 + 0.2 / 2,         # a midpoint of data, as sklearn writes thresholds
    0.0, -0.75, 5e-45, 1e-30, 123456.789, 3.0e38, float(np.finfo(np.float32).max),
])
def test_rule_threshold_is_the_f64_edge_of_the_f32_compare(t):
    b = export.rule_threshold(t)
    assert f32(b) <= t
    assert not f32(math.nextafter(b, math.inf)) <= t
    rng = np.random.default_rng(0)
    around = b + (rng.random(200) - 0.5) * max(abs(b), 1e-40) * 1e-6
    with np.errstate(over="ignore"):
        cast = around.astype(np.float32).astype(np.float64) <= t
    assert ((around <= b) == cast).all()


def test_rule_threshold_known_values():
    assert export.rule_threshold(1.0) == 1.0 + 2.0 ** -24      # the tie rounds to 1.0 (even)
    odd = 1.0 + 2.0 ** -23
    assert export.rule_threshold(odd) == math.nextafter(1.0 + 1.5 * 2.0 ** -23, 0)
    with pytest.raises(ValueError, match="f32 range"):
        export.rule_threshold(1e39)


def test_the_rules_policy_chooses_exactly_what_the_tree_predicts():
    feats, x, y = synthetic_xy(120)
    tree = DecisionTreeClassifier(max_depth=4, random_state=0).fit(x, y)
    text = export.tree_to_policy(tree, name="r", features=feats, classes=list(tree.classes_), initial="cubic",
                                 window=WINDOW, decide=DECIDE, provenance={"dataset": "synthetic"})
    policy = tomllib.loads(text)
    assert policy["initial"] == "cubic" and policy["window"] == WINDOW
    assert policy["decide"] == {"spatial": True, "temporal": False, "min_samples": 8}
    assert policy["hysteresis"] == {"min_dwell_ms": 3000, "agreeing": 1}
    assert "# dataset: synthetic" in text
    for rule in policy["rule"]:
        assert set(rule) == {"when", "use"}
        for cmp in rule["when"].split(" and "):
            f, op, v = cmp.split()
            assert f in feats and op in ("<=", ">") and math.isfinite(float(v))
    doc = export.model_to_dict(tree, name="r", features=feats, window=WINDOW, decide=DECIDE)
    g = export.golden_vectors(doc, x, n=10_000)
    assert export.policy_choices(policy, g, feats) == tree.predict(g).tolist()
    # the same rules with the tree's own thresholds would be wrong at the f32 edges
    raw = text
    for t in {float(v) for v in tree.tree_.threshold if v != -2}:
        raw = raw.replace(repr(export.rule_threshold(t)), repr(t))
    assert export.policy_choices(tomllib.loads(raw), g, feats) != tree.predict(g).tolist()


def test_a_tree_of_one_class_is_one_rule_and_forests_or_deep_trees_are_refused():
    feats, x, y = synthetic_xy(30)
    one = DecisionTreeClassifier().fit(x, ["bbr"] * len(x))
    policy = tomllib.loads(export.tree_to_policy(one, name="o", features=feats, classes=["bbr"], initial="cubic",
                                                 window=WINDOW, decide=DECIDE))
    assert policy["rule"] == [{"use": "bbr"}] and "default" not in policy
    with pytest.raises(TypeError, match="forest"):
        export.tree_rules(RandomForestClassifier(n_estimators=2).fit(x, y), feats, ["a", "b", "c", "d"])
    deep = DecisionTreeClassifier(max_depth=8).fit(x, y)
    assert deep.tree_.max_depth > 3
    with pytest.raises(ValueError, match="deep"):
        export.tree_rules(deep, feats, list(deep.classes_), max_depth=3)


def test_policy_choices_follows_the_rule_language_on_a_hand_written_policy():
    policy = tomllib.loads("""
        name = "p"
        initial = "cubic"
        default = "bbr"
        [params]
        lim = 50
        [[rule]]
        when = "loss_rate <= 0"
        use = "hybla"
        [[rule]]
        when = "min_rtt_ms < lim and loss_rate > 0 or min_rtt_ms >= 400"
        use = "illinois"
    """)
    x = np.array([[10.0, 0.0], [10.0, 0.01], [60.0, 0.01], [400.0, 0.01], [50.0, 0.01]])
    assert export.policy_choices(policy, x, ["min_rtt_ms", "loss_rate"]) == ["hybla", "illinois", "bbr", "illinois", "bbr"]


def test_a_dataset_names_its_candidates_by_spec_and_carries_its_window(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = learner_synthetic.synthetic_table(n_paths=6, reps=2, seed=1)
    cols["tct_cubic_beta_0_8"] = cols.pop("tct_cubic")
    cols["n_cubic_beta_0_8"] = cols.pop("n_cubic")
    cols["tct_bbr"][0] = cols["tct_hybla"][0] = cols["tct_illinois"][0] = cols["tct_cubic_beta_0_8"][0] = None
    meta = {"window": {"kind": "sliding", "samples": 30, "min_samples": 8}, "initial": "cubic",
            "candidates": ["bbr", "hybla", "illinois", "cubic:beta=0.8"], "features": list(learner_synthetic.FEATURES)}
    table = pa.table(cols).replace_schema_metadata({b"ccswitch.dataset": json.dumps(meta).encode()})
    pq.write_table(table, tmp_path / "d.parquet")
    ds = training.load_dataset(tmp_path / "d.parquet")
    assert ds.candidates == ["bbr", "hybla", "illinois", "cubic_beta_0_8"]
    assert ds.specs == ["bbr", "hybla", "illinois", "cubic:beta=0.8"]
    assert ds.window == {"kind": "sliding", "samples": 30} and ds.decide == {"min_samples": 8}
    assert len(ds.table) == 11  # the row without any finished candidate is dropped
    assert ds.features == list(learner_synthetic.FEATURES) and ds.x.shape == (11, 12)
    assert not ds.synthetic
    only = training.load_dataset(tmp_path / "d.parquet", candidates=["cubic:beta=0.8", "bbr"])
    assert only.specs == ["cubic:beta=0.8", "bbr"] and only.tct.shape == (11, 2)
    with pytest.raises(ValueError, match="no column"):
        training.load_dataset(tmp_path / "d.parquet", candidates=["vegas"])


def test_the_constant_reference_is_the_algorithm_best_on_average():
    cost = labels.cost_matrix(np.array([[1.0, 1.1], [1.0, 1.1], [5.0, 1.0]]))
    assert training.fit("constant", "-", np.zeros((3, 1)), cost, max_depth=None).predict(np.zeros((2, 1))).tolist() == [1, 1]


def test_a_dataset_with_missing_feature_values_is_refused(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = learner_synthetic.synthetic_table(n_paths=3, reps=2, seed=1)
    cols["f_rtt_cov"][2] = None
    pq.write_table(pa.table(cols), tmp_path / "d.parquet")
    with pytest.raises(ValueError, match=r"\['rtt_cov'\] hold missing"):
        training.load_dataset(tmp_path / "d.parquet")
