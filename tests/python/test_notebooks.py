"""Every learner notebook runs to the end with small parameters, and what it writes parses:
the model file, its golden data (sklearn's answers, reproduced by the format's reference
evaluator and by the agent's own, through ccswitch._native), the rules policy (which the
agent loads), and the report.

The notebooks run on learner/data/small.parquet, the small dataset a real sweep produced,
once it is in git (missing then is a failure, not a skip); before that, on a synthetic
dataset written by tests/python/learner_synthetic.py into a temporary directory. The training
notebook runs once more for another objective (a delay budget) on synthetic data with a
separate test dataset and a handover cost file. Outputs go to a temporary directory: the
shipped models are never overwritten."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import tomllib

from ccswitch.experiments import environment
from ccswitch.learner import export

import learner_synthetic

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "learner" / "notebooks").glob("*.py"))
SMALL = "learner/data/small.parquet"
KERNEL = "ccswitch"


def small_dataset(tmp_path) -> Path:
    tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", "--error-unmatch", SMALL],
                             capture_output=True, text=True).returncode == 0
    if tracked:
        path = REPO / SMALL
        assert path.exists(), f"{SMALL} is in git but missing from the work tree"
        return path
    return Path(learner_synthetic.write_synthetic_parquet(tmp_path / "synthetic.parquet", n_paths=40, reps=3))


def test_there_are_notebooks():
    assert NOTEBOOKS, "no learner/notebooks/*.py"


#: The training notebook's second run: another objective, a test dataset, handover costs.
BUDGET = "tct_delay_budget:budget_ms=60"
HANDOVER = {"default": 0.05, "pairs": {"bbr>cubic": 0.1, "cubic>vegas": 0.2}}


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    """Run every notebook once, and the training notebook once more for the delay budget;
    {run name: (output dir, model name)}."""
    import jupytext
    import papermill

    tmp = tmp_path_factory.mktemp("notebooks")
    data = small_dataset(tmp)
    small = dict(n_trees=8, max_depth=4, cv_folds=2, cv_repeats=1, rules_depth=3, golden_rows=10_000, seed=3)
    runs = [(nb_path, nb_path.stem, dict(dataset=str(data))) for nb_path in NOTEBOOKS]
    train = REPO / "learner" / "notebooks" / "train_selector.py"
    if train in NOTEBOOKS:
        (tmp / "handover.json").write_text(json.dumps(HANDOVER))
        runs.append((train, "train_selector-budget", dict(
            dataset=learner_synthetic.write_synthetic_parquet(tmp / "train.parquet", n_paths=30, reps=2, seed=11),
            TEST_DATASET=learner_synthetic.write_synthetic_parquet(tmp / "test.parquet", n_paths=12, reps=2, seed=12),
            OBJECTIVE=BUDGET, HANDOVER_COST=str(tmp / "handover.json"), cv_metric="geomean")))
    done = {}
    for nb_path, run, params in runs:
        nb = jupytext.read(nb_path)
        tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
        assert len(tagged) == 1, f"{nb_path.name}: needs exactly one cell tagged 'parameters'"
        src = tmp / (run + ".ipynb")
        jupytext.write(nb, src)
        out_dir = tmp / run
        name = "test-" + run
        papermill.execute_notebook(
            str(src), str(tmp / (run + ".out.ipynb")), kernel_name=KERNEL, cwd=str(nb_path.parent),
            progress_bar=False, parameters=dict(out_dir=str(out_dir), model_name=name, **small, **params),
        )
        done[run] = (out_dir, name)
    return done


def test_every_notebook_runs_and_writes_a_model_golden_data_rules_and_a_report(executed):
    for stem, (out_dir, name) in executed.items():
        model = export.read_model(out_dir / f"{name}.json")
        assert model["name"] == name
        features, x, label, classes, proba = export.read_golden(out_dir / f"{name}.golden.csv")
        assert features == model["features"] and classes == model["classes"]
        assert len(x) >= 10_000
        # the file's semantics give sklearn's answers on every golden vector
        assert export.predict_dict(model, x) == label
        assert np.allclose(export.predict_proba_dict(model, x), proba, rtol=0, atol=1e-15)
        policy = tomllib.loads((out_dir / f"{name}.rules.toml").read_text())
        assert policy["window"] == model["window"] and policy["rule"]
        report = json.loads((out_dir / f"{name}.report.json").read_text())
        policies = {row["policy"] for row in report["held_out"]}
        assert "oracle" in policies and {f"always {c}" for c in report["candidates"]} <= policies
        worst = report["worst_held_out_paths"]
        assert worst and worst[0]["regret"] == max(p["regret"] for p in worst) and worst[0]["regret"] >= 0
        for png in ("regret", "model"):
            assert (out_dir / f"{name}.{png}.png").stat().st_size > 0


def test_the_training_notebook_trains_reports_and_exports_for_the_objective_it_is_given(executed):
    out_dir, name = executed["train_selector"]
    assert export.read_model(out_dir / f"{name}.json")["objective"] == "tct"
    out_dir, name = executed["train_selector-budget"]
    model = export.read_model(out_dir / f"{name}.json")
    assert model["objective"] == BUDGET
    # every node's regret per class, parallel to its probabilities
    assert all(len(t["cost"]) == len(t["value"]) and all(len(c) == len(model["classes"]) for c in t["cost"])
               for t in model["trees"])
    # pairs of algorithms the model never chooses are left out (vegas is no candidate)
    assert model["handover_cost"] == {"default": 0.05, "pairs": {"bbr>cubic": 0.1}}
    for kind in ("policy", "rules"):
        assert tomllib.loads((out_dir / f"{name}.{kind}.toml").read_text())["objective"] == BUDGET
    report = json.loads((out_dir / f"{name}.report.json").read_text())
    assert report["objective"] == BUDGET and report["test_dataset"] == "test.parquet"
    assert report["best_fixed"] in report["candidates"]
    rows = {r["policy"]: r for r in report["held_out"]}
    assert {"oracle", "per-path oracle", f"best fixed ({report['best_fixed']})"} <= set(rows)
    assert rows["oracle"]["geomean_ratio"] == 1.0 and rows["per-path oracle"]["geomean_ratio"] >= 1.0
    assert all(0 <= r["miss_rate"] <= 1 for r in rows.values())
    model_row = next(r for p, r in rows.items() if p.startswith("model ("))
    assert report["geomean_ratio_vs_oracle"] == model_row["geomean_ratio"] >= 1.0
    assert report["geomean_ratio_vs_best_fixed"] == model_row["vs_best_fixed"]
    # the test dataset's 12 paths, 2 rows each
    assert model_row["rows"] == 24 and sum(map(sum, report["confusion"]["rows_oracle_cols_chosen"])) == 24


def test_the_agents_evaluator_gives_sklearns_answers_on_each_notebooks_golden_data(executed):
    from ccswitch import _native

    for stem, (out_dir, name) in executed.items():
        model = _native.load_model(str(out_dir / f"{name}.json"))
        _, x, label, classes, proba = export.read_golden(out_dir / f"{name}.golden.csv")
        assert list(model.classes) == classes
        got = [model.predict(row.tolist()) for row in x]
        assert [g[0] for g in got] == label
        assert np.array_equal(np.array([g[1] for g in got]), proba)


def agent_binary():
    path = os.path.join(environment.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")
    return path


@pytest.mark.parametrize("kind, policy_name", [("rules", "{name}-rules"), ("policy", "{name}")])
def test_the_agent_loads_each_notebooks_rules_and_model_policies(executed, tmp_path, kind, policy_name):
    for stem, (out_dir, name) in executed.items():
        sock = tmp_path / f"{stem}.sock"
        log = tmp_path / f"{stem}.log"
        with open(log, "w") as fh:
            agent = subprocess.Popen([agent_binary(), "--socket", str(sock), "--policy", str(out_dir / f"{name}.{kind}.toml")],
                                     stdout=fh, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 20
            while not sock.exists() and agent.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert agent.poll() is None, f"the agent refused {name}.{kind}.toml:\n{log.read_text()}"
            assert sock.exists(), f"the agent did not listen within 20 s:\n{log.read_text()}"
        finally:
            agent.send_signal(signal.SIGTERM)
            agent.wait(timeout=10)
        assert f"policy={policy_name.format(name=name)}" in log.read_text(), log.read_text()


#: JSON files beside the models that are not models: the measured handover costs they embed
NOT_MODELS = {"handover-cost.json"}
SHIPPED = sorted(p for p in (REPO / "learner" / "models").glob("*.json") if p.name not in NOT_MODELS)


def test_models_are_shipped():
    assert [p for p in SHIPPED if not p.name.endswith(".report.json")], "no learner/models/*.json"


def test_every_shipped_model_comes_from_a_committed_measured_dataset_with_its_golden_data():
    for path in SHIPPED:
        if path.name.endswith(".report.json"):
            continue
        name = path.stem
        model = export.read_model(path)
        dataset = REPO / "learner" / "data" / model["provenance"]["dataset"]
        assert dataset.exists(), f"{path.name}: trained on {dataset.name}, which learner/data does not hold"
        report = json.loads((path.parent / f"{name}.report.json").read_text())
        assert report["synthetic"] is False, f"{path.name} was trained on synthetic data"
        _, x, label, classes, proba = export.read_golden(path.parent / f"{name}.golden.csv")
        assert len(x) >= 10_000 and classes == model["classes"]
        assert export.predict_dict(model, x) == label
        assert np.array_equal(export.predict_proba_dict(model, x), proba)
        tomllib.loads((path.parent / f"{name}.rules.toml").read_text())
