"""kernel:X / native:X mean TCT over every repetition of OUT/<arm>-<round> runs
(../kernel-reductions-2026-11-28/run.sh), per arm, client and algorithm, paired by run and
repetition, with a bootstrap 95% interval of the ratio of sums (5,000 resamples of pairs,
seed 1), the medians of both and each pair's ratio. Usage: ratio.py OUT"""
import collections
import json
import random
import statistics
import sys
from pathlib import Path


def finished_runs(out):
    """Each finished run of OUT/<arm>-<round> in name order, as (arm, [its transfers that
    completed intact, each a transfers.jsonl record])."""
    for run in sorted(Path(out).iterdir()):
        if not (run / "summary.txt").exists():
            continue
        records = (json.loads(line) for line in open(run / "transfers.jsonl"))
        yield run.name.rsplit("-", 1)[0], [d for d in records if d.get("tct_s") and d.get("sha256_ok", True)]


def main(out):
    pairs = collections.defaultdict(list)
    for arm, transfers in finished_runs(out):
        tct = {(d.get("client", ""), d["scheme"], d["repetition"]): d["tct_s"] for d in transfers}
        for (client, scheme, rep), kernel in tct.items():
            native = tct.get((client, "native:" + scheme[7:], rep)) if scheme.startswith("kernel:") else None
            if native:
                pairs[(arm, client, scheme[7:])].append((kernel, native))
    rng = random.Random(1)
    for (arm, client, algorithm), p in sorted(pairs.items()):
        ratio = lambda ps: sum(k for k, _ in ps) / sum(n for _, n in ps)
        boot = sorted(ratio([rng.choice(p) for _ in p]) for _ in range(5000))
        median = lambda i: statistics.median(x[i] for x in p)
        print(f"{arm:8s} {client:24s} {algorithm:6s} kernel/native {ratio(p):.3f} [{boot[125]:.3f}, {boot[4874]:.3f}]  "
              f"n={len(p)}  medians {median(0):.3f} / {median(1):.3f} s  " + " ".join(f"{k / n:.3f}" for k, n in p))


if __name__ == "__main__":
    main(sys.argv[1])
