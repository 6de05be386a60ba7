"""Usage: triples.py RUNS_DIR. The runs native-N, before-N and after-N of the same-drops
before/after (README): ratios of mean TCT paired by repetition N (5,000-resample bootstrap 95%
interval) of after and before against native and of after against before, with medians."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

CLIENT = "loss1-50ms-same-drops"
by = alternated_runs(sys.argv[1], lambda side, scheme: side)
random.seed(1)
for a, b in (("after", "native"), ("before", "native"), ("after", "before")):
    ratio(by[(CLIENT, a)], by[(CLIENT, b)], f"{a} / {b}", 18)
