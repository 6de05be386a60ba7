"""What a choice costs: the oracle, regret and cost-sensitive training labels for a dataset.

A dataset row (learner/README.md) is one transfer observed under the policy's `initial`
algorithm, with the features at its first decision and, per candidate, its figures on the same
path and file size: `tct_<alg>` (median transfer completion time, TCT), `thr_<alg>`
(throughput), `dp95_<alg>` (delay p95), `harm_<alg>` (harm to a competing flow). The operator's
objective (`objectives.py`) turns them into a **cost** per row and candidate, lower being better
(`objectives.cost_matrix`; the default objective `tct` is the TCT itself). The *oracle* of a
row is its cheapest candidate (the first such one, in candidate order), and the *regret* of a
choice is how much more it costs than the oracle's:

    regret[i, j] = cost[i, j] / cost[i, oracle(i)] - 1        (relative: 0.25 = 25 % worse)

A candidate without a cost on a row (every repetition failed, or a metric the objective needs
was not measured) cannot be judged. For training it costs `FAILED_COST_FACTOR` times the row's
highest finite cost (`priced`), so the learner avoids it without one failure dominating every
other signal; evaluation counts such choices separately (`failed`). Rows on which no candidate
has a cost have no oracle and are dropped by `usable_rows`.

The aim of a selector is the least cost, not the most correct oracle labels: confusing two
candidates whose costs differ by 1 % costs nothing, while choosing a loss-based algorithm on a
lossy long path costs several times the transfer. `regret_weights` and `expand_by_cost` turn
the regret matrix into training data for an ordinary scikit-learn classifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

#: Prefixes of the dataset's column families, declared here once (`dataset.py` writes them,
#: `objectives.py` reads them). No other column starts with one of them.
TCT_PREFIX = "tct_"
RUNS_PREFIX = "n_"
FEATURE_PREFIX = "f_"
THR_PREFIX = "thr_"
DP95_PREFIX = "dp95_"
HARM_PREFIX = "harm_"

#: For training, a candidate without a cost costs this multiple of the row's highest cost.
FAILED_COST_FACTOR = 2.0


def candidate_columns(columns: Sequence[str]) -> List[str]:
    """The candidates named by a table's `tct_<alg>` columns, in the table's order."""
    return [c[len(TCT_PREFIX):] for c in columns if c.startswith(TCT_PREFIX)]


def feature_columns(columns: Sequence[str]) -> List[str]:
    """The feature names of a table's `f_<name>` columns, in the table's order."""
    return [c[len(FEATURE_PREFIX):] for c in columns if c.startswith(FEATURE_PREFIX)]


def metric_matrix(table, candidates: Sequence[str], prefix: str) -> np.ndarray:
    """An (rows, candidates) float array of the `<prefix><alg>` columns, NaN where null.

    `table` is anything indexable by column name that yields a sequence (a pandas DataFrame,
    a dict of lists or arrays)."""
    if not candidates:
        raise ValueError("no candidates: the table needs at least one tct_<alg> column")
    return np.column_stack([np.asarray(table[prefix + alg], dtype=float) for alg in candidates])


def tct_matrix(table, candidates: Sequence[str]) -> np.ndarray:
    """An (rows, candidates) float array of TCTs in seconds, NaN where a candidate has none."""
    tct = metric_matrix(table, candidates, TCT_PREFIX)
    for j, alg in enumerate(candidates):
        col = tct[:, j]
        if np.any(col[~np.isnan(col)] <= 0):
            raise ValueError(f"{TCT_PREFIX}{alg} holds a TCT <= 0 s, which no transfer takes")
    return tct


def usable_rows(cost: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows on which at least one candidate has a cost (they have an oracle)."""
    return ~np.all(np.isnan(cost), axis=1)


def oracle(cost: np.ndarray) -> np.ndarray:
    """Index of the cheapest candidate of each row (the first one on ties).

    Every row must have at least one candidate with a cost (see `usable_rows`)."""
    _require_usable(cost)
    return np.argmin(np.where(np.isnan(cost), np.inf, cost), axis=1)


def oracle_cost(cost: np.ndarray) -> np.ndarray:
    """The least cost of each row."""
    _require_usable(cost)
    return np.nanmin(cost, axis=1)


def priced(cost: np.ndarray, failed_factor: float = FAILED_COST_FACTOR) -> np.ndarray:
    """The cost matrix with every missing cost priced as a failure: `failed_factor` times the
    row's highest cost."""
    if failed_factor < 1:
        raise ValueError(f"failed_factor {failed_factor} < 1 would make a failure cheaper than finishing")
    _require_usable(cost)
    worst = np.nanmax(cost, axis=1)
    return np.where(np.isnan(cost), (failed_factor * worst)[:, None], cost)


def cost_matrix(cost: np.ndarray, failed_factor: float = FAILED_COST_FACTOR) -> np.ndarray:
    """Relative regret of every choice on every row, failures priced by `failed_factor`.

    `cost` is an objective's cost matrix (`objectives.cost_matrix`; a TCT matrix for the
    default objective). 0 for the oracle, `cost / oracle_cost - 1` for a candidate with a
    cost, and for one without `failed_factor * highest_cost / oracle_cost - 1`."""
    return priced(cost, failed_factor) / oracle_cost(cost)[:, None] - 1.0


def regret_weights(cost: np.ndarray, how: str = "mean") -> np.ndarray:
    """A sample weight per row for training on oracle labels: what a wrong choice costs there.

    `how` = "mean" (the average regret of the other candidates) or "max" (of the worst).
    A row where every candidate is as good as the oracle weighs nothing and teaches nothing;
    a small floor keeps every row in play so the tree's class counts stay meaningful."""
    k = cost.shape[1]
    if k < 2:
        raise ValueError("regret weights need at least two candidates")
    if how == "mean":
        w = cost.sum(axis=1) / (k - 1)  # the oracle's own cost is 0
    elif how == "max":
        w = cost.max(axis=1)
    else:
        raise ValueError(f"how = {how!r}: must be 'mean' or 'max'")
    floor = 1e-3 * max(float(np.mean(w)), 1e-9)
    return np.maximum(w, floor)


def with_handover_margin(cost: np.ndarray, initial_index: Optional[int], margin: float) -> np.ndarray:
    """The cost matrix with `margin` added to every candidate but the initial one.

    A deployed selector leaves the initial algorithm only mid-flow, after its decision window,
    so a candidate never earns the whole of its measured advantage, and single measurements
    differ by a few percent from run to run. Training on this matrix makes a model leave the
    initial algorithm only where the measured gain exceeds `margin` (relative cost)."""
    if margin < 0:
        raise ValueError(f"handover margin {margin} < 0 would reward leaving the initial algorithm")
    if margin == 0:
        return cost
    if initial_index is None:
        raise ValueError("a handover margin needs the initial algorithm among the candidates")
    shifted = cost + margin
    shifted[:, initial_index] = cost[:, initial_index]
    return shifted


def expand_by_cost(x: np.ndarray, cost: np.ndarray):
    """One training example per (row, candidate): label `j`, weight `worst_i - cost[i, j]`.

    With these weights the weighted class mass in any tree leaf is, for each candidate, the sum
    over the leaf's rows of (that row's worst regret minus the candidate's regret), so the
    leaf's majority class is exactly the candidate with the least total regret over the rows
    that reach it. Examples of weight 0 (the worst choice of a row) are dropped.

    Returns (x_expanded, label_index, weight)."""
    n, k = cost.shape
    worst = cost.max(axis=1, keepdims=True)
    w = (worst - cost).reshape(-1)
    xs = np.repeat(x, k, axis=0)
    ys = np.tile(np.arange(k), n)
    keep = w > 0
    return xs[keep], ys[keep], w[keep]


@dataclass
class Outcome:
    """How a sequence of choices did on a set of rows, in the objective's cost."""

    #: Mean cost over the rows (the `tct` objective: mean TCT, s); choices without a cost
    #: excluded (see `failed`).
    mean_cost: float
    #: Mean relative regret over the rows whose choice has a cost.
    mean_regret: float
    #: Total cost of the choices over the oracle's total, minus 1, on rows whose choice has a cost.
    total_regret: float
    #: 90th percentile of the relative regret.
    p90_regret: float
    #: Geometric mean over every row of chosen cost / oracle cost, a choice without a cost
    #: priced as in training (`priced`): the aggregate objectives are compared by.
    geomean_ratio: float
    #: Fraction of rows whose choice is an oracle (cost equal to the least).
    oracle_share: float
    #: Rows whose chosen candidate has no cost (never finished there, or unmeasured).
    failed: int
    rows: int
    #: `tct_delay_budget`: share of the rows whose choice has a cost on which it missed the
    #: delay budget; None for other objectives.
    miss_rate: Optional[float] = None

    def as_dict(self) -> Dict[str, float]:
        return dict(self.__dict__)


def evaluate(cost: np.ndarray, choice: np.ndarray, miss: Optional[np.ndarray] = None) -> Outcome:
    """Score one choice (a candidate index) per row against the rows' costs. `miss`
    (`objectives.miss_matrix`) adds the miss rate of a delay budget."""
    choice = np.asarray(choice, dtype=int)
    if choice.shape != (cost.shape[0],):
        raise ValueError(f"{choice.shape[0] if choice.ndim else 0} choices for {cost.shape[0]} rows")
    if cost.shape[0] == 0:
        raise ValueError("no rows to evaluate")
    rows = np.arange(cost.shape[0])
    best = oracle_cost(cost)
    chosen = cost[rows, choice]
    ok = ~np.isnan(chosen)
    geomean = float(np.exp(np.mean(np.log(priced(cost)[rows, choice] / best))))
    miss_rate = None
    if miss is not None:
        missed = miss[rows, choice][ok]
        missed = missed[~np.isnan(missed)]
        miss_rate = float(np.mean(missed)) if missed.size else float("nan")
    if not ok.any():
        nan = float("nan")
        return Outcome(nan, nan, nan, nan, geomean, 0.0, int((~ok).sum()), int(cost.shape[0]), miss_rate)
    rel = chosen[ok] / best[ok] - 1.0
    return Outcome(
        mean_cost=float(np.mean(chosen[ok])),
        mean_regret=float(np.mean(rel)),
        total_regret=float(np.sum(chosen[ok]) / np.sum(best[ok]) - 1.0),
        p90_regret=float(np.quantile(rel, 0.9)),
        geomean_ratio=geomean,
        oracle_share=float(np.sum(chosen[ok] == best[ok]) / cost.shape[0]),
        failed=int((~ok).sum()),
        rows=int(cost.shape[0]),
        miss_rate=miss_rate,
    )


def fixed_choices(cost: np.ndarray, candidates: Sequence[str], miss: Optional[np.ndarray] = None) -> Dict[str, Outcome]:
    """The outcome of running every row on one fixed candidate, for each candidate."""
    n = cost.shape[0]
    return {alg: evaluate(cost, np.full(n, j), miss) for j, alg in enumerate(candidates)}


def best_fixed(cost: np.ndarray) -> int:
    """The candidate with the least mean cost over the rows (missing costs priced as in
    training): the best constant choice, to be chosen on training rows and judged on others."""
    return int(np.argmin(priced(cost).mean(axis=0)))


def path_oracle(cost: np.ndarray, groups: Sequence) -> np.ndarray:
    """One choice per row: for each group (path), the one candidate with the least geometric
    mean of cost / oracle cost over the group's rows (missing costs priced as in training).
    What knowing the path, but not which of its transfers comes, would give."""
    groups = np.asarray(groups)
    log_ratio = np.log(priced(cost) / oracle_cost(cost)[:, None])
    out = np.empty(len(groups), dtype=int)
    for g in np.unique(groups):
        at = groups == g
        out[at] = int(np.argmin(log_ratio[at].sum(axis=0)))
    return out


def group_split(groups: Sequence, test_fraction: float, seed: int):
    """Split row indices into (train, test) by group: every row of a group lands on one side.

    Groups (the dataset's `path_id`) are shuffled with `seed` and the first ones, until at least
    `test_fraction` of the groups, form the test side. Both sides get at least one group."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction {test_fraction} must lie strictly between 0 and 1")
    groups = np.asarray(groups)
    unique = np.unique(groups)
    if len(unique) < 2:
        raise ValueError(f"{len(unique)} group(s): a split by path needs at least two paths")
    rng = np.random.default_rng(seed)
    order = rng.permutation(unique)
    n_test = min(max(1, int(round(test_fraction * len(unique)))), len(unique) - 1)
    test_groups = set(order[:n_test].tolist())
    is_test = np.array([g in test_groups for g in groups.tolist()])
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def _require_usable(cost: np.ndarray) -> None:
    bad = ~usable_rows(cost)
    if bad.any():
        raise ValueError(f"{int(bad.sum())} row(s) have no finished candidate with a cost (filter with usable_rows)")


def decided_choice(model_choice: np.ndarray, decided: np.ndarray, initial_index: Optional[int]) -> np.ndarray:
    """The choices a deployed selector makes: the model's where it decides, else `initial`.

    A flow that ends before the selector's first decision (`decision_at_s` null in the dataset)
    runs on the initial algorithm throughout, whatever the model would have said."""
    model_choice = np.asarray(model_choice, dtype=int)
    decided = np.asarray(decided, dtype=bool)
    if initial_index is None:
        if not decided.all():
            raise ValueError("rows without a decision need the initial algorithm among the candidates")
        return model_choice
    return np.where(decided, model_choice, initial_index)
