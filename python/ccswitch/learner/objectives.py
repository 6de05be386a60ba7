"""What a choice of algorithm costs, for the objective an operator names.

A selector is trained, judged and exported for one *objective*: a rule that turns a
candidate's measured figures on a path (dataset columns, learner/README.md) into one positive
number, its **cost**, lower being better. Labels (`labels.cost_matrix`), training, evaluation
and the model file's per-node costs all start from this cost, so every objective is learned
and reported alike: the *oracle* of a row is its cheapest candidate, and a choice's *regret*
is `cost / oracle_cost - 1`.

An objective is written `NAME` or `NAME:KEY=VALUE,...` (the Rust agent reads the same
grammar): the text up to the first `:` is the name; after it, assignments separated by `,`,
each `KEY=VALUE` with spaces around either side ignored and empty assignments skipped, a later
assignment of a key replacing an earlier one; every value a finite decimal number. The
built-ins, with `tct` = `tct_<alg>` (median transfer completion time, s), `thr` = `thr_<alg>`
(throughput, Mbit/s), `dp95` = `dp95_<alg>` (95th percentile one-way delay, ms) and `harm` =
`harm_<alg>` (in [0, 1]):

- `tct`: cost = tct. The least transfer time (the default, and what the learner always did).
- `power`: Kleinrock's power, throughput / delay, as large as possible:
  cost = 1 / power = dp95 / thr.
- `tct_delay_budget` (`budget_ms` > 0, default 100): cost = tct when dp95 <= budget_ms, else
  `MISS_FACTOR` x tct (a *miss*). Among misses the faster still ranks first, and a choice within
  the budget beats a miss unless the miss is more than `MISS_FACTOR` times faster. Evaluations
  report the miss rate (`miss_matrix`).
- `harm`: cost = tct x (1 + harm), where harm is what the flow does to a competing flow's
  throughput (Ware et al., HotNets 2019; `ccswitch.experiments.measurements.harm`, higher is
  better): (x - y) / x clipped at 0, x the competitor's throughput when the flow under test
  ran the competitor's own algorithm, y when it ran this candidate. A row whose path has no
  competitor (`has_competitor` false or absent) has harm 0.
- `weighted` (weights `tct`, `power`, `harm`, `delay_p95`, each >= 0, absent = 0, not all 0):
  cost = tct^a x (dp95 / thr)^b x (1 + harm)^c x dp95^d for weights a, b, c, d. A weighted
  geometric form: a choice's cost ratio to the oracle is the product of its ratios in each
  term raised to the term's weight, so relative regrets compose whatever the units. A term
  of weight 0 is left out (its metric need not be measured).

A candidate has no cost (NaN) on a row where it never finished (`tct` NaN) or where a metric
its objective needs was not measured (no probe, an old cell, no competitor reference; a
throughput or delay <= 0 counts as not measured); training prices such a choice as a failure
(`labels.FAILED_COST_FACTOR`).

`canonical(spec)` is the one spelling of an objective: its name, then its parameters with
defaults filled, sorted by key, each number as Python's `repr(float)` without a trailing `.0`
(100.0 -> `100`, 0.5 -> `0.5`), zero weights of `weighted` left out: `tct`,
`tct_delay_budget:budget_ms=100`, `weighted:harm=1,tct=1`. The model file and the policy
name their objective this way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Union

import numpy as np

from .labels import DP95_PREFIX, HARM_PREFIX, TCT_PREFIX, THR_PREFIX, metric_matrix, tct_matrix

#: A choice over the delay budget costs this multiple of its TCT.
MISS_FACTOR = 4.0

#: The delay budget of `tct_delay_budget` when none is given, ms.
DEFAULT_BUDGET_MS = 100.0

#: The built-in objectives, in the order error messages list them.
BUILTINS = ("tct", "power", "tct_delay_budget", "harm", "weighted")

#: Each built-in's parameters and their defaults.
PARAMETERS: Dict[str, Dict[str, float]] = {
    "tct": {},
    "power": {},
    "tct_delay_budget": {"budget_ms": DEFAULT_BUDGET_MS},
    "harm": {},
    "weighted": {"tct": 0.0, "power": 0.0, "harm": 0.0, "delay_p95": 0.0},
}

#: The path column that says whether a row's path has a competing flow.
HAS_COMPETITOR = "has_competitor"


class ObjectiveError(ValueError):
    """An objective spec that names no built-in or gives it bad parameters."""


def format_number(x: float) -> str:
    """A number as the canonical form writes it: `repr(float)` without a trailing `.0`."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


@dataclass(frozen=True)
class Objective:
    """A parsed objective: its name and every parameter (defaults filled)."""

    name: str
    params: Mapping[str, float]

    @property
    def canonical(self) -> str:
        shown = {k: v for k, v in self.params.items() if not (self.name == "weighted" and v == 0)}
        if not shown:
            return self.name
        return self.name + ":" + ",".join(f"{k}={format_number(shown[k])}" for k in sorted(shown))

    def __str__(self) -> str:
        return self.canonical

    def __hash__(self) -> int:
        return hash(self.canonical)

    @property
    def prefixes(self) -> tuple:
        """The column families (besides `tct_`) this objective reads."""
        p = self.params
        if self.name == "power":
            return (THR_PREFIX, DP95_PREFIX)
        if self.name == "tct_delay_budget":
            return (DP95_PREFIX,)
        if self.name == "harm":
            return (HARM_PREFIX,)
        if self.name == "weighted":
            need = []
            if p["power"] > 0:
                need += [THR_PREFIX, DP95_PREFIX]
            if p["delay_p95"] > 0 and DP95_PREFIX not in need:
                need.append(DP95_PREFIX)
            if p["harm"] > 0:
                need.append(HARM_PREFIX)
            return tuple(need)
        return ()


def _number(name: str, key: str, text: str) -> float:
    # Python's float() also takes "1_000"; the agent's parser does not
    try:
        if "_" in text:
            raise ValueError
        value = float(text)
    except ValueError:
        raise ObjectiveError(f"{name}: {key} = {text!r} is not a number") from None
    if not math.isfinite(value):
        raise ObjectiveError(f"{name}: {key} = {text!r} is not a finite number")
    return value


def parse(spec: Union[str, Objective]) -> Objective:
    """An objective from its spec (see the module docstring); ObjectiveError says what is wrong."""
    if isinstance(spec, Objective):
        return spec
    if not isinstance(spec, str):
        raise ObjectiveError(f"an objective is a string NAME or NAME:KEY=VALUE,..., got {spec!r}")
    name, _, assignments = spec.partition(":")
    if name not in PARAMETERS:
        raise ObjectiveError(f"unknown objective {name!r}: the built-ins are {', '.join(BUILTINS)}")
    params = dict(PARAMETERS[name])
    for assignment in (a.strip() for a in assignments.split(",")):
        if not assignment:
            continue
        key, eq, text = assignment.partition("=")
        key, text = key.strip(), text.strip()
        if not eq:
            raise ObjectiveError(f"{name}: {assignment!r} is not KEY=VALUE")
        if key not in params:
            if not params:
                raise ObjectiveError(f"{name}: unknown parameter {key!r} ({name} takes no parameters)")
            what = "weight" if name == "weighted" else "parameter"
            raise ObjectiveError(f"{name}: unknown {what} {key!r} (the {what}s are {', '.join(sorted(params))})")
        params[key] = _number(name, key, text)
    if name == "tct_delay_budget" and params["budget_ms"] <= 0:
        raise ObjectiveError(f"tct_delay_budget: budget_ms = {format_number(params['budget_ms'])} must be > 0")
    if name == "weighted":
        for key in sorted(params):
            if params[key] < 0:
                raise ObjectiveError(f"weighted: weight {key} = {format_number(params[key])} is negative; "
                                     "weights must be >= 0")
        if all(v == 0 for v in params.values()):
            raise ObjectiveError("weighted: every weight is 0; give at least one weight > 0")
        params = {k: v + 0.0 for k, v in params.items()}  # -0.0 is 0
    return Objective(name, params)


def canonical(spec: Union[str, Objective]) -> str:
    """The one spelling of an objective (module docstring); raises ObjectiveError for a bad spec."""
    return parse(spec).canonical


# ---- costs ----------------------------------------------------------------------------------


def _require(table, candidates: Sequence[str], prefixes, objective: Objective) -> None:
    missing = sorted({p for p in prefixes for c in candidates if p + c not in table})
    if missing:
        raise ValueError(f"objective {objective.canonical} needs the {', '.join(m + '<alg>' for m in missing)} "
                         f"column(s) for every candidate, which the table lacks (a dataset built before "
                         "`ccswitch dataset` wrote them, or from cells without the probe's figures)")


def _measured(m: np.ndarray) -> np.ndarray:
    """A throughput or delay matrix with values <= 0 (no finished transfer has them: the probe
    saw nothing) as not measured."""
    with np.errstate(invalid="ignore"):
        return np.where(m > 0, m, np.nan)


def _harm(table, candidates: Sequence[str]) -> np.ndarray:
    """Harm per row and candidate: the `harm_` column, 0 on rows without a competitor, NaN on
    rows with one whose harm is unknown."""
    n = len(table[TCT_PREFIX + candidates[0]])
    competing = (np.asarray(table[HAS_COMPETITOR], dtype=object) if HAS_COMPETITOR in table
                 else np.zeros(n, dtype=object))
    competing = np.array([bool(v) and v == v for v in competing.tolist()])  # None / NaN: no competitor
    if all(HARM_PREFIX + c in table for c in candidates):
        harm = metric_matrix(table, candidates, HARM_PREFIX)
    else:
        if competing.any():
            _require(table, candidates, (HARM_PREFIX,), parse("harm"))
        harm = np.full((n, len(candidates)), np.nan)
    if np.any(harm[~np.isnan(harm)] < 0) or np.any(harm[~np.isnan(harm)] > 1):
        raise ValueError(f"{HARM_PREFIX}<alg> holds a harm outside [0, 1]")
    return np.where(competing[:, None], harm, 0.0)


def cost_matrix(table, candidates: Sequence[str], objective: Union[str, Objective] = "tct") -> np.ndarray:
    """The objective's cost of every candidate on every row: a (rows, candidates) float array,
    NaN where a candidate has no cost (never finished, or a metric it needs is missing).

    `table` is anything indexable by column name that yields a sequence (a pandas DataFrame, a
    dict of lists or arrays) with `tct_<alg>` for every candidate (column names, as
    `labels.candidate_columns` gives them) and the families the objective reads."""
    obj = parse(objective)
    tct = tct_matrix(table, candidates)
    need = [p for p in obj.prefixes if p != HARM_PREFIX]
    _require(table, candidates, need, obj)
    thr = _measured(metric_matrix(table, candidates, THR_PREFIX)) if THR_PREFIX in need else None
    dp95 = _measured(metric_matrix(table, candidates, DP95_PREFIX)) if DP95_PREFIX in need else None
    harm = _harm(table, candidates) if HARM_PREFIX in obj.prefixes else None
    p = obj.params
    if obj.name == "tct":
        cost = tct
    elif obj.name == "power":
        cost = dp95 / thr
    elif obj.name == "tct_delay_budget":
        cost = np.where(dp95 <= p["budget_ms"], tct, MISS_FACTOR * tct)
        cost = np.where(np.isnan(dp95), np.nan, cost)
    elif obj.name == "harm":
        cost = tct * (1.0 + harm)
    else:  # weighted
        cost = np.ones_like(tct)
        if p["tct"] > 0:
            cost = cost * tct ** p["tct"]
        if p["power"] > 0:
            cost = cost * (dp95 / thr) ** p["power"]
        if p["harm"] > 0:
            cost = cost * (1.0 + harm) ** p["harm"]
        if p["delay_p95"] > 0:
            cost = cost * dp95 ** p["delay_p95"]
    # a candidate that never finished has no cost under any objective
    return np.where(np.isnan(tct), np.nan, cost)


def miss_matrix(table, candidates: Sequence[str], objective: Union[str, Objective]) -> Optional[np.ndarray]:
    """For `tct_delay_budget`: 1.0 where a candidate's delay p95 exceeds the budget, 0.0 where
    it keeps it, NaN where it has no cost. None for every other objective."""
    obj = parse(objective)
    if obj.name != "tct_delay_budget":
        return None
    cost = cost_matrix(table, candidates, obj)
    dp95 = _measured(metric_matrix(table, candidates, DP95_PREFIX))
    return np.where(np.isnan(cost), np.nan, (dp95 > obj.params["budget_ms"]).astype(float))
