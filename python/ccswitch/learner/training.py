"""Training selectors that minimise an objective's cost: the strategies a notebook compares.

Every strategy learns from the same regret matrix (`labels.cost_matrix` of the objective's
costs, `objectives.cost_matrix`: the relative regret of each candidate on each row; the
default objective `tct` is the transfer time) and yields a scikit-learn classifier whose
classes are candidate indices, so any of them exports to the same model file:

- `oracle`:   the cheapest candidate as the label, every row alike (what accuracy rewards);
- `weighted`: the same labels, each row weighted by what a wrong choice costs there
              (`labels.regret_weights`), so paths where the choice matters steer the splits;
- `expanded`: one example per (row, candidate) weighted by how much better than the row's
              worst choice it is (`labels.expand_by_cost`); a leaf then predicts the candidate
              with the least total regret over its rows.

`regress` (one regressor of log(cost / oracle cost) per candidate, then the least prediction)
is a reference for how much a classifier leaves on the table, and `constant` (the one
candidate with the least mean regret on the training rows) for whether features help at all;
neither is exported as a model file.
Every strategy can train with a handover margin (`labels.with_handover_margin`): candidates other
than the initial algorithm cost that much more, so a model leaves the initial one only for a
gain larger than what a mid-flow handover and run-to-run noise eat; evaluation keeps the true
cost.
Model selection is by regret on held-out training paths (`cv_regret`, folds grouped by
`path_id`, drawn from the training rows only); a test set is never used to choose.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

from . import labels, objectives

STRATEGIES = ("oracle", "weighted", "expanded")
REFERENCE_STRATEGIES = ("regress", "constant")
KINDS = ("tree", "forest")

#: The Parquet schema-metadata key of the dataset's settings (written by `ccswitch dataset`): JSON
#: with "window" ({"kind", "samples", "min_samples"}), "initial", "candidates" (algorithm specs,
#: in `tct_*` column order), "features", "sources" and "scenarios" (each source's scenario or
#: sweep name).
DATASET_KEY = b"ccswitch.dataset"


@dataclass
class Dataset:
    """A dataset table with what training needs to know about it."""

    table: "object"  # pandas.DataFrame
    features: List[str]
    #: Candidates as their `tct_<name>` columns name them.
    candidates: List[str]
    #: The algorithm spec of each candidate (`cubic:beta=0.8` for column `tct_cubic_beta_0_8`).
    specs: List[str]
    #: The feature window and decision settings the features were computed with, if recorded.
    window: Optional[dict]
    decide: Optional[dict]
    #: The dataset's settings from its Parquet metadata (empty if it has none).
    settings: Dict
    #: The objective the rows are judged by (`objectives.parse`).
    objective: objectives.Objective = objectives.parse("tct")

    @property
    def x(self) -> np.ndarray:
        return self.table[["f_" + f for f in self.features]].to_numpy(dtype=np.float64)

    @property
    def tct(self) -> np.ndarray:
        return labels.tct_matrix(self.table, self.candidates)

    @property
    def cost(self) -> np.ndarray:
        """The objective's cost of every candidate on every row (NaN: no cost)."""
        return objectives.cost_matrix(self.table, self.candidates, self.objective)

    @property
    def miss(self) -> Optional[np.ndarray]:
        """`tct_delay_budget`'s budget misses per row and candidate (None for other objectives)."""
        return objectives.miss_matrix(self.table, self.candidates, self.objective)

    @property
    def synthetic(self) -> bool:
        return bool(self.settings.get("synthetic"))


def load_dataset(path, candidates: Optional[Sequence[str]] = None, features: Optional[Sequence[str]] = None,
                 objective="tct") -> Dataset:
    """Read a dataset (learner/README.md) and keep the rows on which some candidate has a cost
    under `objective` (a spec, `objectives.parse`).

    `candidates` (specs or column names) and `features` restrict the table's `tct_*` and `f_*`
    columns (default: all, in the table's order). A dataset whose metadata names a source held
    out for evaluation (a run of experiments/mystique-mix.toml or mcc-wifi.toml) is refused."""
    import pyarrow.parquet as pq

    from ..experiments.sweep_spec import dataset_column_name
    from .dataset import held_out_source

    objective = objectives.parse(objective)
    t = pq.read_table(str(path))
    raw = (t.schema.metadata or {}).get(DATASET_KEY)
    settings = json.loads(raw) if raw else {}
    sources = settings.get("sources") or []
    scenarios = settings.get("scenarios") or [None] * len(sources)
    for source, scenario in zip(sources, scenarios):
        held = held_out_source(source, scenario)
        if held:
            raise ValueError(f"{path}: built from {source}, a run of {held}, held out for evaluation: "
                             "training may not use it")
    df = t.to_pandas()
    have_c = labels.candidate_columns(df.columns)
    have_f = labels.feature_columns(df.columns)
    spec_of = {c: c for c in have_c}
    spec_of.update({dataset_column_name(s): s for s in settings.get("candidates", [])})
    column_of = {spec: col for col, spec in spec_of.items()}
    cands = [column_of.get(c, c) for c in candidates] if candidates else have_c
    feats = list(features) if features else have_f
    missing = [c for c in cands if c not in have_c] + [f"f_{f}" for f in feats if f not in have_f]
    if missing:
        raise ValueError(f"{path}: no column(s) for {missing}; the table has candidates {have_c} and features {have_f}")
    for col in ("path_id", "initial"):
        if col not in df.columns:
            raise ValueError(f"{path}: no {col!r} column")
    df = df[labels.usable_rows(objectives.cost_matrix(df, cands, objective))].reset_index(drop=True)
    bad = [f for f in feats if not np.isfinite(df["f_" + f].to_numpy(dtype=np.float64)).all()]
    if bad:
        # scikit-learn's trees would learn where missing values go, which the model file cannot say
        raise ValueError(f"{path}: features {bad} hold missing or infinite values")
    w = settings.get("window")
    window = {"kind": w["kind"], "samples": int(w["samples"])} if w else None
    decide = {"min_samples": int(w["min_samples"])} if w else None
    return Dataset(df, feats, cands, [spec_of[c] for c in cands], window, decide, settings, objective)


class CostRegressor:
    """Per-candidate random-forest regressors of log(cost / oracle cost); predicts the least."""

    def __init__(self, n_trees: int, max_depth: Optional[int], seed: int):
        self.n_trees, self.max_depth, self.seed = n_trees, max_depth, seed

    def fit(self, x: np.ndarray, cost: np.ndarray) -> "CostRegressor":
        from sklearn.ensemble import RandomForestRegressor

        self.models_ = [
            RandomForestRegressor(n_estimators=self.n_trees, max_depth=self.max_depth, random_state=self.seed + j)
            .fit(x, np.log1p(cost[:, j]))
            for j in range(cost.shape[1])
        ]
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.argmin(np.column_stack([m.predict(x) for m in self.models_]), axis=1)


class Constant:
    """Always the candidate with the least mean regret on the training rows."""

    def fit(self, x: np.ndarray, cost: np.ndarray) -> "Constant":
        self.choice_ = int(np.argmin(cost.mean(axis=0)))
        return self

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.full(len(x), self.choice_)


def fit(strategy: str, kind: str, x: np.ndarray, cost: np.ndarray, *, max_depth: Optional[int],
        n_trees: int = 50, min_samples_leaf: int = 1, seed: int = 0, handover_margin: float = 0.0,
        initial_index: Optional[int] = None):
    """Fit one strategy; the result's `predict` returns candidate indices (columns of `cost`)."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.tree import DecisionTreeClassifier

    cost = labels.with_handover_margin(cost, initial_index, handover_margin)
    if strategy == "constant":
        return Constant().fit(x, cost)
    if strategy == "regress":
        return CostRegressor(n_trees, max_depth, seed).fit(x, cost)
    if kind == "tree":
        model = DecisionTreeClassifier(max_depth=max_depth, min_samples_leaf=min_samples_leaf, random_state=seed)
    elif kind == "forest":
        model = RandomForestClassifier(n_estimators=n_trees, max_depth=max_depth,
                                       min_samples_leaf=min_samples_leaf, random_state=seed)
    else:
        raise ValueError(f"kind {kind!r}: must be one of {KINDS}")
    if strategy == "oracle":
        return model.fit(x, np.argmin(cost, axis=1))  # the first least regret: the oracle
    if strategy == "weighted":
        return model.fit(x, np.argmin(cost, axis=1), sample_weight=labels.regret_weights(cost))
    if strategy == "expanded":
        xe, ye, we = labels.expand_by_cost(x, cost)
        return model.fit(xe, ye, sample_weight=we)
    raise ValueError(f"strategy {strategy!r}: must be one of {STRATEGIES + REFERENCE_STRATEGIES}")


def group_folds(groups: Sequence, k: int, seed: int) -> List[np.ndarray]:
    """Row indices of `k` folds, each path (group) in exactly one fold."""
    groups = np.asarray(groups)
    unique = np.random.default_rng(seed).permutation(np.unique(groups))
    if len(unique) < k:
        raise ValueError(f"{len(unique)} paths cannot make {k} folds")
    fold_of = {g: i % k for i, g in enumerate(unique.tolist())}
    which = np.array([fold_of[g] for g in groups.tolist()])
    return [np.flatnonzero(which == i) for i in range(k)]


def cv_regret(strategy: str, kind: str, x: np.ndarray, cost: np.ndarray, groups: Sequence, *,
              folds: int = 3, seed: int = 0, repeats: int = 1, row_weights: Optional[np.ndarray] = None,
              geometric: bool = False, **fit_kw) -> float:
    """Regret of a strategy on held-out paths, over folds grouped by path (pass the training
    rows only: the folds are drawn among them).

    The folds are drawn `repeats` times (seeds `seed`, `seed + 1`, ...) and the regrets of all
    draws averaged: with a hundred paths one draw of folds decides more than the strategy does.
    Without `row_weights` the result is the mean relative regret per row; with each row's oracle
    cost as its weight it is the total regret (total cost over the oracle's, minus 1), the
    quantity a mean-TCT target judges. `geometric` averages log(1 + regret) instead and returns
    the geometric mean of chosen cost / oracle cost, minus 1 (the aggregate `labels.evaluate`
    reports as `geomean_ratio`)."""
    w = np.ones(len(cost)) if row_weights is None else np.asarray(row_weights, dtype=float)
    if w.shape != (len(cost),):
        raise ValueError(f"{w.shape[0] if w.ndim else 0} row weights for {len(cost)} rows")
    total = weight = 0.0
    for r in range(repeats):
        for i, test in enumerate(parts := group_folds(groups, folds, seed + r)):
            train = np.concatenate([p for j, p in enumerate(parts) if j != i])
            model = fit(strategy, kind, x[train], cost[train], seed=seed, **fit_kw)
            regret = cost[test, model.predict(x[test])]
            total += float(np.sum(w[test] * (np.log1p(regret) if geometric else regret)))
            weight += float(np.sum(w[test]))
    return float(np.expm1(total / weight)) if geometric else total / weight
