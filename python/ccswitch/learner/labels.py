"""What a choice costs: the oracle, regret and cost-sensitive training labels for a dataset.

A dataset row (learner/README.md) is one transfer observed under the policy's `initial`
algorithm, with the features at its first decision and, in `tct_<alg>`, the median transfer
completion time (TCT) of every candidate on the same path and file size. Choosing candidate
`j` for row `i` therefore costs `tct[i, j]`; the *oracle* is the candidate with the least TCT
(the first such one, in candidate order), and the *regret* of a choice is how much longer it
takes than the oracle's:

    regret[i, j] = tct[i, j] / tct[i, oracle(i)] - 1        (relative: 0.25 = 25 % slower)

A candidate without a TCT on a row (every repetition failed) cannot be judged by time. For
training it costs as if it took `FAILED_TCT_FACTOR` times the row's slowest finished TCT,
so the learner avoids it without one failure dominating every other signal; evaluation
counts such choices separately (`failed`). Rows on which no candidate finished have no oracle
and are dropped by `usable_rows`.

The aim of a selector is the least TCT, not the most correct oracle labels: confusing two
candidates whose TCTs differ by 1 % costs nothing, while choosing a loss-based algorithm on a
lossy long path costs several times the transfer. `regret_weights` and `expand_by_cost` turn
the cost matrix into training data for an ordinary scikit-learn classifier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

import numpy as np

#: Prefixes of the dataset's column families.
TCT_PREFIX = "tct_"
RUNS_PREFIX = "n_"
FEATURE_PREFIX = "f_"

#: For training, a candidate that never finished costs this multiple of the row's slowest
#: finished TCT.
FAILED_TCT_FACTOR = 2.0


def candidate_columns(columns: Sequence[str]) -> List[str]:
    """The candidates named by a table's `tct_<alg>` columns, in the table's order."""
    return [c[len(TCT_PREFIX):] for c in columns if c.startswith(TCT_PREFIX)]


def feature_columns(columns: Sequence[str]) -> List[str]:
    """The feature names of a table's `f_<name>` columns, in the table's order."""
    return [c[len(FEATURE_PREFIX):] for c in columns if c.startswith(FEATURE_PREFIX)]


def tct_matrix(table, candidates: Sequence[str]) -> np.ndarray:
    """An (rows, candidates) float array of TCTs in seconds, NaN where a candidate has none.

    `table` is anything indexable by column name that yields a sequence (a pandas DataFrame,
    a dict of lists or arrays)."""
    if not candidates:
        raise ValueError("no candidates: the table needs at least one tct_<alg> column")
    cols = []
    for alg in candidates:
        col = np.asarray(table[TCT_PREFIX + alg], dtype=float)
        if np.any(col[~np.isnan(col)] <= 0):
            raise ValueError(f"{TCT_PREFIX}{alg} holds a TCT <= 0 s, which no transfer takes")
        cols.append(col)
    return np.column_stack(cols)


def usable_rows(tct: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows on which at least one candidate finished (they have an oracle)."""
    return ~np.all(np.isnan(tct), axis=1)


def oracle(tct: np.ndarray) -> np.ndarray:
    """Index of the fastest finished candidate of each row (the first one on ties).

    Every row must have at least one finished candidate (see `usable_rows`)."""
    _require_usable(tct)
    return np.argmin(np.where(np.isnan(tct), np.inf, tct), axis=1)


def oracle_tct(tct: np.ndarray) -> np.ndarray:
    """The least TCT of each row."""
    _require_usable(tct)
    return np.nanmin(tct, axis=1)


def cost_matrix(tct: np.ndarray, failed_factor: float = FAILED_TCT_FACTOR) -> np.ndarray:
    """Relative regret of every choice on every row, failures priced by `failed_factor`.

    0 for the oracle, `tct / oracle_tct - 1` for a finished candidate, and for one that never
    finished `failed_factor * slowest_finished / oracle_tct - 1`."""
    if failed_factor < 1:
        raise ValueError(f"failed_factor {failed_factor} < 1 would make a failure cheaper than finishing")
    best = oracle_tct(tct)
    slowest = np.nanmax(tct, axis=1)
    priced = np.where(np.isnan(tct), (failed_factor * slowest)[:, None], tct)
    return priced / best[:, None] - 1.0


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
    initial algorithm only where the measured gain exceeds `margin` (relative TCT)."""
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
    """How a sequence of choices did on a set of rows."""

    #: Mean TCT over the rows, seconds (failed choices excluded; see `failed`).
    mean_tct_s: float
    #: Mean relative regret over the rows with a finished choice.
    mean_regret: float
    #: Total TCT of the choices over total oracle TCT, minus 1, on rows with a finished choice.
    total_regret: float
    #: 90th percentile of the relative regret.
    p90_regret: float
    #: Fraction of rows whose choice is an oracle (TCT equal to the least).
    oracle_share: float
    #: Rows whose chosen candidate has no TCT (never finished there).
    failed: int
    rows: int

    def as_dict(self) -> Dict[str, float]:
        return dict(self.__dict__)


def evaluate(tct: np.ndarray, choice: np.ndarray) -> Outcome:
    """Score one choice (a candidate index) per row against the rows' TCTs."""
    choice = np.asarray(choice, dtype=int)
    if choice.shape != (tct.shape[0],):
        raise ValueError(f"{choice.shape[0] if choice.ndim else 0} choices for {tct.shape[0]} rows")
    if tct.shape[0] == 0:
        raise ValueError("no rows to evaluate")
    best = oracle_tct(tct)
    chosen = tct[np.arange(tct.shape[0]), choice]
    ok = ~np.isnan(chosen)
    if not ok.any():
        nan = float("nan")
        return Outcome(nan, nan, nan, nan, 0.0, int((~ok).sum()), int(tct.shape[0]))
    rel = chosen[ok] / best[ok] - 1.0
    return Outcome(
        mean_tct_s=float(np.mean(chosen[ok])),
        mean_regret=float(np.mean(rel)),
        total_regret=float(np.sum(chosen[ok]) / np.sum(best[ok]) - 1.0),
        p90_regret=float(np.quantile(rel, 0.9)),
        oracle_share=float(np.sum(chosen[ok] == best[ok]) / tct.shape[0]),
        failed=int((~ok).sum()),
        rows=int(tct.shape[0]),
    )


def fixed_choices(tct: np.ndarray, candidates: Sequence[str]) -> Dict[str, Outcome]:
    """The outcome of running every row on one fixed candidate, for each candidate."""
    n = tct.shape[0]
    return {alg: evaluate(tct, np.full(n, j)) for j, alg in enumerate(candidates)}


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


def _require_usable(tct: np.ndarray) -> None:
    bad = ~usable_rows(tct)
    if bad.any():
        raise ValueError(f"{int(bad.sum())} row(s) have no finished candidate (filter with usable_rows)")


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
