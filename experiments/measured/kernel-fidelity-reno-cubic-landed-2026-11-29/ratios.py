"""Usage: ratios.py RUN_DIR [RUN_DIR...]. For every client of the runs, kernel:X against the
kernel's own native:X for Reno, Cubic and BBR: ratio of mean TCT paired by repetition, bootstrap
95% interval, medians and median retransmissions (../bbr-long-term-bw-2026-11-27/ratios.py).
Several runs are pooled: a client's pairs are those of every run that has it, each pair within
one run and one repetition."""
import os
import random
import sys
from collections import defaultdict

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import ratio, rows_by_scheme  # noqa: E402

if __name__ == "__main__":
    by = defaultdict(dict)
    for i, run in enumerate(sys.argv[1:]):
        for key, rows in rows_by_scheme(run + "/transfers.jsonl").items():
            by[key].update({1000 * i + rep: r for rep, r in rows.items()})
    random.seed(1)
    for c in dict.fromkeys(k[0] for k in by):
        for alg in ("reno", "cubic", "bbr"):
            ratio(by[(c, f"kernel:{alg}")], by[(c, f"native:{alg}")], f"{c} kernel:{alg} / native", width=40)
