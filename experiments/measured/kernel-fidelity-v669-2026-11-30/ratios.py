"""Usage: ratios.py RUN_DIR. For every client of the run, kernel:X against the kernel's own
native:X for Reno, Cubic and BBR: ratio of mean TCT paired by repetition, bootstrap 95%
interval, medians and median retransmissions (../bbr-long-term-bw-2026-11-27/ratios.py)."""
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import ratio, rows_by_scheme  # noqa: E402

if __name__ == "__main__":
    by = rows_by_scheme(sys.argv[1] + "/transfers.jsonl")
    random.seed(1)
    for c in dict.fromkeys(k[0] for k in by):
        for alg in ("reno", "cubic", "bbr"):
            ratio(by[(c, f"kernel:{alg}")], by[(c, f"native:{alg}")], f"{c} kernel:{alg} / native", width=40)
