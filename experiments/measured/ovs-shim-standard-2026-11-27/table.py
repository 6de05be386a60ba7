"""Every run of an alternation folder as a table row, then each arm's median [min, max]."""
import json, sys, statistics
from pathlib import Path
here = Path(sys.argv[1])
fields = [("shim_cpu_pct", "shim % of a core", 1), ("bpf_ns_per_packet_egress", "egress ns/packet", 0),
          ("bpf_ns_per_packet_ingress", "ingress ns/packet", 0), ("goodput_mbps", "goodput Mbit/s", 0),
          ("packets_per_s", "packets/s", 0), ("bridge_drops_from_server_per_s", "bridge drops/s", 0),
          ("machine_cpu_busy_pct", "machine busy %", 0), ("flows_fallen_back", "fallen back", 0), ("flows_corrupt", "corrupt", 0)]
runs = sorted(here.glob("*-[0-9].json"), key=lambda p: (int(p.stem.rsplit("-", 1)[1]), p.stem))
print("| run | " + " | ".join(f[1] for f in fields) + " |")
print("|---" * (len(fields) + 1) + "|")
arms = {}
for p in runs:
    d = json.loads(p.read_text())
    arms.setdefault(p.stem.rsplit("-", 1)[0], []).append(d)
    print(f"| {p.stem} | " + " | ".join(f"{d[k]:,.{nd}f}" for k, _, nd in fields) + " |")
print()
print("| arm | " + " | ".join(f[1] for f in fields[:4]) + " | shim µs per packet |")
print("|---" * 6 + "|")
for arm, ds in arms.items():
    cells = []
    for k, _, nd in fields[:4]:
        v = [d[k] for d in ds]
        cells.append(f"{statistics.median(v):,.{nd}f} [{min(v):,.{nd}f}, {max(v):,.{nd}f}]")
    per = [d["shim_cpu_pct"] * 1e4 / d["packets_per_s"] for d in ds]
    cells.append(f"{statistics.median(per):.2f} [{min(per):.2f}, {max(per):.2f}]")
    print(f"| {arm} | " + " | ".join(cells) + " |")
