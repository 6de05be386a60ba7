"""Usage: ratios.py RUNS_DIR. The runs SIDE-N of ab.sh (builds alternated per repetition N):
every side against the side "native" (native:bbr), ratio of mean TCT paired by N,
5,000-resample bootstrap 95% interval, medians, median retransmissions
(bbr-long-term-bw-2026-11-27's ratio), and how many transfers of each side took longer than
SLOW_S on EVDO (its second mode)."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

SLOW_S = 10.4
by = alternated_runs(sys.argv[1], lambda side, scheme: side)
sides = sorted({s for _, s in by if s != "native"})
random.seed(1)
for c in dict.fromkeys(k[0] for k in by):
    for side in sides:
        ratio(by[(c, side)], by[(c, "native")], f"{c} {side} / native", 28)
for side in ["native"] + sides:
    tcts = [r["tct_s"] for r in by[("evdo", side)].values()]
    print(f"evdo {side}: {sum(t > SLOW_S for t in tcts)} of {len(tcts)} transfers over {SLOW_S} s")
