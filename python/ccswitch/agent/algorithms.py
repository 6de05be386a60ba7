"""`ccswitch algorithms`: the algorithms the agent can run, with their parameters, and its
built-in policies, with their rules.

Both lists come from the agent binary itself (`ccswitch-agent --list-algorithms --json`,
`ccswitch-agent --list-policies --json`), so they are always the sets that `kernel:NAME`
and `kernel:policy:NAME` schemes, `--algorithm NAME` and `--policy NAME` accept.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List, Optional

#: The kernel's own congestion controls usable as `native:NAME` (ENVIRONMENT.md).
NATIVE = {
    "reno": "the kernel's NewReno (net/ipv4/tcp_cong.c)",
    "cubic": "the kernel's CUBIC (net/ipv4/tcp_cubic.c)",
    "bbr": "the kernel's BBR v1 (net/ipv4/tcp_bbr.c)",
}


class AlgorithmsError(RuntimeError):
    pass


def _agent_json(flag: str):
    from ..experiments.environment import bin_dir

    agent = os.path.join(bin_dir(), "ccswitch-agent")
    if not os.access(agent, os.X_OK):
        raise AlgorithmsError(f"{agent} not found; build it with `make build`")
    cp = subprocess.run([agent, flag, "--json"], capture_output=True, text=True)
    if cp.returncode != 0:
        raise AlgorithmsError(f"{agent} {flag} failed: {cp.stderr.strip()}")
    return json.loads(cp.stdout)


def list_algorithms() -> List[Dict]:
    """Every algorithm: name, summary, source, api ("simple" or "full") and params."""
    return _agent_json("--list-algorithms")


def list_policies() -> List[Dict]:
    """Every built-in policy: name, description, initial, default, window, min_samples,
    spatial, temporal, hysteresis, params, rules (each `when` and `use`) and summary."""
    return _agent_json("--list-policies")


def format_listing(algorithms: List[Dict], policies: Optional[List[Dict]] = None) -> str:
    lines = []
    width = max(len(a["name"]) for a in algorithms)
    for a in algorithms:
        api = "" if a["api"] == "simple" else f" [{a['api']} API]"
        lines.append(f"{a['name']:<{width}}  {a['summary']}{api}")
        lines.append(f"{'':<{width}}  source: {a['source']}")
        for p in a["params"]:
            lines.append(f"{'':<{width}}    {p['name']}={p['default']:g} {p['unit']}: {p['help']}")
    lines.append("")
    lines.append("Use as scheme kernel:NAME or kernel:NAME:PARAM=VALUE,... (agent: --algorithm).")
    lines.append("Python algorithms: kernel:py:MODULE:CLASS (see ccswitch.authoring.examples.reno);")
    lines.append("unmodified pyportus files: kernel:pyportus:FILE.py[:CLASS] (see ccswitch.authoring).")
    lines.append("Native (kernel) schemes: " + "; ".join(f"native:{k} ({v})" for k, v in NATIVE.items()))
    if policies:
        lines.append("")
        lines.append("Built-in policies (scheme kernel:policy:NAME[:KEY=VALUE,...], agent --policy NAME;")
        lines.append("KEY is one of a policy's params or settings such as window.samples):")
        for p in policies:
            lines.append("")
            lines.extend(p["summary"].rstrip("\n").splitlines())
    return "\n".join(lines)


def _cli(args) -> int:
    try:
        algorithms = list_algorithms()
        policies = list_policies()
    except AlgorithmsError as e:
        print(f"ccswitch algorithms: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"algorithms": algorithms, "policies": policies}, indent=2))
    else:
        print(format_listing(algorithms, policies))
    return 0


def add_cli(sub) -> None:
    p = sub.add_parser("algorithms", help="list the algorithms the agent can run and its built-in policies")
    p.add_argument("--json", action="store_true", help='print JSON: {"algorithms": [...], "policies": [...]}')
    p.set_defaults(func=_cli)
