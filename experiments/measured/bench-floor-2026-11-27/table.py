"""make bench alternated, base against lines: BPF ns per ACK per scheme, and each against the floor of its own run."""
import glob
import json
import statistics
import sys
from pathlib import Path

runs = Path(sys.argv[1])
arms = {}
print("| run | kernel:reno | kernel:cubic | native:ccsw_floor | reno / floor | cubic / floor |")
print("|---|---|---|---|---|---|")
for f in sorted(runs.glob("*-[0-9].json"), key=lambda p: (int(p.stem.split("-")[1]), p.stem)):
    r = {x["scheme"]: x["bpf_ns_per_ack"] for x in json.loads(f.read_text())["rows"]}
    r["reno/floor"] = r["kernel:reno"] / r["native:ccsw_floor"]
    r["cubic/floor"] = r["kernel:cubic"] / r["native:ccsw_floor"]
    arms.setdefault(f.stem.split("-")[0], []).append(r)
    print(f"| {f.stem} | {r['kernel:reno']:,.0f} | {r['kernel:cubic']:,.0f} | {r['native:ccsw_floor']:,.0f} "
          f"| {r['reno/floor']:.2f} | {r['cubic/floor']:.2f} |")
print()
print("| arm | runs | " + " | ".join(("kernel:reno", "kernel:cubic", "native:ccsw_floor", "reno/floor", "cubic/floor")) + " |")
print("|---|---|---|---|---|---|---|")
for arm, rs in arms.items():
    cells = []
    for k in ("kernel:reno", "kernel:cubic", "native:ccsw_floor", "reno/floor", "cubic/floor"):
        v = sorted(r[k] for r in rs)
        fmt = (lambda x: f"{x:,.0f}") if "/" not in k else (lambda x: f"{x:.2f}")
        cells.append(f"{fmt(statistics.median(v))} [{fmt(v[1])}, {fmt(v[-2])}]")
    print(f"| {arm} | {len(rs)} | " + " | ".join(cells) + " |")
