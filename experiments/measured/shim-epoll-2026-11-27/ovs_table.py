"""An ovs alternation folder's runs as a table, each arm's median [min, max], and the other
arm's shim CPU over the base's paired by round. Usage: ovs_table.py FOLDER ARM."""
import json, statistics, sys
from pathlib import Path
here, arm = Path(sys.argv[1]), sys.argv[2]
load = lambda p: json.loads(p.read_text())
rounds = sorted(int(p.stem.rsplit("-", 1)[1]) for p in here.glob(f"{arm}-[0-9]*.json"))
print("| run | shim % of a core | shim µs per packet | egress ns | ingress ns | goodput Mbit/s | fallen back | corrupt |")
print("|---|---|---|---|---|---|---|---|")
runs = {"base": [], arm: []}
for r in rounds:
    for a in ("base", arm):
        d = load(here / f"{a}-{r}.json")
        runs[a].append(d)
        print(f"| {a}-{r} | {d['shim_cpu_pct']:.1f} | {d['shim_cpu_pct'] * 1e4 / d['packets_per_s']:.2f} | {d['bpf_ns_per_packet_egress']:,.0f} | "
              f"{d['bpf_ns_per_packet_ingress']:,.0f} | {d['goodput_mbps']:.0f} | {d['flows_fallen_back']} | {d['flows_corrupt']} |")
print()
for a, ds in runs.items():
    cpu = [d["shim_cpu_pct"] for d in ds]
    print(f"{a}: shim % median {statistics.median(cpu):.1f} [{min(cpu):.1f}, {max(cpu):.1f}]")
ratios = [o["shim_cpu_pct"] / b["shim_cpu_pct"] for b, o in zip(runs["base"], runs[arm])]
print(f"shim % {arm} / base, paired by round: {', '.join(f'{x:.3f}' for x in ratios)}; median {statistics.median(ratios):.3f}")
