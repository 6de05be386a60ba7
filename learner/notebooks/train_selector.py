# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: ccswitch
#     language: python
#     name: ccswitch
# ---

# %% [markdown]
# # Train a selector: the algorithm that serves the operator's objective best
#
# Input: a dataset built by `ccswitch dataset` (learner/README.md): one row per transfer
# observed under the policy's `initial` algorithm, with the features at the selector's first
# decision and every candidate's figures (TCT, throughput, delay p95, harm) on the same path;
# optionally a second dataset of test paths. Output, in `out_dir`:
#
# - `NAME.json`: the model the agent evaluates natively (format version 1), naming its
#   objective, with each node's mean regret per class;
# - `NAME.golden.csv`: vectors with scikit-learn's `predict` / `predict_proba`, for the
#   agent's parity test;
# - `NAME.policy.toml`: the policy that runs the model;
# - `NAME.rules.toml`: a shallow tree written as a rules policy, readable and loadable by
#   the agent without the model evaluator;
# - `NAME.report.json` and `NAME.*.png`: the held-out figures below.
#
# The goal is the least cost under `OBJECTIVE` (`ccswitch.learner.objectives`: `tct` the
# transfer time, `power` delay over throughput, `tct_delay_budget` the time with a miss of the
# delay budget costing four times, `harm` the time scaled by the harm done to a competing
# flow, `weighted` a product of these), not the most accurate labels, so strategies are
# compared and chosen by **regret**: how much more the chosen algorithm costs than the
# cheapest one on the same path (`ccswitch.learner.labels`). Paths are split, never rows:
# repetitions of one path on both sides would let a model recognise the path instead of
# learning what its features say. Strategies are chosen on the training paths alone; the
# test paths (`TEST_DATASET`, or `test_fraction` of the dataset's paths) are read for the
# final report only.

# %% tags=["parameters"]
OBJECTIVE = "tct"  # objectives.py: tct | power | tct_delay_budget[:budget_ms=100] | harm | weighted:tct=1,harm=1,...
TEST_DATASET = None  # a dataset of test paths, read only for the final report; None: hold out test_fraction of `dataset`'s paths
HANDOVER_COST = None  # a JSON file {"default": X, "pairs": {"a>b": Y}} (relative cost) put in the model file; None: none
dataset = "../data/small.parquet"  # relative to this notebook's directory
out_dir = "../models"
model_name = "small"
test_fraction = 0.3  # share of paths held out for the final figures (without TEST_DATASET)
seed = 1
kinds = ["tree", "forest"]  # model kinds to compare
strategies = ["oracle", "weighted", "expanded"]  # exportable training strategies to compare
handover_margins = [0.0, 0.05, 0.1, 0.2]  # relative gains a handover must beat in training (labels.with_handover_margin)
switch_margins = None  # the old name of handover_margins, still accepted (papermill -p switch_margins ...)
reference = True  # also score per-candidate regressors and the best fixed choice (not exported)
max_depth = 5  # of every tree, forests included
n_trees = 50  # per forest
min_samples_leaf = 2
cv_folds = 3  # folds over training paths for choosing the strategy
cv_repeats = 5  # draws of those folds, averaged
cv_metric = "total"  # "total": total cost over the oracle's (what mean-TCT targets judge); "mean": mean relative regret; "geomean": geometric mean of cost / oracle cost
candidates = []  # algorithm specs to choose among; empty: every candidate of the dataset
rules_depth = 3  # depth of the tree written as a rules policy
golden_rows = 10000
window = None  # e.g. {"kind": "first", "samples": 20}; None: from the dataset's metadata
decide = None  # e.g. {"min_samples": 8}; None: from the dataset's metadata
hysteresis = {"min_dwell_ms": 3000, "agreeing": 1}
temporal = False  # the exported policy re-decides on every report (sliding windows; learner/temporal.py), past its hysteresis and the model's gain gate
compare_policies = ["../../agent/policies/mystique.toml"]  # rules policies to score beside the model

# %%
import json
import os
import tomllib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import sklearn
from sklearn.metrics import confusion_matrix

from ccswitch.learner import export, labels, objectives, training

out = Path(out_dir)
out.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## The dataset

# %%
if isinstance(candidates, str):  # `papermill -p candidates bbr,cubic` passes a string
    candidates = [c for c in candidates.split(",") if c]
objective = objectives.parse(OBJECTIVE)
ds = training.load_dataset(dataset, candidates=candidates or None, objective=objective)
df = ds.table
cands = ds.specs  # algorithm specs, in the order of the cost matrix's columns
features = ds.features
window = window or ds.window
decide = decide or ds.decide
if not window or not decide:
    raise ValueError(f"{dataset} records no feature window / decide settings: pass window= and decide=")
initials = sorted(df["initial"].unique())
if len(initials) != 1:
    raise ValueError(f"rows measured under several initial algorithms {initials}: one dataset per policy")
initial = initials[0]
initial_index = cands.index(initial) if initial in cands else None
cost_all = ds.cost  # the objective's cost, NaN where a candidate has none
miss_all = ds.miss  # tct_delay_budget: budget misses; None for other objectives
decided_all = df["decision_at_s"].notna().to_numpy() if "decision_at_s" in df else np.ones(len(df), bool)
print(f"{dataset}: {len(df)} rows, {df['path_id'].nunique()} paths, candidates {cands}, initial {initial}; "
      f"objective {objective.canonical}")
print(f"window {window}, decide {decide}; {int((~decided_all).sum())} rows end before the first decision")
if ds.synthetic:
    print("NOTE: this dataset is SYNTHETIC (a test fixture), not measured")

summary = pd.DataFrame({alg: o.as_dict() for alg, o in labels.fixed_choices(cost_all, cands, miss_all).items()}).T
summary["oracle_rows"] = np.bincount(labels.oracle(cost_all), minlength=len(cands))
summary[["mean_cost", "mean_regret", "total_regret", "geomean_ratio", "oracle_rows", "failed"]
        + (["miss_rate"] if miss_all is not None else [])]

# %% [markdown]
# ## Split by path
# With `TEST_DATASET` every row of `dataset` trains and the test paths are that file's (read
# only in the final report). Without it, every row of a path lands on one side of a split of
# `dataset`. Training uses only rows with a decision (a flow that ends before the selector's
# first decision never consults the model); evaluation uses every test row, giving the
# undecided ones the initial algorithm's cost.

# %%
if TEST_DATASET:
    train_idx, test_idx = np.arange(len(df)), None
else:
    train_idx, test_idx = labels.group_split(df["path_id"], test_fraction, seed)
train_paths = set(df["path_id"].iloc[train_idx])
x_all = ds.x
regret_all = labels.cost_matrix(cost_all)  # relative regret, failures priced
fit_rows = train_idx[decided_all[train_idx]]
x_tr, regret_tr, groups_tr = x_all[fit_rows], regret_all[fit_rows], df["path_id"].to_numpy()[fit_rows]
print(f"train: {len(train_paths)} paths, {len(fit_rows)} rows with a decision; "
      f"test: {'the paths of ' + str(TEST_DATASET) if TEST_DATASET else f'{len(test_idx)} rows of this dataset'}")

# %% [markdown]
# ## Choose a strategy by regret on held-out training paths
# Folds are grouped by path too, drawn among the training paths only. The references are not exported: `regress` shows what a
# per-candidate estimate of the cost would gain over a classifier, `constant` (the one
# algorithm best on the training rows) whether the features help at all.

# %%
if switch_margins is not None:
    handover_margins = switch_margins
if isinstance(handover_margins, (int, float)):
    handover_margins = [handover_margins]
fit_kw = dict(max_depth=max_depth, n_trees=n_trees, min_samples_leaf=min_samples_leaf, initial_index=initial_index)
if initial_index is None:
    handover_margins = [0.0]  # a margin is relative to the initial algorithm
folds = min(cv_folds, len(set(groups_tr)))
if cv_metric not in ("total", "mean", "geomean"):
    raise ValueError(f"cv_metric {cv_metric!r}: must be 'total', 'mean' or 'geomean'")
cv_kw = dict(folds=folds, seed=seed, repeats=cv_repeats, geometric=cv_metric == "geomean",
             row_weights=labels.oracle_cost(cost_all[fit_rows]) if cv_metric == "total" else None)
rows = []
for margin in handover_margins:
    for kind in kinds:
        for strategy in strategies:
            r = training.cv_regret(strategy, kind, x_tr, regret_tr, groups_tr, handover_margin=margin, **cv_kw, **fit_kw)
            rows.append({"kind": kind, "strategy": strategy, "handover_margin": margin, f"cv_{cv_metric}_regret": r,
                         "exportable": True})
if reference:
    for strategy in training.REFERENCE_STRATEGIES:
        r = training.cv_regret(strategy, "forest", x_tr, regret_tr, groups_tr, **cv_kw, **fit_kw)
        rows.append({"kind": "forest" if strategy == "regress" else "-", "strategy": strategy,
                     "handover_margin": 0.0, f"cv_{cv_metric}_regret": r, "exportable": False})
cv = pd.DataFrame(rows).sort_values(f"cv_{cv_metric}_regret", kind="stable").reset_index(drop=True)
best = cv[cv["exportable"]].iloc[0]
best_tree = cv[cv["exportable"] & (cv["kind"] == "tree")]
rules_row = best_tree.iloc[0] if len(best_tree) else best
print(f"chosen: {best['kind']} / {best['strategy']} / margin {best['handover_margin']}; "
      f"rules from a tree / {rules_row['strategy']} / margin {rules_row['handover_margin']}")
cv

# %% [markdown]
# ## Test paths: the chosen model against the oracles, the best fixed choice and every fixed algorithm
# The test rows are read here, after every choice of strategy, margin and model was made.
# References: the per-row **oracle** (the cheapest candidate of each path and size), the
# **per-path oracle** (one candidate per path, the best over its transfers), and the **best
# fixed** choice (the candidate with the least mean cost on the training rows). Figures are
# in the objective's cost; `geomean_ratio` is the geometric mean over test rows of chosen cost
# over the oracle's, `vs_best_fixed` the same over the best fixed choice's (a choice without
# a cost priced as in training); `miss_rate` (tct_delay_budget) the share of choices over the
# delay budget.

# %%
model = training.fit(best["strategy"], best["kind"], x_tr, regret_tr, seed=seed,
                     handover_margin=best["handover_margin"], **fit_kw)
rules_strategy = rules_row["strategy"]
rules_tree = training.fit(rules_strategy, "tree", x_tr, regret_tr, seed=seed, max_depth=rules_depth,
                          min_samples_leaf=min_samples_leaf, initial_index=initial_index,
                          handover_margin=rules_row["handover_margin"])
best_fixed = labels.best_fixed(cost_all[train_idx])

if TEST_DATASET:
    test_ds = training.load_dataset(TEST_DATASET, candidates=cands, features=features, objective=objective)
    if (test_ds.window, test_ds.decide) != (window, decide):
        raise ValueError(f"{TEST_DATASET}: features with window {test_ds.window} / {test_ds.decide}, "
                         f"the training dataset's are {window} / {decide}")
    te_df = test_ds.table.reset_index(drop=True)
    x_te, cost_te, miss_te = test_ds.x, test_ds.cost, test_ds.miss
else:
    te_df = df.iloc[test_idx].reset_index(drop=True)
    x_te, cost_te = x_all[test_idx], cost_all[test_idx]
    miss_te = None if miss_all is None else miss_all[test_idx]
test_paths = set(te_df["path_id"])
if train_paths & test_paths:
    raise ValueError(f"{len(train_paths & test_paths)} path(s) both in training and test, e.g. "
                     f"{sorted(train_paths & test_paths)[0]}")
decided_te = te_df["decision_at_s"].notna().to_numpy() if "decision_at_s" in te_df else np.ones(len(te_df), bool)
n_te = len(te_df)
print(f"test: {len(test_paths)} paths, {n_te} rows; best fixed on the training rows: {cands[best_fixed]}")

policies = {}
model_key = f"model ({best['kind']}/{best['strategy']}, margin {best['handover_margin']:g})"
policies[model_key] = labels.decided_choice(model.predict(x_te), decided_te, initial_index)
policies[f"rules (depth {rules_tree.get_depth()} tree)"] = labels.decided_choice(rules_tree.predict(x_te), decided_te, initial_index)
if reference:
    ref = training.fit("regress", "forest", x_tr, regret_tr, seed=seed, **fit_kw)
    policies["regressors (reference)"] = labels.decided_choice(ref.predict(x_te), decided_te, initial_index)

# Hand-written policies on the same features, when their algorithms are all candidates.
# (The agent may run them with another window and later decisions; here they get one
# decision on the dataset's window, like the model.)
for path in compare_policies:
    other = tomllib.loads(Path(path).read_text())
    uses = {r["use"] for r in other["rule"]} | ({other["default"]} if "default" in other else set())
    if not uses <= set(cands):
        print(f"{path}: not compared, it uses {sorted(uses - set(cands))} which the dataset did not measure")
        continue
    picks = export.policy_choices(other, x_te, features)
    policies[f"{other['name']} rules"] = labels.decided_choice(np.array([cands.index(p) for p in picks]), decided_te, initial_index)
policies["oracle"] = labels.oracle(cost_te)
policies["per-path oracle"] = labels.path_oracle(cost_te, te_df["path_id"])
policies[f"best fixed ({cands[best_fixed]})"] = np.full(n_te, best_fixed)
for j, alg in enumerate(cands):
    policies[f"always {alg}"] = np.full(n_te, j)
priced_te = labels.priced(cost_te)
rows_te = np.arange(n_te)


def vs_best_fixed(pick):
    return float(np.exp(np.mean(np.log(priced_te[rows_te, pick] / priced_te[:, best_fixed]))))


held_out = pd.DataFrame({name: {**labels.evaluate(cost_te, pick, miss_te).as_dict(), "vs_best_fixed": vs_best_fixed(pick)}
                         for name, pick in policies.items()}).T
held_out = held_out.sort_values("geomean_ratio", kind="stable")
shown = ["mean_cost", "mean_regret", "total_regret", "p90_regret", "geomean_ratio", "vs_best_fixed", "oracle_share",
         "failed", "rows"] + (["miss_rate"] if miss_te is not None else [])
m = held_out.loc[model_key]
print(f"{objective.canonical}: the model costs {m['geomean_ratio']:.3f}x the oracle and {m['vs_best_fixed']:.3f}x "
      f"the best fixed choice ({cands[best_fixed]}) in geometric mean over {n_te} test rows"
      + (f"; misses the delay budget on {m['miss_rate']:.1%}" if miss_te is not None else ""))
held_out[shown]

# %% [markdown]
# Per test path, the model's cost over the oracle's (geometric mean over the path's
# transfers), worst first: where the model loses, and what it chose there.

# %%
chosen = policies[model_key]
te_df = te_df.assign(chosen=[cands[c] for c in chosen], model_cost=priced_te[rows_te, chosen],
                     oracle_cost=labels.oracle_cost(cost_te), oracle=[cands[c] for c in labels.oracle(cost_te)],
                     path_oracle=[cands[c] for c in policies["per-path oracle"]],
                     log_ratio=np.log(priced_te[rows_te, chosen] / labels.oracle_cost(cost_te)))
path_cols = [c for c in ["link_kind", "rtt_ms", "mbps", "downlink_trace", "loss_downlink", "queue_bdp", "has_schedule",
                         "has_competitor"] if c in te_df]
by_path = te_df.groupby("path_id").agg(
    **{c: (c, "first") for c in path_cols},
    sizes=("file_bytes", lambda v: ",".join(str(int(b)) for b in sorted(v))),
    chosen=("chosen", lambda v: ",".join(v)), oracle=("oracle", lambda v: ",".join(v)),
    path_oracle=("path_oracle", "first"), model_cost=("model_cost", "sum"), oracle_cost=("oracle_cost", "sum"),
    ratio=("log_ratio", lambda v: float(np.exp(np.mean(v)))))
by_path["regret"] = by_path["ratio"] - 1
by_path = by_path.sort_values("ratio", ascending=False, kind="stable")
worst_path = by_path.iloc[0]
print(f"worst test path {by_path.index[0]}: {worst_path['ratio']:.3f}x the oracle's cost "
      f"(chose {worst_path['chosen']}, the oracle {worst_path['oracle']})")
by_path.head(10)

# %%
regret_te = labels.cost_matrix(cost_te)
fig, ax = plt.subplots(figsize=(7, 4))
for name, pick in policies.items():
    rel = np.sort(regret_te[rows_te, pick])
    ax.step(rel, np.arange(1, len(rel) + 1) / len(rel), where="post", label=name)
ax.set_xscale("symlog", linthresh=0.01)
ax.set_xlabel(f"relative regret ({objective.canonical}: cost / oracle cost - 1)")
ax.set_ylabel("share of test transfers")
ax.set_title("Regret on test paths")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(out / f"{model_name}.regret.png", dpi=100)

# %%
cm = confusion_matrix(labels.oracle(cost_te), chosen, labels=range(len(cands)))
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
im = axes[0].imshow(cm, cmap="Blues")
axes[0].set_xticks(range(len(cands)), cands, rotation=45)
axes[0].set_yticks(range(len(cands)), cands)
axes[0].set_xlabel("chosen")
axes[0].set_ylabel("oracle")
axes[0].set_title("Test confusion (rows)")
for (i, j), v in np.ndenumerate(cm):
    axes[0].text(j, i, str(v), ha="center", va="center", fontsize=8)
importance = pd.Series(model.feature_importances_, index=features).sort_values()
importance.plot.barh(ax=axes[1])
axes[1].set_title("Feature importance (impurity)")
fig.tight_layout()
fig.savefig(out / f"{model_name}.model.png", dpi=100)
pd.DataFrame(cm, index=[f"oracle {c}" for c in cands], columns=[f"chose {c}" for c in cands])

# %% [markdown]
# ## Export: the model file and golden data
# The model file names its objective and carries, per node, the mean regret of each class
# over the training rows that reach it (true costs, without the handover margin). It is
# checked against scikit-learn through the format's reference evaluator
# (`export.predict_proba_dict`) on every golden vector before anything is written.

# %%
classes = [cands[c] for c in model.classes_]
provenance = {
    "dataset": os.path.basename(dataset),
    "dataset_rows": int(len(df)),
    "dataset_paths": int(df["path_id"].nunique()),
    "objective": objective.canonical,
    "strategy": f"{best['kind']}/{best['strategy']}, handover margin {best['handover_margin']:g}",
    "train_paths": len(train_paths),
    "test": os.path.basename(TEST_DATASET) if TEST_DATASET else f"{len(test_paths)} paths of the dataset",
    "seed": seed,
    "held_out_mean_regret": float(held_out.loc[model_key, "mean_regret"]),
    "held_out_geomean_ratio": float(held_out.loc[model_key, "geomean_ratio"]),
    "notebook": "learner/notebooks/train_selector.py",
}
handover = json.loads(Path(HANDOVER_COST).read_text()) if HANDOVER_COST else None
if handover:
    # the file also says where its figures come from (source, method): provenance, not model
    provenance["handover_cost"] = {k: v for k, v in handover.items() if k not in ("default", "pairs")}
    handover = {k: handover[k] for k in ("default", "pairs") if k in handover}
if handover and handover.get("pairs"):
    # the model file may name only its classes; a pair with an algorithm it never chooses is moot
    moot = [k for k in handover["pairs"] if not set(k.split(">")) <= set(classes)]
    if moot:
        print(f"{HANDOVER_COST}: pairs {moot} left out: the model never chooses one of their algorithms")
    handover = {**handover, "pairs": {k: v for k, v in handover["pairs"].items() if k not in moot}}
model_doc = export.model_to_dict(model, name=model_name, features=features, classes=classes,
                                 window=window, decide=decide, provenance=provenance, objective=objective.canonical,
                                 train_x=x_tr, train_regret=regret_tr[:, model.classes_], handover_cost=handover)
golden_x = export.golden_vectors(model_doc, x_all, n=golden_rows, seed=seed)
ours = export.predict_proba_dict(model_doc, golden_x)
theirs = model.predict_proba(golden_x)
assert np.array_equal(ours, theirs), f"model file disagrees with sklearn: max |dp| {np.abs(ours - theirs).max()}"
assert export.predict_dict(model_doc, golden_x) == [cands[c] for c in model.predict(golden_x)]
model_path = export.write_model(model_doc, out / f"{model_name}.json")
golden_path = export.write_golden(model, model_doc, golden_x, out / f"{model_name}.golden.csv")
assert export.read_model(model_path) == json.loads(json.dumps(model_doc))
print(f"wrote {model_path} ({len(model_doc['trees'])} tree(s), objective {model_doc['objective']}) "
      f"and {golden_path} ({len(golden_x)} rows)")

# %% [markdown]
# ## Export: the policy that runs the model
# `kernel:policy:learner/models/NAME.policy.toml` in a scenario, or `ccswitch-agent --policy`.
# Its window and minimum samples are the model's (the agent refuses any other).

# %%
model_policy_text = export.model_policy(
    name=model_name, model_file=f"{model_name}.json", initial=initial, window=window,
    decide={**decide, "temporal": bool(temporal)}, objective=objective.canonical, hysteresis=hysteresis,
    description=f"{provenance['strategy']} for {objective.canonical} trained on {provenance['dataset']} "
                f"({provenance['dataset_paths']} paths)",
    comment=f"Runs {model_name}.json, written by learner/notebooks/train_selector.py; regenerate it rather than edit it.")
model_policy_path = out / f"{model_name}.policy.toml"
model_policy_path.write_text(model_policy_text)
print(model_policy_text)

# %% [markdown]
# ## Export: the shallow tree as a rules policy
# The policy's bounds are the f64 edges of the tree's f32 compares, so the rules choose
# exactly what the tree predicts; checked here on every golden vector.

# %%
rules_classes = [cands[c] for c in rules_tree.classes_]
policy_text = export.tree_to_policy(
    rules_tree, name=f"{model_name}-rules", features=features, classes=rules_classes, initial=initial,
    window=window, decide=decide, hysteresis=hysteresis, max_depth=rules_depth, objective=objective.canonical,
    description=f"depth-{rules_tree.get_depth()} tree ({rules_strategy}) for {objective.canonical} trained on "
                f"{os.path.basename(dataset)}",
    provenance={**provenance, "strategy": f"tree/{rules_strategy}", "sklearn": sklearn.__version__},
)
policy_path = out / f"{model_name}.rules.toml"
policy_path.write_text(policy_text)
rules_x = export.golden_vectors(export.model_to_dict(rules_tree, name="rules", features=features, classes=rules_classes,
                                                     window=window, decide=decide), x_all, n=golden_rows, seed=seed)
by_rules = export.policy_choices(tomllib.loads(policy_text), rules_x, features)
by_tree = [cands[c] for c in rules_tree.predict(rules_x)]
assert by_rules == by_tree, f"{sum(a != b for a, b in zip(by_rules, by_tree))} vectors where rules and tree differ"
print(policy_text)

# %%
report = {
    "model": str(model_path.name),
    "objective": objective.canonical,
    "dataset": provenance["dataset"],
    "test_dataset": os.path.basename(TEST_DATASET) if TEST_DATASET else None,
    "synthetic": ds.synthetic,
    "candidates": cands,
    "chosen": provenance["strategy"],
    "cv": cv.to_dict(orient="records"),
    "best_fixed": cands[best_fixed],
    "geomean_ratio_vs_oracle": float(held_out.loc[model_key, "geomean_ratio"]),
    "geomean_ratio_vs_best_fixed": float(held_out.loc[model_key, "vs_best_fixed"]),
    "held_out": held_out.reset_index(names="policy").to_dict(orient="records"),
    "worst_held_out_paths": by_path.head(5).reset_index().to_dict(orient="records"),
    "confusion": {"labels": cands, "rows_oracle_cols_chosen": cm.tolist()},
    "importance": importance.to_dict(),
    "golden_rows": int(len(golden_x)),
    "rules_agree_with_tree": int(len(rules_x)),
}
(out / f"{model_name}.report.json").write_text(json.dumps(report, indent=1) + "\n")
held_out[shown]
