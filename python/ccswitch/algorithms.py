"""`ccswitch algorithms`: the algorithms the agent can run, with their parameters.

The list comes from the agent binary itself (`ccswitch-agent --list-algorithms --json`), so it
is always the set that `ccswitch:NAME` schemes and `--algorithm NAME` accept.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Dict, List

#: The kernel's own congestion controls usable as `native:NAME` (ENVIRONMENT.md).
NATIVE = {
    "reno": "the kernel's NewReno (net/ipv4/tcp_cong.c)",
    "cubic": "the kernel's CUBIC (net/ipv4/tcp_cubic.c)",
    "bbr": "the kernel's BBR v1 (net/ipv4/tcp_bbr.c)",
}


class AlgorithmsError(RuntimeError):
    pass


def list_algorithms() -> List[Dict]:
    from .experiments.runner import bin_dir

    agent = os.path.join(bin_dir(), "ccswitch-agent")
    if not os.access(agent, os.X_OK):
        raise AlgorithmsError(f"{agent} not found; build it with `make build`")
    cp = subprocess.run([agent, "--list-algorithms", "--json"], capture_output=True, text=True)
    if cp.returncode != 0:
        raise AlgorithmsError(f"{agent} --list-algorithms failed: {cp.stderr.strip()}")
    return json.loads(cp.stdout)


def format_listing(algorithms: List[Dict]) -> str:
    lines = []
    width = max(len(a["name"]) for a in algorithms)
    for a in algorithms:
        api = "" if a["api"] == "simple" else f" [{a['api']} API]"
        lines.append(f"{a['name']:<{width}}  {a['summary']}{api}")
        lines.append(f"{'':<{width}}  source: {a['source']}")
        for p in a["params"]:
            lines.append(f"{'':<{width}}    {p['name']}={p['default']:g} {p['unit']}: {p['help']}")
    lines.append("")
    lines.append("Use as scheme ccswitch:NAME or ccswitch:NAME:PARAM=VALUE,... (agent: --algorithm).")
    lines.append("Python algorithms: ccswitch:py:MODULE:CLASS (see ccswitch.examples.reno).")
    lines.append("Native (kernel) schemes: " + "; ".join(f"native:{k} ({v})" for k, v in NATIVE.items()))
    return "\n".join(lines)


def _cli(args) -> int:
    try:
        algorithms = list_algorithms()
    except AlgorithmsError as e:
        print(f"ccswitch algorithms: {e}")
        return 2
    if args.json:
        print(json.dumps(algorithms, indent=2))
    else:
        print(format_listing(algorithms))
    return 0


def add_cli(sub) -> None:
    p = sub.add_parser("algorithms", help="list the algorithms the agent can run, with their parameters")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=_cli)
