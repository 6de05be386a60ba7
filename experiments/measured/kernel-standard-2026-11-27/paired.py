"""Per round, the other arm's shim + agent CPU and CPU per report over the base arm's, and
their median [2nd smallest, 2nd largest]. Usage: paired.py FOLDER ARM."""
import json, sys, statistics
from pathlib import Path
here, arm = Path(sys.argv[1]), sys.argv[2]
load = lambda p: json.loads(p.read_text())
per_report = lambda d: d["shim_agent_cpu_pct"] / d["reports_per_s"]
rounds = sorted(int(p.stem.rsplit("-", 1)[1]) for p in here.glob(f"{arm}-[0-9]*.json"))
cpu, per = [], []
print(f"round  cpu {arm}/base  per-report {arm}/base")
for r in rounds:
    b, o = load(here / f"base-{r}.json"), load(here / f"{arm}-{r}.json")
    cpu.append(o["shim_agent_cpu_pct"] / b["shim_agent_cpu_pct"])
    per.append(per_report(o) / per_report(b))
    print(f"{r:5d}  {cpu[-1]:14.3f}  {per[-1]:21.3f}")
for name, xs in (("cpu", cpu), ("per report", per)):
    s = sorted(xs)
    print(f"{name}: median {statistics.median(xs):.3f} [2nd smallest {s[1]:.3f}, 2nd largest {s[-2]:.3f}]; "
          f"{sum(x < 1 for x in xs)} of {len(xs)} rounds below 1")
