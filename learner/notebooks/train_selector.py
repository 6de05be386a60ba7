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
# # Train a selector: the algorithm that finishes a transfer first
#
# Input: a dataset built by `ccswitch dataset` (learner/README.md): one row per transfer
# observed under the policy's `initial` algorithm, with the features at the selector's first
# decision and every candidate's TCT on the same path. Output, in `out_dir`:
#
# - `NAME.json`: the model the agent evaluates natively (format version 1);
# - `NAME.golden.csv`: vectors with scikit-learn's `predict` / `predict_proba`, for the
#   agent's parity test;
# - `NAME.rules.toml`: a shallow tree written as a rules policy, readable and loadable by
#   the agent without the model evaluator;
# - `NAME.report.json` and `NAME.*.png`: the held-out figures below.
#
# The goal is the least transfer time, not the most accurate labels, so strategies are
# compared and chosen by **regret**: how much longer the chosen algorithm takes than the
# fastest one on the same path (`ccswitch.learner.labels`). Paths are split, never rows:
# repetitions of one path on both sides would let a model recognise the path instead of
# learning what its features say.

# %% tags=["parameters"]
dataset = "../data/small.parquet"  # relative to this notebook's directory
out_dir = "../models"
model_name = "small"
test_fraction = 0.3  # share of paths held out for the final figures
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
cv_metric = "total"  # "total": total TCT over the oracle's (what mean-TCT targets judge); "mean": mean relative regret
candidates = []  # algorithm specs to choose among; empty: every candidate of the dataset
rules_depth = 3  # depth of the tree written as a rules policy
golden_rows = 10000
window = None  # e.g. {"kind": "first", "samples": 20}; None: from the dataset's metadata
decide = None  # e.g. {"min_samples": 8}; None: from the dataset's metadata
hysteresis = {"min_dwell_ms": 3000, "agreeing": 1}
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

from ccswitch.learner import export, labels, training

out = Path(out_dir)
out.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## The dataset

# %%
if isinstance(candidates, str):  # `papermill -p candidates bbr,cubic` passes a string
    candidates = [c for c in candidates.split(",") if c]
ds = training.load_dataset(dataset, candidates=candidates or None)
df = ds.table
cands = ds.specs  # algorithm specs, in the order of the tct matrix's columns
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
tct_all = ds.tct
decided_all = df["decision_at_s"].notna().to_numpy() if "decision_at_s" in df else np.ones(len(df), bool)
print(f"{dataset}: {len(df)} rows, {df['path_id'].nunique()} paths, candidates {cands}, initial {initial}")
print(f"window {window}, decide {decide}; {int((~decided_all).sum())} rows end before the first decision")
if ds.synthetic:
    print("NOTE: this dataset is SYNTHETIC (a test fixture), not measured")

summary = pd.DataFrame({alg: o.as_dict() for alg, o in labels.fixed_choices(tct_all, cands).items()}).T
summary["oracle_rows"] = np.bincount(labels.oracle(tct_all), minlength=len(cands))
summary[["mean_cost", "mean_regret", "total_regret", "oracle_rows", "failed"]]

# %% [markdown]
# ## Split by path
# Every row of a path lands on one side. Training uses only rows with a decision (a flow that
# ends before the selector's first decision never consults the model); evaluation uses every
# held-out row, giving the undecided ones the initial algorithm's TCT.

# %%
train_idx, test_idx = labels.group_split(df["path_id"], test_fraction, seed)
train_paths = set(df["path_id"].iloc[train_idx])
test_paths = set(df["path_id"].iloc[test_idx])
assert not train_paths & test_paths, "a path on both sides of the split"
x_all = ds.x
cost_all = labels.cost_matrix(tct_all)
fit_rows = train_idx[decided_all[train_idx]]
x_tr, cost_tr, groups_tr = x_all[fit_rows], cost_all[fit_rows], df["path_id"].to_numpy()[fit_rows]
x_te, tct_te, decided_te = x_all[test_idx], tct_all[test_idx], decided_all[test_idx]
print(f"train: {len(train_paths)} paths, {len(fit_rows)} rows with a decision; "
      f"test: {len(test_paths)} paths, {len(test_idx)} rows")

# %% [markdown]
# ## Choose a strategy by regret on held-out training paths
# Folds are grouped by path too. The references are not exported: `regress` shows what a
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
if cv_metric not in ("total", "mean"):
    raise ValueError(f"cv_metric {cv_metric!r}: must be 'total' or 'mean'")
cv_kw = dict(folds=folds, seed=seed, repeats=cv_repeats,
             row_weights=labels.oracle_cost(tct_all[fit_rows]) if cv_metric == "total" else None)
rows = []
for margin in handover_margins:
    for kind in kinds:
        for strategy in strategies:
            r = training.cv_regret(strategy, kind, x_tr, cost_tr, groups_tr, handover_margin=margin, **cv_kw, **fit_kw)
            rows.append({"kind": kind, "strategy": strategy, "handover_margin": margin, f"cv_{cv_metric}_regret": r,
                         "exportable": True})
if reference:
    for strategy in training.REFERENCE_STRATEGIES:
        r = training.cv_regret(strategy, "forest", x_tr, cost_tr, groups_tr, **cv_kw, **fit_kw)
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
# ## Held-out paths: the chosen model against the oracle and every fixed algorithm

# %%
model = training.fit(best["strategy"], best["kind"], x_tr, cost_tr, seed=seed,
                     handover_margin=best["handover_margin"], **fit_kw)
rules_strategy = rules_row["strategy"]
rules_tree = training.fit(rules_strategy, "tree", x_tr, cost_tr, seed=seed, max_depth=rules_depth,
                          min_samples_leaf=min_samples_leaf, initial_index=initial_index,
                          handover_margin=rules_row["handover_margin"])
policies = {}
model_key = f"model ({best['kind']}/{best['strategy']}, margin {best['handover_margin']:g})"
policies[model_key] = labels.decided_choice(model.predict(x_te), decided_te, initial_index)
policies[f"rules (depth {rules_tree.get_depth()} tree)"] = labels.decided_choice(rules_tree.predict(x_te), decided_te, initial_index)
if reference:
    ref = training.fit("regress", "forest", x_tr, cost_tr, seed=seed, **fit_kw)
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
policies["oracle"] = labels.oracle(tct_te)
for j, alg in enumerate(cands):
    policies[f"always {alg}"] = np.full(len(test_idx), j)
held_out = pd.DataFrame({name: labels.evaluate(tct_te, pick).as_dict() for name, pick in policies.items()}).T
held_out = held_out.sort_values("mean_regret")
held_out[["mean_cost", "mean_regret", "total_regret", "p90_regret", "oracle_share", "failed", "rows"]]

# %% [markdown]
# Per held-out path, the model's total TCT over the oracle's (all sizes of the path together),
# worst first: where the model loses, and what it chose there.

# %%
te_df = df.iloc[test_idx].reset_index(drop=True)
priced = np.where(np.isnan(tct_te), np.nanmax(tct_te, axis=1)[:, None] * labels.FAILED_COST_FACTOR, tct_te)
te_df = te_df.assign(chosen=[cands[c] for c in policies[model_key]],
                     model_tct_s=priced[np.arange(len(test_idx)), policies[model_key]],
                     oracle_tct_s=labels.oracle_cost(tct_te), oracle=[cands[c] for c in labels.oracle(tct_te)])
path_cols = [c for c in ["link_kind", "rtt_ms", "mbps", "downlink_trace", "loss_downlink", "queue_bdp"] if c in te_df]
by_path = te_df.groupby("path_id").agg(
    **{c: (c, "first") for c in path_cols},
    sizes=("file_bytes", lambda v: ",".join(str(int(b)) for b in sorted(v))),
    chosen=("chosen", lambda v: ",".join(v)), oracle=("oracle", lambda v: ",".join(v)),
    model_tct_s=("model_tct_s", "sum"), oracle_tct_s=("oracle_tct_s", "sum"))
by_path["regret"] = by_path["model_tct_s"] / by_path["oracle_tct_s"] - 1
by_path = by_path.sort_values("regret", ascending=False)
worst_path = by_path.iloc[0]
print(f"worst held-out path {by_path.index[0]}: regret {worst_path['regret']:.1%} "
      f"({worst_path['model_tct_s']:.2f} s against the oracle's {worst_path['oracle_tct_s']:.2f} s)")
by_path.head(10)

# %%
fig, ax = plt.subplots(figsize=(7, 4))
for name, pick in policies.items():
    rel = np.sort(cost_all[test_idx][np.arange(len(test_idx)), pick])
    ax.step(rel, np.arange(1, len(rel) + 1) / len(rel), where="post", label=name)
ax.set_xscale("symlog", linthresh=0.01)
ax.set_xlabel("relative regret (TCT / oracle TCT - 1)")
ax.set_ylabel("share of held-out transfers")
ax.set_title("Regret on held-out paths")
ax.legend(fontsize=7)
fig.tight_layout()
fig.savefig(out / f"{model_name}.regret.png", dpi=100)

# %%
chosen = policies[model_key]
cm = confusion_matrix(labels.oracle(tct_te), chosen, labels=range(len(cands)))
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
im = axes[0].imshow(cm, cmap="Blues")
axes[0].set_xticks(range(len(cands)), cands, rotation=45)
axes[0].set_yticks(range(len(cands)), cands)
axes[0].set_xlabel("chosen")
axes[0].set_ylabel("oracle")
axes[0].set_title("Held-out confusion (rows)")
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
# The model file is checked against scikit-learn through the format's reference evaluator
# (`export.predict_proba_dict`) on every golden vector before anything is written.

# %%
classes = [cands[c] for c in model.classes_]
provenance = {
    "dataset": os.path.basename(dataset),
    "dataset_rows": int(len(df)),
    "dataset_paths": int(df["path_id"].nunique()),
    "strategy": f"{best['kind']}/{best['strategy']}, handover margin {best['handover_margin']:g}",
    "train_paths": len(train_paths),
    "seed": seed,
    "held_out_mean_regret": float(held_out.loc[model_key, "mean_regret"]),
    "notebook": "learner/notebooks/train_selector.py",
}
model_doc = export.model_to_dict(model, name=model_name, features=features, classes=classes,
                                 window=window, decide=decide, provenance=provenance)
golden_x = export.golden_vectors(model_doc, x_all, n=golden_rows, seed=seed)
ours = export.predict_proba_dict(model_doc, golden_x)
theirs = model.predict_proba(golden_x)
assert np.array_equal(ours, theirs), f"model file disagrees with sklearn: max |dp| {np.abs(ours - theirs).max()}"
assert export.predict_dict(model_doc, golden_x) == [cands[c] for c in model.predict(golden_x)]
model_path = export.write_model(model_doc, out / f"{model_name}.json")
golden_path = export.write_golden(model, model_doc, golden_x, out / f"{model_name}.golden.csv")
assert export.read_model(model_path) == json.loads(json.dumps(model_doc))
print(f"wrote {model_path} ({len(model_doc['trees'])} tree(s)) and {golden_path} ({len(golden_x)} rows)")

# %% [markdown]
# ## Export: the policy that runs the model
# `kernel:policy:learner/models/NAME.policy.toml` in a scenario, or `ccswitch-agent --policy`.
# Its window and minimum samples are the model's (the agent refuses any other).

# %%
model_policy_text = "\n".join([
    f"# Runs {model_name}.json, written by learner/notebooks/train_selector.py; regenerate it rather than edit it.",
    f'name = "{model_name}"',
    f'description = "{provenance["strategy"]} trained on {provenance["dataset"]} ({provenance["dataset_paths"]} paths)"',
    f'initial = "{initial}"',
    f'model = "{model_name}.json"',
    "",
    "[window]",
    f'kind = "{window["kind"]}"',
    f'samples = {int(window["samples"])}',
    "",
    "[decide]",
    "spatial = true",
    "temporal = false",
    f'min_samples = {int(decide["min_samples"])}',
    "",
    "[hysteresis]",
    *[f"{k} = {int(v)}" for k, v in hysteresis.items()],
    "",
])
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
    window=window, decide=decide, hysteresis=hysteresis, max_depth=rules_depth,
    description=f"depth-{rules_tree.get_depth()} tree ({rules_strategy}) trained on {os.path.basename(dataset)}",
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
    "dataset": provenance["dataset"],
    "synthetic": ds.synthetic,
    "candidates": cands,
    "chosen": provenance["strategy"],
    "cv": cv.to_dict(orient="records"),
    "held_out": held_out.reset_index(names="policy").to_dict(orient="records"),
    "worst_held_out_paths": by_path.head(5).reset_index().to_dict(orient="records"),
    "confusion": {"labels": cands, "rows_oracle_cols_chosen": cm.tolist()},
    "importance": importance.to_dict(),
    "golden_rows": int(len(golden_x)),
    "rules_agree_with_tree": int(len(rules_x)),
}
(out / f"{model_name}.report.json").write_text(json.dumps(report, indent=1) + "\n")
held_out[["mean_cost", "mean_regret", "total_regret"]]
