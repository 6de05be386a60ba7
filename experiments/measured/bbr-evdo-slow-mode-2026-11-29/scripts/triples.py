"""Usage: triples.py RUNS_DIR. The runs native-N, main-N and candidate-N of ab.sh on the EVDO
client: ratios of mean TCT paired by repetition N (5,000-resample bootstrap 95% interval) of
candidate and main against native and of candidate against main, with medians; and per side
the transfers over SLOW_S (EVDO's second mode) with a Wilson 95% interval."""
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

SLOW_S = 10.4


def wilson(k, n, z=1.96):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


by = alternated_runs(sys.argv[1], lambda side, scheme: side)
random.seed(1)
for a, b in (("candidate", "native"), ("main", "native"), ("candidate", "main")):
    ratio(by[("evdo", a)], by[("evdo", b)], f"evdo {a} / {b}", 24)
for side in ("native", "main", "candidate"):
    tcts = [r["tct_s"] for r in by[("evdo", side)].values()]
    lo, hi = wilson(sum(t > SLOW_S for t in tcts), len(tcts))
    print(f"evdo {side}: {sum(t > SLOW_S for t in tcts)} of {len(tcts)} transfers over {SLOW_S} s [{lo:.2f}, {hi:.2f}]")
