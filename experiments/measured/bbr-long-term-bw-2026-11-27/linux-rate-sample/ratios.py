"""Usage: ratios.py RUNS_DIR. Runs main-N (native:bbr, kernel:bbr on main's fold) and
sample-N (kernel:bbr with Linux's rate sample) alternated per repetition N: ratio of mean TCT,
paired by N, 5,000-resample bootstrap 95% interval; medians; median retransmissions."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ratios import alternated_runs, ratio  # noqa: E402
by = alternated_runs(sys.argv[1], lambda side, scheme: "native" if scheme == "native:bbr" else side)
random.seed(1)
for c in dict.fromkeys(k[0] for k in by):
    ratio(by[(c, "main")], by[(c, "native")], c + " main / native", 40)
    ratio(by[(c, "sample")], by[(c, "native")], c + " sample / native", 40)
    ratio(by[(c, "sample")], by[(c, "main")], c + " sample / main", 40)
