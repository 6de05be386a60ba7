"""`ccswitch evaluate STORE --policy SCHEME --objective OBJ --out DIR`: run policies live on the
paths of a sweep and judge them, under an operator's objective, against the fixed candidates
the sweep ran on the same paths.

A model's offline figures assume that a flow runs its chosen algorithm from the first byte; a
deployed policy starts on `initial`, decides after its window, may hand over again mid-flow
and pays for every handover. This command measures what the policy really delivers: every
path of the store (or of some of its mix components) becomes a client of an ordinary
scenario, the policies are its schemes, and the runner fetches each path's file sizes under
each policy (resumable: a rerun with the same OUT continues). Then, per objective
(learner/README.md, "Objectives"), per path:

- the cost of the policy's transfer and of every fixed candidate's (the sweep's cells: medians
  over their repetitions);
- the per-path oracle: the least cost of a fixed candidate there, chosen with hindsight;
- the best fixed algorithm: the one candidate with the least geometric mean cost over all the
  evaluated paths, also chosen with hindsight (the strongest constant baseline).

The aggregates are geometric means over paths of the ratios policy/best fixed and
policy/oracle, with 95 % bootstrap intervals over paths (resampled with a fixed seed); the
worst paths are listed. A policy whose transfers ran only the best fixed algorithm is said to
have run it, not to have beaten it. Everything goes to OUT/evaluation.json and is printed.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Dict, List, Optional, Sequence

import numpy as np

#: Bootstrap resamples and seed of the intervals over paths.
RESAMPLES = 2000
SEED = 20
#: How many of the worst paths a report lists.
WORST_SHOWN = 5


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "evaluate", help="run policies live on a sweep's paths and judge them against its fixed candidates",
        description="Run each policy on every path of a sweep store (or of some of its mix components), then "
                    "compare its cost under each objective with the fixed candidates the sweep ran there: "
                    "per-path oracle, best fixed algorithm, geometric means with 95%% intervals over paths.")
    p.add_argument("store", help="a sweep's cell store (a directory with spec.toml, paths.jsonl and cells/)")
    p.add_argument("--policy", action="append", required=True, metavar="SCHEME",
                   help="a policy scheme, e.g. kernel:policy:learner/models/objectives-power.policy.toml "
                        "(repeatable)")
    p.add_argument("--objective", action="append", required=True, metavar="OBJ",
                   help="an objective to judge by (tct, power, tct_delay_budget:budget_ms=100, harm, "
                        "weighted:...; repeatable)")
    p.add_argument("--out", required=True, help="the run directory (rerun to resume)")
    p.add_argument("--components", help="only the paths of these mix components (comma-separated)")
    p.add_argument("--repetitions", type=int, default=1, help="transfers per path and policy (default 1)")
    p.add_argument("--judge-only", action="store_true", help="judge an existing OUT without running anything")
    p.set_defaults(func=_cli, parser=p)


def _toml(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items() if x is not None) + " }"
    raise TypeError(f"no TOML form for {v!r}")


def absolute_policy(scheme: str) -> str:
    """A policy scheme whose file is named relative to the working directory, with that file
    made absolute: the evaluation's scenario lives in OUT, and a scenario resolves relative
    files against its own directory."""
    kind, sep, rest = scheme.partition(":policy:")
    if not sep:
        return scheme
    path, colon, overrides = rest.partition(":")
    if ("/" in path or path.endswith(".toml")) and not os.path.isabs(path):
        path = os.path.abspath(path)
    return f"{kind}:policy:{path}{colon}{overrides}"


def scenario_text(name: str, spec, paths, policies: Sequence[str], repetitions: int) -> str:
    """The evaluation's scenario: one client per path (as the sweep ran it), the policies as
    schemes."""
    lines = [f"# `ccswitch evaluate` of {', '.join(policies)} on the paths of sweep {spec.name}",
             f"name = {_toml(name)}", f"repetitions = {repetitions}", f"timeout_s = {spec.timeout_s!r}",
             f"agent_settle_s = {spec.agent_settle_s!r}",
             f"schemes = {_toml([absolute_policy(p) for p in policies])}", ""]
    for p in paths:
        lines.append("[[clients]]")
        lines.append(f"name = {_toml(p.client_name)}")
        lines.append(f"file_sizes = {_toml(list(p.sizes))}")
        for k, v in p.client_table.items():
            lines.append(f"{k} = {_toml(v)}")
        lines.append("")
    return "\n".join(lines)


def _median(values: Sequence[Optional[float]]) -> float:
    vals = [float(v) for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.median(vals)) if vals else float("nan")


def metrics_of(rows: Sequence[dict]) -> Dict[str, float]:
    """Medians over repetitions of what objectives read, from transfer rows (or cell rows) that
    succeeded; NaN where none did."""
    ok = [r for r in rows if r.get("error") is None and r.get("tct_s")]
    return {"tct": _median([r.get("tct_s") for r in ok]), "thr": _median([r.get("throughput_mbps") for r in ok]),
            "dp95": _median([r.get("delay_p95_ms") for r in ok]),
            "competitor": _median([r.get("competitor_mbps") for r in ok])}


def harm_against(reference_mbps: float, with_mbps: float) -> float:
    """Harm to the competitor's throughput (measurements.harm), NaN when either is unknown."""
    from ..experiments.measurements import harm

    if any(math.isnan(x) for x in (reference_mbps, with_mbps)) or reference_mbps <= 0:
        return float("nan")
    return harm(reference_mbps, with_mbps, higher_is_better=True)


def geomean_interval(ratios: np.ndarray) -> Dict[str, float]:
    """Geometric mean of per-path ratios with a 95 % percentile-bootstrap interval over paths."""
    logs = np.log(ratios)
    rng = np.random.default_rng(SEED)
    idx = rng.integers(0, len(logs), size=(RESAMPLES, len(logs)))
    boots = np.exp(logs[idx].mean(axis=1))
    return {"geomean": float(np.exp(logs.mean())), "ci95": [float(np.quantile(boots, 0.025)),
                                                             float(np.quantile(boots, 0.975))], "paths": int(len(logs))}


def judge(table: Dict[str, list], candidates: List[str], policy_cols: List[str], objective: str,
          algorithms: Dict[str, List[List[str]]], path_names: List[str]) -> dict:
    """One objective's verdicts. `table`: dataset-style columns (tct_/thr_/dp95_/harm_ + name)
    with one row per path, for the candidates and the policies (`policy_cols`, named like
    candidates); `algorithms[policy]`: per path the algorithms its transfers ran."""
    import pandas as pd

    from ..learner import objectives

    df = pd.DataFrame(table)
    names = candidates + policy_cols
    cost = objectives.cost_matrix(df, names, objective)
    fixed, pol = cost[:, :len(candidates)], cost[:, len(candidates):]
    judged = ~np.isnan(fixed).all(axis=1)
    out = {"objective": objectives.canonical(objective), "policies": {}, "paths": int(judged.sum())}
    if not judged.any():
        out["problem"] = "no path with a fixed candidate's figures under this objective"
        return out
    oracle = np.nanmin(fixed, axis=1)
    with np.errstate(invalid="ignore"):
        # a candidate without a figure on a path is not a constant choice one could have made
        complete = ~np.isnan(fixed[judged]).any(axis=0)
        gm = np.full(len(candidates), np.inf)
        gm[complete] = np.exp(np.log(fixed[judged][:, complete] / oracle[judged, None]).mean(axis=0))
    best = int(np.argmin(gm))
    out["best_fixed"] = candidates[best]
    out["fixed_vs_oracle"] = {c: (None if not math.isfinite(g) else round(float(g), 4)) for c, g in zip(candidates, gm)}
    for j, name in enumerate(policy_cols):
        ok = judged & ~np.isnan(pol[:, j]) & ~np.isnan(fixed[:, best])
        entry: dict = {"paths": int(ok.sum()), "failed_or_unmeasured": int((judged & np.isnan(pol[:, j])).sum())}
        if ok.sum() >= 2:
            vs_best = pol[ok, j] / fixed[ok, best]
            vs_oracle = pol[ok, j] / oracle[ok]
            entry["vs_best_fixed"] = geomean_interval(vs_best)
            entry["vs_oracle"] = geomean_interval(vs_oracle)
            order = np.argsort(-vs_oracle)[:WORST_SHOWN]
            rows = np.flatnonzero(ok)
            entry["worst"] = [{"path": path_names[rows[i]], "vs_oracle": round(float(vs_oracle[i]), 3),
                               "oracle": candidates[int(np.nanargmin(fixed[rows[i]]))],
                               "ran": algorithms[name][rows[i]]} for i in order]
        ran = {a for runs in algorithms[name] for run in runs for a in run}
        entry["ran"] = sorted(ran)
        if ran == {candidates[best]}:
            entry["note"] = f"ran only {candidates[best]}, as the best fixed algorithm does: it has not beaten it"
        out["policies"][name] = entry
    return out


def _fmt_interval(e: Optional[dict]) -> str:
    if not e:
        return "-"
    return f"{e['geomean']:.3f} [{e['ci95'][0]:.3f}, {e['ci95'][1]:.3f}]"


def render(result: dict) -> str:
    lines = []
    for verdict in result["objectives"]:
        lines.append(f"objective {verdict['objective']}: {verdict['paths']} paths; best fixed algorithm "
                     f"{verdict.get('best_fixed', '-')} (geometric mean cost / oracle: "
                     + ", ".join(f"{c} {v:.3f}" if v is not None else f"{c} -"
                                 for c, v in verdict.get("fixed_vs_oracle", {}).items()) + ")")
        for name, e in verdict["policies"].items():
            lines.append(f"  {name}: cost / best fixed {_fmt_interval(e.get('vs_best_fixed'))}, "
                         f"cost / oracle {_fmt_interval(e.get('vs_oracle'))} (geometric means over "
                         f"{e['paths']} paths, 95% intervals; {e['failed_or_unmeasured']} unmeasured); ran "
                         f"{', '.join(e['ran']) or '-'}")
            if e.get("note"):
                lines.append(f"    {e['note']}")
            for w in e.get("worst", []):
                lines.append(f"    worst: {w['path']} {w['vs_oracle']:.2f}x the oracle ({w['oracle']}); ran "
                             + "; ".join(" > ".join(r) for r in w["ran"]))
    return "\n".join(lines)


def evaluate(store: str, policies: Sequence[str], objectives_: Sequence[str], out: str, *,
             components: Optional[Sequence[str]] = None, repetitions: int = 1, run: bool = True,
             log=lambda m: print(m, file=sys.stderr)) -> dict:
    from ..experiments import scenario as _scenario
    from ..experiments.rundir import RunDirectory
    from ..experiments.sweep import competitor_mbps
    from ..experiments.sweep_paths import sample_paths
    from ..experiments.sweep_spec import SweepError, dataset_column_name, load_spec
    from ..experiments.sweep_store import CellStore
    from ..learner import objectives

    for o in objectives_:
        objectives.canonical(o)  # refuse a bad objective before anything runs
    spec_file = os.path.join(store, "spec.toml")
    if not os.path.exists(spec_file):
        raise SweepError(f"{store}: not a sweep store (no spec.toml)")
    spec = load_spec(spec_file)
    paths = sample_paths(spec)
    if components:
        unknown = set(components) - {c.name for c in spec.components}
        if unknown:
            raise SweepError(f"--components: {', '.join(sorted(unknown))}: not a mix component of {spec.name} "
                             f"({', '.join(c.name for c in spec.components)})")
        paths = [p for p in paths if p.component in components]
    os.makedirs(out, exist_ok=True)
    scenario_file = os.path.join(out, "evaluation-scenario.toml")
    if run:
        with open(scenario_file, "w", encoding="utf-8") as f:
            f.write(scenario_text(f"evaluate-{spec.name}", spec, paths, policies, repetitions))
        from ..experiments.runner import Runner

        sc = _scenario.load_scenario(scenario_file)
        Runner(sc, out).run()
    rows = RunDirectory(out).rows
    cells = CellStore(store).cells()
    by_path: Dict[str, List[dict]] = {}
    for c in cells:
        by_path.setdefault(c["path_id"], []).append(c)
    candidates = list(spec.candidates)
    cand_cols = [dataset_column_name(c) for c in candidates]
    pol_cols = [f"policy{i}" for i in range(len(policies))]
    table: Dict[str, list] = {}
    algorithms: Dict[str, List[List[List[str]]]] = {c: [] for c in pol_cols}
    names = []
    for p in paths:
        names.append(p.client_name)
        fixed = {c: metrics_of([x["row"] for x in by_path.get(p.id, []) if x["candidate"] == c]) for c in candidates}
        mine = {}
        for col, scheme in zip(pol_cols, policies):
            prow = [dict(r) for r in rows
                    if r.get("client") == p.client_name and r.get("scheme") == absolute_policy(scheme)]
            for r in prow:
                if r.get("flows"):
                    r["competitor_mbps"] = competitor_mbps(r, out)
            mine[col] = metrics_of(prow)
            algorithms[col].append([list(r.get("algorithms") or []) for r in prow])
        rival = next((f.get("scheme") for f in (p.params.get("flows") or []) if f.get("scheme")), None)
        ref = rival.split(":", 1)[1] if rival else None
        ref_mbps = fixed[ref]["competitor"] if ref in fixed else float("nan")
        for col, m in list(zip(cand_cols, fixed.values())) + list(mine.items()):
            for key, prefix in (("tct", "tct_"), ("thr", "thr_"), ("dp95", "dp95_")):
                table.setdefault(prefix + col, []).append(m[key])
            table.setdefault("harm_" + col, []).append(harm_against(ref_mbps, m["competitor"]) if rival else float("nan"))
        table.setdefault("has_competitor", []).append(bool(rival))
    result = {"store": os.path.relpath(store), "policies": dict(zip(pol_cols, policies)), "paths": names,
              "objectives": [judge(table, cand_cols, pol_cols, o, algorithms, names) for o in objectives_]}
    for v in result["objectives"]:
        v["policies"] = {result["policies"][k]: e for k, e in v["policies"].items()}
    with open(os.path.join(out, "evaluation.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return result


def _cli(args) -> int:
    from ..experiments.errors import RunError
    from ..experiments.scenario import ScenarioError
    from ..experiments.sweep_spec import SweepError
    from ..learner.objectives import ObjectiveError

    comps = [c.strip() for c in args.components.split(",")] if args.components else None
    try:
        result = evaluate(args.store, args.policy, args.objective, args.out, components=comps,
                          repetitions=args.repetitions, run=not args.judge_only)
    except (SweepError, ScenarioError, ObjectiveError) as e:
        args.parser.error(str(e))
    except RunError as e:
        print(f"ccswitch evaluate: {e}; rerun the same command to continue", file=sys.stderr)
        return 1
    print(render(result))
    return 0
