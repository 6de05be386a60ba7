"""kernel:cubic / native:cubic mean TCT over every repetition of OUT/<arm>-<round> runs (ab.sh),
paired by run and repetition, with a bootstrap 95% interval of the ratio of sums (5,000
resamples of pairs, seed 1), per arm. Usage: ratio.py OUT"""
import collections
import json
import random
import sys
from pathlib import Path

out = Path(sys.argv[1])
pairs = collections.defaultdict(list)
for run in sorted(out.iterdir()):
    if not (run / "summary.txt").exists():
        continue
    arm = run.name.rsplit("-", 1)[0]
    tct = {}
    for line in open(run / "transfers.jsonl"):
        d = json.loads(line)
        tct[(d["scheme"], d["repetition"])] = d["tct_s"]
    for (scheme, rep), kernel in tct.items():
        if scheme.startswith("kernel:") and ("native:" + scheme[7:], rep) in tct:
            pairs[(arm, scheme[7:])].append((kernel, tct[("native:" + scheme[7:], rep)]))
rng = random.Random(1)
for (arm, algorithm), p in sorted(pairs.items()):
    ratio = lambda ps: sum(k for k, _ in ps) / sum(n for _, n in ps)
    boot = sorted(ratio([rng.choice(p) for _ in p]) for _ in range(5000))
    print(f"{arm:8s} {algorithm:6s} kernel/native {ratio(p):.3f} [{boot[125]:.3f}, {boot[4874]:.3f}]  n={len(p)}  "
          + " ".join(f"{k / n:.3f}" for k, n in p))
