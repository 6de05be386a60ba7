"""Every run of a kernel alternation folder as a table row, then each arm's median [min, max]."""
import json, sys, statistics
from pathlib import Path
here = Path(sys.argv[1])
fields = [("shim_agent_cpu_pct", "shim + agent % of a core", 2), ("reports_per_s", "reports/s", 0),
          ("acks_per_s", "ACKs/s", 0), ("urgent_p99_us", "urgent p99 µs", 0), ("bpf_ns_per_ack", "BPF ns/ACK", 0),
          ("goodput_mbps", "goodput Mbit/s", 1), ("flows_silent", "silent", 0), ("flows_fallen_back", "fallen back", 0),
          ("machine_cpu_busy_pct", "machine busy %", 0)]
runs = sorted(here.glob("*-[0-9].json"), key=lambda p: (int(p.stem.rsplit("-", 1)[1]), p.stem))
print("| run | " + " | ".join(f[1] for f in fields) + " | µs per report |")
print("|---" * (len(fields) + 2) + "|")
arms = {}
for p in runs:
    d = json.loads(p.read_text())
    arms.setdefault(p.stem.rsplit("-", 1)[0], []).append(d)
    per = d["shim_agent_cpu_pct"] * 1e4 / d["reports_per_s"]
    print(f"| {p.stem} | " + " | ".join(f"{d[k]:,.{nd}f}" for k, _, nd in fields) + f" | {per:.2f} |")
print()
print("| arm | shim + agent % of a core | µs per report | reports/s |")
print("|---|---|---|---|")
for arm, ds in arms.items():
    cpu = [d["shim_agent_cpu_pct"] for d in ds]
    per = [d["shim_agent_cpu_pct"] * 1e4 / d["reports_per_s"] for d in ds]
    rep = [d["reports_per_s"] for d in ds]
    print(f"| {arm} | {statistics.median(cpu):.2f} [{min(cpu):.2f}, {max(cpu):.2f}] | "
          f"{statistics.median(per):.2f} [{min(per):.2f}, {max(per):.2f}] | {statistics.median(rep):,.0f} [{min(rep):,.0f}, {max(rep):,.0f}] |")
