"""The alternated 100k runs as a table (table.md)."""
import json
from pathlib import Path

here = Path(__file__).resolve().parent
print("| run | tcp_aborts (window) | silent | failed | corrupt | fallen back | shim + agent % | shim + maps KiB/flow | machine busy % |")
print("|---|---|---|---|---|---|---|---|---|")
for r in range(1, 4):
    for arm in ("base", "final"):
        d = json.loads((here / f"{arm}-{r}.json").read_text())
        ab = {s: c for s, c in d["tcp_aborts"].items() if c} or "none"
        print(f"| {arm}-{r} | {ab} | {d['flows_silent']:,} | {d['flows_failed']} | {d['flows_corrupt']} | {d['flows_fallen_back']} | "
              f"{d['shim_agent_cpu_pct']:.2f} | {d['shim_kib_per_flow'] + d['maps_kib_per_flow']:.2f} | {d['machine_cpu_busy_pct']:.0f} |")
