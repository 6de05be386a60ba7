"""Paired by round: likely / base of BPF ns per ACK, raw and against each run's floor; mean of
the per-round ratios with a bootstrap 95% interval (5,000 resamples, seed 1)."""
import json
import random
import statistics
import sys
from pathlib import Path

runs = Path(sys.argv[1])


def load(name):
    rows = json.loads((runs / f"{name}.json").read_text())["rows"]
    return {x["scheme"]: x["bpf_ns_per_ack"] for x in rows}


rounds = sorted({int(p.stem.split("-")[1]) for p in runs.glob("likely-[0-9].json")} &
                {int(p.stem.split("-")[1]) for p in runs.glob("base-[0-9].json")})
rng = random.Random(1)
for scheme in ("kernel:reno", "kernel:cubic"):
    for normed in (False, True):
        ratios = []
        for r in rounds:
            b, l = load(f"base-{r}"), load(f"likely-{r}")
            if normed:
                ratios.append((l[scheme] / l["native:ccsw_floor"]) / (b[scheme] / b["native:ccsw_floor"]))
            else:
                ratios.append(l[scheme] / b[scheme])
        boots = sorted(statistics.mean(rng.choices(ratios, k=len(ratios))) for _ in range(5000))
        label = f"{scheme}{' / floor' if normed else ''}"
        print(f"{label:24} {statistics.mean(ratios):.3f} [{boots[124]:.3f}, {boots[4874]:.3f}]  "
              f"{len(ratios)} rounds, lower in {sum(x < 1 for x in ratios)}: " + " ".join(f"{x:.2f}" for x in ratios))
