"""The runs of a `bench scale` folder grouped by name (the name without its trailing -N), each
group's figures as median [min, max] over its runs, n the runs. Usage: table.py DIR [FIELD ...]
(default: the figures issue 21's targets name)."""
import json
import statistics
import sys
from pathlib import Path

DEFAULT = ["shim_agent_cpu_pct", "shim_cpu_pct", "bpf_ns_per_ack", "bpf_ns_per_packet_ingress", "urgent_p99_us",
           "flows_fallen_back", "reports_per_s", "acks_per_s", "goodput_mbps", "machine_cpu_busy_pct"]
here, fields = Path(sys.argv[1]), sys.argv[2:] or DEFAULT
groups = {}
for p in sorted(here.glob("*-[0-9]*.json")):
    name, _, n = p.stem.rpartition("-")
    if n.isdigit():
        groups.setdefault(name, []).append(json.loads(p.read_text()))
fields = [f for f in fields if any(d.get(f) is not None for ds in groups.values() for d in ds)]


def cell(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    nd = 2 if max(abs(x) for x in xs) < 100 else 0
    m = statistics.median(xs)
    return f"{m:,.{nd}f}" if len(xs) == 1 else f"{m:,.{nd}f} [{min(xs):,.{nd}f}, {max(xs):,.{nd}f}]"


print("| runs | n | " + " | ".join(fields) + " |")
print("|---" * (len(fields) + 2) + "|")
for name, ds in groups.items():
    print(f"| {name} | {len(ds)} | " + " | ".join(cell([d.get(f) for d in ds]) for f in fields) + " |")
