"""Export a trained selector: the model file the agent evaluates, golden data, a rules policy.

Three products, all from a scikit-learn `DecisionTreeClassifier` or a forest of them
(`RandomForestClassifier`, `ExtraTreesClassifier`):

- **The model file** (`model_to_dict` / `write_model`), format version 1 of learner/README.md:
  scikit-learn's `tree_` arrays, the classes (algorithm specs), the feature names in column
  order, the feature window and decision settings the model was trained on, the objective it
  was trained for (`objectives.canonical`), per node the mean regret of each class over the
  training rows that reach it (`node_costs`), and optionally what a handover costs.
  `predict_proba_dict` evaluates such a file with the documented semantics (each feature cast
  to f32, then compared as f64 with the threshold, `<=` going left; probabilities averaged over
  trees; the first maximum wins) so a file can be checked against the estimator it came from.
- **Golden data** (`golden_vectors`, `write_golden`): feature vectors with scikit-learn's own
  `predict` and `predict_proba`, for the agent's evaluator to reproduce. Beside dataset rows
  they hold random vectors over each feature's range and, for every threshold of the model,
  vectors whose feature sits exactly on it, on its f32 neighbours, and on the f64 values where
  the f32 cast changes sides: the places where an evaluator that forgets the cast, or casts
  the threshold instead, would disagree.
- **The policy that runs a model** (`model_policy`): the TOML the agent loads with
  `--policy`, naming the model file and its objective.
- **A rules policy** (`tree_to_policy`): a depth-limited tree written as the agent's rule
  language (README "Policy files"), one `[[rule]]` per leaf. The agent compares features as
  f64 without a cast, so each threshold `t` is written as the f64 boundary `b` with
  `x <= b  <=>  f32(x) <= t` for every f64 `x` (`rule_threshold`): the rules choose exactly
  what the tree predicts, on every input, not only away from the thresholds.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from . import objectives

FORMAT = "ccswitch-model"
VERSION = 1

#: The agent's feature names (`Features::NAMES`), the only names a model or a rule may use.
FEATURE_NAMES = (
    "min_rtt_ms", "mean_rtt_ms", "max_rtt_ms", "rtt_std_ms", "rtt_cov", "rtt_norm_range",
    "loss_rate", "delivery_rate_mbps", "max_delivery_rate_mbps", "bytes", "elapsed_s", "samples",
)

WINDOW_KINDS = ("first", "sliding")
_LEAF = -1
_F32_MAX = float(np.finfo(np.float32).max)


# ---- the model file ------------------------------------------------------------------------


def _trees(model) -> list:
    """The fitted decision trees of a tree classifier or a forest of them."""
    if hasattr(model, "estimators_"):
        trees = list(model.estimators_)
    elif hasattr(model, "tree_"):
        trees = [model]
    else:
        raise TypeError(f"{type(model).__name__} is neither a fitted decision tree nor a forest of them")
    for t in trees:
        if not hasattr(t, "tree_"):
            raise TypeError(f"{type(model).__name__} holds a {type(t).__name__}, not a decision tree")
        if t.tree_.n_outputs != 1:
            raise ValueError("only single-output classifiers can be exported")
    if not hasattr(model, "classes_") or np.ndim(model.classes_) != 1:
        raise TypeError(f"{type(model).__name__} is not a single-output classifier")
    return trees


def _check_settings(window: Mapping, decide: Mapping) -> None:
    if window.get("kind") not in WINDOW_KINDS:
        raise ValueError(f"window kind {window.get('kind')!r}: must be one of {WINDOW_KINDS}")
    samples = window.get("samples")
    if not isinstance(samples, int) or isinstance(samples, bool) or not 1 <= samples <= 10000:
        raise ValueError(f"window samples {samples!r}: must be a whole number from 1 to 10000")
    m = decide.get("min_samples")
    if not isinstance(m, int) or isinstance(m, bool) or not 1 <= m <= samples:
        raise ValueError(f"decide min_samples {m!r}: must be a whole number from 1 to the window's {samples}")


def _check_features(features: Sequence[str]) -> None:
    unknown = [f for f in features if f not in FEATURE_NAMES]
    if unknown:
        raise ValueError(f"unknown feature(s) {unknown}; the agent knows {list(FEATURE_NAMES)}")
    if len(set(features)) != len(features):
        raise ValueError(f"features repeat: {list(features)}")


def model_to_dict(
    model,
    *,
    name: str,
    features: Sequence[str],
    window: Mapping,
    decide: Mapping,
    classes: Optional[Sequence[str]] = None,
    provenance: Optional[Mapping] = None,
    objective: str = "tct",
    train_x: Optional[np.ndarray] = None,
    train_regret: Optional[np.ndarray] = None,
    handover_cost: Optional[Mapping] = None,
) -> dict:
    """The model file's content for a fitted tree classifier or forest.

    `features` names the model's columns in order. `classes` gives the algorithm spec of each
    of `model.classes_` (default: the classes themselves, which must then be strings).
    `objective` (a spec) is written in canonical form. With `train_x` (the training rows, one
    each, not expanded) and `train_regret` (their relative regret under the objective, one
    column per class in `model.classes_` order, failures priced as in `labels.cost_matrix`,
    without a handover margin), every tree gets `cost`: per node, each class's mean regret over
    the rows that reach it (`node_costs`). `handover_cost` ({"default": X, "pairs": {"a>b": Y}},
    relative cost, each pair two of `classes`) is written checked, `pairs` filled in if absent."""
    import sklearn

    trees = _trees(model)
    features = list(features)
    _check_features(features)
    if model.n_features_in_ != len(features):
        raise ValueError(f"the model has {model.n_features_in_} columns but {len(features)} feature names")
    if classes is None:
        classes = [str(c) for c in model.classes_]
        if any(not isinstance(c, str) for c in model.classes_):
            raise ValueError("the model's classes are not algorithm names: pass classes=")
    classes = list(classes)
    if len(classes) != len(model.classes_):
        raise ValueError(f"{len(classes)} class names for {len(model.classes_)} classes")
    if len(set(classes)) != len(classes):
        raise ValueError(f"classes repeat: {classes}")
    window = dict(window)
    decide = dict(decide)
    _check_settings(window, decide)
    objective = objectives.canonical(objective)
    if (train_x is None) != (train_regret is None):
        raise ValueError("pass train_x and train_regret together (the node costs need both)")
    if train_regret is not None:
        train_x = np.asarray(train_x, dtype=np.float64)
        train_regret = np.asarray(train_regret, dtype=np.float64)
        if train_regret.shape != (len(train_x), len(classes)):
            raise ValueError(f"train_regret has shape {train_regret.shape}; it needs one row per training row "
                             f"({len(train_x)}) and one column per class ({len(classes)})")
        if not np.isfinite(train_regret).all() or (train_regret < 0).any():
            raise ValueError("train_regret must be finite and >= 0 (price failures with labels.cost_matrix)")
    if handover_cost is not None:
        handover_cost = _handover_cost(handover_cost)
        strangers = [k for k in handover_cost["pairs"] if not set(k.split(">")) <= set(classes)]
        if strangers:
            raise ValueError(f"handover_cost.pairs: {strangers} name algorithms that are not classes of the model "
                             f"({', '.join(classes)}); the agent refuses them (leave them out)")

    out_trees = []
    for t in trees:
        tr = t.tree_
        value = np.asarray(tr.value[:, 0, :], dtype=float)
        if value.shape[1] != len(classes):
            raise ValueError(f"a tree has {value.shape[1]} classes, the model {len(classes)}")
        # scikit-learn >= 1.4 stores each node's class fractions, which predict_proba returns as
        # they are: exported unchanged (renormalising would move the last bit of some).
        if not np.allclose(value.sum(axis=1), 1.0, rtol=0, atol=1e-9):
            raise ValueError("tree_.value does not hold class fractions (scikit-learn older than 1.4?)")
        out = {
            "children_left": [int(v) for v in tr.children_left],
            "children_right": [int(v) for v in tr.children_right],
            "feature": [int(v) for v in tr.feature],
            "threshold": [float(v) for v in tr.threshold],
            "value": [[float(p) for p in row] for row in value],
        }
        if train_regret is not None:
            out["cost"] = [[float(c) for c in row] for row in node_costs(t, train_x, train_regret)]
        out_trees.append(out)
    prov = {"sklearn": sklearn.__version__, "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    prov.update(provenance or {})
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "kind": "tree" if len(trees) == 1 and hasattr(model, "tree_") else "forest",
        "name": name,
        "objective": objective,
        "features": features,
        "classes": classes,
        "window": window,
        "decide": decide,
        "trees": out_trees,
    }
    if handover_cost is not None:
        doc["handover_cost"] = handover_cost
    doc["provenance"] = prov
    return doc


def node_costs(tree, x: np.ndarray, regret: np.ndarray) -> np.ndarray:
    """(nodes, classes): for each node of a fitted decision tree, the mean of `regret` (one row
    per row of `x`, one column per class) over the rows of `x` that reach the node. A node no
    row reaches (a forest's tree grown on a bootstrap sample can have one) gets its parent's."""
    x = np.asarray(x, dtype=np.float64)
    regret = np.asarray(regret, dtype=np.float64)
    if len(x) == 0:
        raise ValueError("node costs need at least one training row")
    reach = tree.decision_path(x)  # sparse (rows, nodes): 1 where a row passes a node
    counts = np.asarray(reach.sum(axis=0)).ravel()
    sums = np.asarray(reach.T @ regret)
    tr = tree.tree_
    parent = np.full(tr.node_count, -1)
    for i in range(tr.node_count):
        if tr.children_left[i] != _LEAF:
            parent[tr.children_left[i]] = parent[tr.children_right[i]] = i
    out = np.empty((tr.node_count, regret.shape[1]))
    for i in range(tr.node_count):  # a parent comes before its children in scikit-learn's arrays
        out[i] = sums[i] / counts[i] if counts[i] else out[parent[i]]
    return out


def _number_at_least_0(v, where: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{where} = {v!r}: must be a finite number >= 0")
    return float(v)


def _handover_cost(h: Mapping) -> dict:
    """`{"default": X, "pairs": {"a>b": Y}}` checked: costs finite and >= 0, each pair key two
    algorithm specs joined by `>` (from `a` to `b`). `pairs` may be left out (written empty)."""
    if not isinstance(h, Mapping):
        raise ValueError(f'handover_cost: must be an object {{"default": X, "pairs": {{"a>b": Y}}}}, got {h!r}')
    unknown = sorted(set(h) - {"default", "pairs"})
    if unknown:
        raise ValueError(f"handover_cost: unknown key(s) {unknown}; the keys are default and pairs")
    if "default" not in h:
        raise ValueError("handover_cost: missing 'default'")
    pairs = h.get("pairs") or {}
    if not isinstance(pairs, Mapping):
        raise ValueError(f'handover_cost.pairs: must be an object {{"a>b": Y}}, got {pairs!r}')
    out_pairs = {}
    for key, v in pairs.items():
        a, sep, b = str(key).partition(">")
        if not sep or not a or not b or ">" in b or a == b:
            raise ValueError(f"handover_cost.pairs: key {key!r} must be FROM>TO, two different algorithms")
        out_pairs[str(key)] = _number_at_least_0(v, f"handover_cost.pairs[{key!r}]")
    return {"default": _number_at_least_0(h["default"], "handover_cost.default"), "pairs": out_pairs}


def check_model_dict(d: Mapping) -> None:
    """Raise ValueError naming every way `d` departs from format version 1."""
    problems: List[str] = []
    if d.get("format") != FORMAT:
        problems.append(f"format {d.get('format')!r}: must be {FORMAT!r}")
    if d.get("version") != VERSION:
        problems.append(f"version {d.get('version')!r}: this reader knows {VERSION}")
    for key in ("name", "features", "classes", "window", "decide", "trees"):
        if key not in d:
            problems.append(f"missing {key!r}")
    if problems:
        raise ValueError("; ".join(problems))
    for check, args in ((_check_features, (d["features"],)), (_check_settings, (d["window"], d["decide"]))):
        try:
            check(*args)
        except ValueError as e:
            problems.append(str(e))
    if "objective" in d:
        try:
            if objectives.canonical(d["objective"]) != d["objective"]:
                problems.append(f"objective {d['objective']!r}: not in canonical form "
                                f"({objectives.canonical(d['objective'])!r})")
        except objectives.ObjectiveError as e:
            problems.append(f"objective: {e}")
    if "handover_cost" in d:
        try:
            if _handover_cost(d["handover_cost"]) != d["handover_cost"]:
                problems.append("handover_cost: must hold both 'default' and 'pairs'")
        except ValueError as e:
            problems.append(str(e))
    nf, nc = len(d["features"]), len(d["classes"])
    if not d["trees"]:
        problems.append("no trees")
    for k, t in enumerate(d["trees"]):
        n = len(t["children_left"])
        if any(len(t[a]) != n for a in ("children_right", "feature", "threshold", "value") + (("cost",) if "cost" in t else ())):
            problems.append(f"tree {k}: arrays of different lengths")
            continue
        for i in range(n):
            if "cost" in t and (len(t["cost"][i]) != nc or not all(
                    isinstance(c, (int, float)) and math.isfinite(c) and c >= 0 for c in t["cost"][i])):
                problems.append(f"tree {k} node {i}: cost {t['cost'][i]} is not {nc} finite regrets >= 0")
            left, right = t["children_left"][i], t["children_right"][i]
            if len(t["value"][i]) != nc:
                problems.append(f"tree {k} node {i}: {len(t['value'][i])} probabilities for {nc} classes")
            elif abs(sum(t["value"][i]) - 1.0) > 1e-9 or min(t["value"][i]) < 0:
                problems.append(f"tree {k} node {i}: probabilities {t['value'][i]} do not sum to 1")
            if left == _LEAF:
                continue
            if not (i < left < n and i < right < n):
                problems.append(f"tree {k} node {i}: children {left}, {right} outside {i + 1}..{n - 1}")
            if not 0 <= t["feature"][i] < nf:
                problems.append(f"tree {k} node {i}: feature {t['feature'][i]} of {nf}")
            if not math.isfinite(t["threshold"][i]):
                problems.append(f"tree {k} node {i}: threshold {t['threshold'][i]} is not finite")
    if problems:
        raise ValueError("; ".join(problems[:20]) + (f"; and {len(problems) - 20} more" if len(problems) > 20 else ""))


def write_model(d: Mapping, path) -> Path:
    """Write a model file (checked first). Floats are written in shortest round-trip form, so
    reading the file gives back every threshold and probability bit for bit."""
    check_model_dict(d)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(d, indent=1, allow_nan=False) + "\n")
    return path


def read_model(path) -> dict:
    d = json.loads(Path(path).read_text())
    check_model_dict(d)
    return d


def predict_proba_dict(d: Mapping, x: np.ndarray) -> np.ndarray:
    """Class probabilities of a model file for the rows of `x` (columns in `d["features"]` order)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(d["features"]):
        raise ValueError(f"x has shape {x.shape}; the model takes {len(d['features'])} columns")
    x32 = x.astype(np.float32).astype(np.float64)  # sklearn's cast, then an f64 compare
    rows = np.arange(x.shape[0])
    total = np.zeros((x.shape[0], len(d["classes"])))
    for t in d["trees"]:
        left = np.asarray(t["children_left"])
        right = np.asarray(t["children_right"])
        feat = np.asarray(t["feature"])
        thr = np.asarray(t["threshold"], dtype=np.float64)
        node = np.zeros(x.shape[0], dtype=int)
        while True:
            inner = left[node] != _LEAF
            if not inner.any():
                break
            f = np.where(inner, feat[node], 0)
            go_left = x32[rows, f] <= thr[node]
            node = np.where(inner, np.where(go_left, left[node], right[node]), node)
        total += np.asarray(t["value"], dtype=np.float64)[node]
    return total / len(d["trees"])


def predict_dict(d: Mapping, x: np.ndarray) -> List[str]:
    """The class a model file predicts for each row of `x`: the first maximum probability."""
    p = predict_proba_dict(d, x)
    return [d["classes"][i] for i in np.argmax(p, axis=1)]


# ---- golden data ---------------------------------------------------------------------------


def thresholds_by_feature(d: Mapping) -> Dict[int, np.ndarray]:
    """The distinct thresholds of a model file, per feature column."""
    found: Dict[int, set] = {}
    for t in d["trees"]:
        for left, f, thr in zip(t["children_left"], t["feature"], t["threshold"]):
            if left != _LEAF:
                found.setdefault(int(f), set()).add(float(thr))
    return {f: np.array(sorted(v)) for f, v in found.items()}


def edge_values(threshold: float) -> List[float]:
    """Values of a feature where a threshold compare is most easily got wrong: the threshold,
    its f32 roundings and their f32 neighbours, and the f64 boundary of the f32 cast with its
    f64 neighbours (`rule_threshold`)."""
    t = float(threshold)
    t32 = np.float32(t)
    out = {t, float(t32)}
    for v in (np.nextafter(t32, np.float32(-np.inf)), np.nextafter(t32, np.float32(np.inf))):
        if np.isfinite(v):
            out.add(float(v))
    if abs(t) <= _F32_MAX:
        b = rule_threshold(t)
        out.update({b, math.nextafter(b, math.inf), math.nextafter(b, -math.inf)})
    out.update({math.nextafter(t, math.inf), math.nextafter(t, -math.inf)})
    return sorted(v for v in out if math.isfinite(v))


def golden_vectors(d: Mapping, data: Optional[np.ndarray], n: int = 10_000, seed: int = 0) -> np.ndarray:
    """At least `n` feature vectors for a model's golden data.

    Every row of `data` (dataset rows, possibly none); for every threshold, each of its
    `edge_values` set into a dataset row (or a random vector); then random vectors: each
    feature uniform over its observed range widened by 10 % (never below 0 where the data is
    never negative), with a tenth of the values drawn exactly from the thresholds."""
    rng = np.random.default_rng(seed)
    nf = len(d["features"])
    parts = []
    if data is not None and len(data):
        data = np.asarray(data, dtype=np.float64)
        if data.shape[1] != nf:
            raise ValueError(f"data has {data.shape[1]} columns; the model takes {nf}")
        parts.append(data)
    thresholds = thresholds_by_feature(d)

    lo = np.zeros(nf)
    hi = np.ones(nf)
    for f in range(nf):
        vals = list(thresholds.get(f, []))
        if data is not None and len(data):
            vals += [float(np.min(data[:, f])), float(np.max(data[:, f]))]
        if vals:
            a, b = min(vals), max(vals)
            span = (b - a) or max(abs(a), 1.0)
            lo[f], hi[f] = a - 0.1 * span, b + 0.1 * span
            if a >= 0:
                lo[f] = max(lo[f], 0.0)

    def base_rows(k: int) -> np.ndarray:
        if data is not None and len(data):
            return data[rng.integers(0, len(data), size=k)].copy()
        return rng.uniform(lo, hi, size=(k, nf))

    for f, ts in thresholds.items():
        edges = [e for t in ts for e in edge_values(t)]
        rows = base_rows(len(edges))
        rows[:, f] = edges
        parts.append(rows)
    done = sum(len(p) for p in parts)
    k = max(n - done, n // 4)
    rand = rng.uniform(lo, hi, size=(k, nf))
    for f, ts in thresholds.items():
        pick = rng.random(k) < 0.1
        rand[pick, f] = rng.choice(ts, size=int(pick.sum()))
    parts.append(rand)
    return np.vstack(parts)


def write_golden(model, d: Mapping, x: np.ndarray, path) -> Path:
    """Golden CSV: the feature columns, `label` (scikit-learn's `predict`), then
    `proba_<class>` (its `predict_proba`), one row per vector of `x`. Numbers are written in
    shortest round-trip form, so a reader parses back the exact f64 values."""
    x = np.asarray(x, dtype=np.float64)
    labels = model.predict(x)
    proba = model.predict_proba(x)
    index = {c: i for i, c in enumerate(model.classes_.tolist())}
    names = [d["classes"][index[c]] for c in labels.tolist()]
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(list(d["features"]) + ["label"] + [f"proba_{c}" for c in d["classes"]])
        for row, name, p in zip(x.tolist(), names, proba.tolist()):
            w.writerow([repr(v) for v in row] + [name] + [repr(v) for v in p])
    return path


def read_golden(path) -> Tuple[List[str], np.ndarray, List[str], List[str], np.ndarray]:
    """(feature names, vectors, labels, classes, probabilities) of a golden CSV."""
    with Path(path).open(newline="") as fh:
        rows = list(csv.reader(fh))
    header = rows[0]
    at = header.index("label")
    features, classes = header[:at], [h[len("proba_"):] for h in header[at + 1:]]
    body = rows[1:]
    x = np.array([[float(v) for v in r[:at]] for r in body])
    p = np.array([[float(v) for v in r[at + 1:]] for r in body])
    return features, x, [r[at] for r in body], classes, p


# ---- rules policy --------------------------------------------------------------------------


def rule_threshold(t: float) -> float:
    """The f64 `b` with `x <= b` exactly when `f32(x) <= t`, for every f64 `x`.

    The tree casts a feature to f32 before comparing it with its f64 threshold `t`; the agent's
    rules compare the f64 feature itself. Let `s` be the largest f32 not above `t`: f32(x) <= t
    holds when x rounds to `s` or below, i.e. up to the midpoint between `s` and the next f32,
    the midpoint itself included when round-half-to-even sends it to `s` (even significand)."""
    t = float(t)
    if not math.isfinite(t) or abs(t) > _F32_MAX:
        raise ValueError(f"threshold {t} lies outside the finite f32 range")
    with np.errstate(over="ignore"):  # near the largest f32, rounding up overflows by design
        return _rule_threshold(t)


def _rule_threshold(t: float) -> float:
    s = np.float32(t)
    if float(s) > t:
        s = np.nextafter(s, np.float32(-np.inf))
    up = np.nextafter(s, np.float32(np.inf))
    if np.isfinite(up):
        mid = (float(s) + float(up)) / 2.0  # exact: an f32 midpoint needs 25 significant bits
    else:  # s is the largest f32; rounding to infinity starts half an ulp above it
        mid = float(s) + (float(s) - float(np.nextafter(s, np.float32(-np.inf)))) / 2.0
    even = int(np.array(s, dtype=np.float32).view(np.uint32)) & 1 == 0
    b = mid if even else math.nextafter(mid, -math.inf)
    # the defining property, checked rather than trusted
    assert float(np.float32(b)) <= t and not float(np.float32(math.nextafter(b, math.inf))) <= t, (t, b)
    return b


@dataclass
class Rule:
    """One leaf of a tree as a rule: every condition holds for the rows that reach it."""

    use: str
    #: (feature name, "<=" or ">", f64 bound), tightest per feature and side.
    conditions: List[Tuple[str, str, float]] = field(default_factory=list)
    #: Training weight that reached the leaf(s) behind this rule.
    weight: float = 0.0
    #: The leaf's class probabilities.
    proba: Dict[str, float] = field(default_factory=dict)

    @property
    def when(self) -> str:
        return " and ".join(f"{f} {op} {v!r}" for f, op, v in self.conditions)


def tree_rules(tree, features: Sequence[str], classes: Sequence[str], max_depth: int = 6) -> Tuple[List[Rule], str]:
    """(rules, default) choosing exactly what `tree.predict` chooses.

    Subtrees whose leaves all predict one class are merged into one leaf; each remaining leaf
    becomes a rule whose conditions are its path's comparisons (written with `rule_threshold`,
    the tightest per feature and side); the class with the most leaves becomes the default and
    its leaves need no rule. Rules are ordered by the training weight that reached them."""
    if not hasattr(tree, "tree_") or hasattr(tree, "estimators_"):
        raise TypeError("a rules policy is written from a single decision tree, not a forest")
    tr = tree.tree_
    if tr.max_depth > max_depth:
        raise ValueError(f"the tree is {tr.max_depth} deep; a readable rules policy allows {max_depth} (refit with max_depth)")
    features = list(features)
    classes = list(classes)
    value = tr.value[:, 0, :]
    weight = tr.weighted_n_node_samples
    left, right = tr.children_left, tr.children_right

    def cls(i: int) -> int:
        return int(np.argmax(value[i]))  # first maximum, as predict

    def pure(i: int) -> Optional[int]:
        """The one class every leaf under node i predicts, or None."""
        if left[i] == _LEAF:
            return cls(i)
        a, b = pure(left[i]), pure(right[i])
        return a if a is not None and a == b else None

    leaves: List[Tuple[int, int, List[Tuple[int, str, float]]]] = []  # (node, class, path)

    def walk(i: int, path: List[Tuple[int, str, float]]) -> None:
        c = pure(i)
        if c is not None:
            leaves.append((i, c, path))
            return
        b = rule_threshold(tr.threshold[i])
        walk(left[i], path + [(int(tr.feature[i]), "<=", b)])
        walk(right[i], path + [(int(tr.feature[i]), ">", b)])

    walk(0, [])
    counts: Dict[int, Tuple[int, float]] = {}
    for node, c, _ in leaves:
        n, w = counts.get(c, (0, 0.0))
        counts[c] = (n + 1, w + float(weight[node]))
    default = max(counts, key=lambda c: (counts[c][0], counts[c][1], -c))

    rules = []
    for node, c, path in leaves:
        if c == default:
            continue
        tight: Dict[Tuple[int, str], float] = {}
        for f, op, b in path:
            key = (f, op)
            if key not in tight:
                tight[key] = b
            else:
                tight[key] = min(tight[key], b) if op == "<=" else max(tight[key], b)
        conds = [(features[f], op, b) for (f, op), b in sorted(tight.items(), key=lambda kv: (kv[0][0], kv[0][1] == ">"))]
        total = value[node].sum() or 1.0
        rules.append(Rule(
            use=classes[c],
            conditions=conds,
            weight=float(weight[node]),
            proba={classes[k]: float(value[node][k] / total) for k in range(len(classes))},
        ))
    rules.sort(key=lambda r: -r.weight)
    return rules, classes[default]


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=True)


def tree_to_policy(
    tree,
    *,
    name: str,
    features: Sequence[str],
    classes: Sequence[str],
    initial: str,
    window: Mapping,
    decide: Mapping,
    hysteresis: Mapping = {"min_dwell_ms": 3000, "agreeing": 1},
    provenance: Optional[Mapping] = None,
    max_depth: int = 6,
    description: Optional[str] = None,
    objective: str = "tct",
) -> str:
    """A rules policy (TOML text in the agent's rule language) that decides as `tree` predicts.

    `decide` takes `min_samples` and optionally `spatial`/`temporal`; the tree was trained on
    features at a flow's first decision, so the default is one decision per flow
    (spatial, not temporal). `objective` (the one the tree was trained for) is written in
    canonical form."""
    objective = objectives.canonical(objective)
    _check_features(list(features))
    window = dict(window)
    decide = {"spatial": True, "temporal": False, **dict(decide)}
    _check_settings(window, decide)
    rules, default = tree_rules(tree, features, classes, max_depth=max_depth)
    prov = dict(provenance or {})
    lines = [
        f"# {name}: a decision tree (depth {tree.tree_.max_depth}, {tree.tree_.n_leaves} leaves) written as rules",
        "# by ccswitch.learner.export.tree_to_policy; regenerate it rather than edit it.",
        "# Each rule is a leaf of the tree (leaves of the default's class need none). A bound is",
        "# the f64 edge of the tree's f32 compare (`x <= b` exactly when f32(x) <= the tree's",
        "# threshold), so these rules choose what the tree predicts on every input.",
    ]
    for k, v in prov.items():
        lines.append(f"# {k}: {v}")
    lines += [
        f"name = {_toml_str(name)}",
        f"description = {_toml_str(description or f'decision tree {name} as rules')}",
        f"initial = {_toml_str(initial)}",
        f"objective = {_toml_str(objective)}",
    ]
    if rules:
        lines.append(f"default = {_toml_str(default)}")
    lines += [
        "",
        "[window]",
        f"kind = {_toml_str(window['kind'])}",
        f"samples = {window['samples']}",
        "",
        "[decide]",
        f"spatial = {str(bool(decide['spatial'])).lower()}",
        f"temporal = {str(bool(decide['temporal'])).lower()}",
        f"min_samples = {decide['min_samples']}",
        "",
        "[hysteresis]",
        f"min_dwell_ms = {int(hysteresis['min_dwell_ms'])}",
        f"agreeing = {int(hysteresis['agreeing'])}",
    ]
    if not rules:
        lines += ["", "# every leaf predicts the same algorithm", "[[rule]]", f"use = {_toml_str(default)}"]
    for r in rules:
        share = ", ".join(f"{c} {p:.2f}" for c, p in r.proba.items())
        lines += [
            "",
            f"# training weight {r.weight:g}; leaf probabilities: {share}",
            "[[rule]]",
            f"when = {_toml_str(r.when)}",
            f"use = {_toml_str(r.use)}",
        ]
    if rules:
        lines += ["", f"# Otherwise the default, {default}."]
    return "\n".join(lines) + "\n"


def model_policy(
    *,
    name: str,
    model_file: str,
    initial: str,
    window: Mapping,
    decide: Mapping,
    objective: str,
    hysteresis: Mapping = {"min_dwell_ms": 3000, "agreeing": 1},
    description: Optional[str] = None,
    comment: Optional[str] = None,
) -> str:
    """The policy (TOML text) that runs a model file: `model` = `model_file` (relative to the
    policy), the model's window and minimum samples (the agent refuses any other), one decision
    per flow, and the objective the model was trained for, in canonical form."""
    window = dict(window)
    decide = {"spatial": True, "temporal": False, **dict(decide)}
    _check_settings(window, decide)
    lines = [f"# {comment}"] if comment else []
    lines += [
        f"name = {_toml_str(name)}",
        *([f"description = {_toml_str(description)}"] if description else []),
        f"initial = {_toml_str(initial)}",
        f"objective = {_toml_str(objectives.canonical(objective))}",
        f"model = {_toml_str(model_file)}",
        "",
        "[window]",
        f"kind = {_toml_str(window['kind'])}",
        f"samples = {int(window['samples'])}",
        "",
        "[decide]",
        f"spatial = {str(bool(decide['spatial'])).lower()}",
        f"temporal = {str(bool(decide['temporal'])).lower()}",
        f"min_samples = {int(decide['min_samples'])}",
        "",
        "[hysteresis]",
        *[f"{k} = {int(v)}" for k, v in hysteresis.items()],
    ]
    return "\n".join(lines) + "\n"


_OPS = {
    "<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
    "==": np.equal, "!=": np.not_equal,
}


def _condition_mask(when: str, x: np.ndarray, features: Sequence[str], params: Mapping[str, float]) -> np.ndarray:
    """Rows of `x` for which a `when` holds: comparisons joined by `and` and `or` (`and`
    binding tighter), each side a feature, a param or a number."""
    index = {f: i for i, f in enumerate(features)}

    def operand(word: str) -> np.ndarray:
        if word in index:
            return x[:, index[word]]
        if word in params:
            return np.full(x.shape[0], float(params[word]))
        return np.full(x.shape[0], float(word))

    result = np.zeros(x.shape[0], dtype=bool)
    for group in when.split(" or "):
        held = np.ones(x.shape[0], dtype=bool)
        for cmp in group.split(" and "):
            a, op, b = cmp.split()
            held &= _OPS[op](operand(a), operand(b))
        result |= held
    return result


def policy_choices(policy: Mapping, x: np.ndarray, features: Sequence[str]) -> List[str]:
    """What a rules policy (parsed TOML) chooses for each row of `x`, comparing in f64 as the
    agent does: the first rule that holds, else the default. For policies whose conditions
    are written with single spaces between tokens, as `tree_to_policy` writes them."""
    x = np.asarray(x, dtype=np.float64)
    chosen = np.full(x.shape[0], None, dtype=object)
    params = policy.get("params", {})
    for rule in policy["rule"]:
        open_ = chosen == None  # noqa: E711 (elementwise)
        if "when" in rule:
            hit = open_ & _condition_mask(rule["when"], x, features, params)
        else:
            hit = open_
        chosen[hit] = rule["use"]
    if "default" in policy:
        chosen[chosen == None] = policy["default"]  # noqa: E711
    return chosen.tolist()
