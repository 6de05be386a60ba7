"""A run's units and resuming it. A unit is one transfer of a scenario (repetition x client x
scheme x file size); `unit_key` names it across invocations and hosts by a hash of every
parameter it runs with and of the content of every file it reads (traces, policy, model,
Python algorithm), so that a run resumed into the same directory (`plan_run`, `resume`) runs
again exactly the units that have no verdict yet, and refuses rows of other units."""

from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from . import results
from .environment import repo_root, scenario_python_path
from .errors import RunError
from .scenario import Client, Scenario, Scheme


def portable_path(path: Optional[str]) -> Optional[str]:
    """A file path as every host reads it: inside the repository, relative to it
    ("<repo>/experiments/x.toml"), so that checkouts at different places agree."""
    if path is None:
        return None
    root = repo_root() + os.sep
    return "<repo>/" + path[len(root):] if path.startswith(root) else path


def file_digest(path: str) -> str:
    """SHA-256 of a file's content, or why there is none ("missing"); computed once per
    version of the file (its size and modification time)."""
    try:
        st = os.stat(path)
    except OSError:
        return "missing"
    return _digest(path, st.st_size, st.st_mtime_ns)


@functools.lru_cache(maxsize=256)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    except OSError:
        return "missing"
    return h.hexdigest()


def policy_files(policy: str) -> List[str]:
    """The files a policy scheme's agent reads: the policy file (when its target is one) and
    the model file it names (`model = "x.json"`, relative to the policy file)."""
    target = policy.split(":", 1)[0]
    if not os.path.isfile(target):
        return []
    out = [target]
    try:
        import tomllib

        with open(target, "rb") as f:
            model = tomllib.load(f).get("model")
    except (OSError, ValueError):
        return out
    if isinstance(model, str):
        out.append(os.path.join(os.path.dirname(target), model))
    return out


def python_algorithm_file(algorithm: str, search: List[str]) -> Optional[str]:
    """The source file of a `py:MODULE:CLASS` or `pyportus:FILE.py[:CLASS]` algorithm, found as
    the agent finds it (a module: the scenario's directory first, then the package's; a file:
    the current directory, then the scenario's)."""
    if algorithm.startswith("pyportus:"):
        file = algorithm[len("pyportus:"):]
        if not file.endswith(".py"):
            file = file.rsplit(":", 1)[0]
        for d in ["", *search]:
            path = os.path.join(d, file)
            if os.path.isfile(path):
                return path
        return None
    if not algorithm.startswith("py:"):
        return None
    module = algorithm.split(":")[1]
    import importlib.machinery
    import importlib.util

    if "." not in module:
        spec = importlib.machinery.PathFinder.find_spec(module, search or None)
    else:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            spec = None
    return spec.origin if spec is not None and spec.origin and os.path.isfile(spec.origin) else None


def unit_inputs(sc: Scenario, client: Client, scheme: Scheme) -> Dict[str, str]:
    """Digests of every file a unit reads besides the scenario: trace files, a policy's file and
    the model it names, a Python algorithm's module. A unit resumed after one of them changed
    (a retrained model, an edited trace) is a different unit and runs again."""
    files = [p for p in (client.link.uplink_trace, client.link.downlink_trace) if p]
    if scheme.policy is not None:
        files += policy_files(scheme.policy)
    py = python_algorithm_file(scheme.algorithm, scenario_python_path(sc))
    if py:
        files.append(py)
    return {portable_path(os.path.abspath(p)): file_digest(p) for p in files}


def unit_key(sc: Scenario, rep: int, client: Client, scheme: Scheme, size: int) -> str:
    """What identifies one transfer of a scenario (one scheme x client x file size x
    repetition) across invocations and hosts: a hash of every parameter it runs with and of
    the content of every file it reads. A run resumed with other parameters or files finds
    none of its units finished."""
    path = {k: v for k, v in client.path_fields().items() if k != "path"}
    if path["loss_draws"] in (None, "packet"):
        del path["loss_draws"]  # the default, as before the key existed: earlier runs still resume
    for k in ("downlink_trace", "uplink_trace"):
        path[k] = portable_path(path[k])
    policy = scheme.policy
    if policy is not None:
        policy = portable_path(policy)
    doc = {"client": client.name, **path, "scheme": scheme.label, "policy": policy, "file_bytes": size,
           "repetition": rep + 1, "timeout_s": sc.timeout_s, "agent_settle_s": sc.agent_settle_s,
           "bridge": sc.bridge_kind, "ovs_server_cc": sc.ovs_server_cc,
           "destination_memory": sc.destination_memory, "inputs": unit_inputs(sc, client, scheme)}
    if client.flows:
        doc["flows"] = [[f.scheme.label if f.scheme else None, f.start_s, f.count, f.file_bytes] for f in client.flows]
    if client.workload is not None:
        doc["workload"] = repr(client.workload)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


#: One transfer to run: its number in the scenario's schedule and (repetition, client, scheme, size).
Unit = Tuple[int, Tuple[int, Client, Scheme, int]]


@dataclass
class Plan:
    """What a run still has to do, given what an earlier invocation into the same directory left."""

    units: List[Unit]          # the whole schedule, numbered from 1
    kept: List[dict]           # rows of finished units (verdicts), from the earlier invocation, in its order
    todo: List[Unit]           # units without a verdict yet, in schedule order
    superseded: List[dict]     # earlier rows without a verdict: their units run again


def plan_run(sc: Scenario, out_dir: str) -> Plan:
    """The run's units, and which of them `out_dir/transfers.jsonl` already holds a verdict
    for (`results.verdict`). Raises RunError if that file holds rows of other units (another
    scenario, or this one with other parameters): mixing them would corrupt both."""
    units = list(enumerate(sc.transfers(), 1))
    keys = [unit_key(sc, *u) for _, u in units]
    path = os.path.join(out_dir, "transfers.jsonl")
    earlier = results.read_jsonl(path) if os.path.exists(path) else []
    known = set(keys)
    foreign = [r for r in earlier if r.get("unit") not in known]
    if foreign:
        r = foreign[0]
        raise RunError(f"{out_dir} holds {len(foreign)} transfer(s) that are not this scenario's with these "
                       f"parameters (first: {r.get('client')} {r.get('scheme')} rep {r.get('repetition')}); "
                       "resume it with the same scenario and options, or give another --out")
    kept: Dict[str, dict] = {}
    superseded = []
    for r in earlier:
        if results.verdict(r)[0]:
            kept[r["unit"]] = r
        else:
            superseded.append(r)
    todo = [u for u, k in zip(units, keys) if k not in kept]
    # in the file's order, so that a resumed run's log starts as the earlier one was
    return Plan(units, list(kept.values()), todo, superseded)


def default_out_dir(scenario: Scenario) -> str:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join("results", f"{scenario.name}-{stamp}")


def resume(sc: Scenario, out_dir: str, say: Callable[[str], None]) -> Plan:
    """`plan_run`, with the earlier rows that reached no verdict (their units run again) moved
    to transfers-superseded.jsonl rather than away, and what is resumed said."""
    plan = plan_run(sc, out_dir)
    if plan.superseded:
        with open(os.path.join(out_dir, "transfers-superseded.jsonl"), "a", encoding="utf-8") as f:
            for r in plan.superseded:
                f.write(json.dumps(r) + "\n")
    if plan.kept:
        say(f"resuming {out_dir}: {len(plan.kept)} of {len(plan.units)} transfers finished earlier, "
            f"{len(plan.todo)} to run")
    return plan
