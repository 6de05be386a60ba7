"""Usage: ratios.py RUNS_DIR. Runs base-N (b0641b7) and new-N (7873070), each native:bbr and
kernel:bbr, alternated per repetition N: kernel:bbr / native:bbr of each build (its own native
in the same repetition), and new / base of kernel:bbr and of native:bbr (the shared ratio
function of bbr-long-term-bw-2026-11-27)."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

by = alternated_runs(sys.argv[1], lambda side, scheme: f"{side} {scheme}")
random.seed(1)
for c in dict.fromkeys(k[0] for k in by):
    for side in ("base", "new"):
        ratio(by[(c, f"{side} kernel:bbr")], by[(c, f"{side} native:bbr")], f"{c} {side}: kernel / native", 40)
    for scheme in ("kernel:bbr", "native:bbr"):
        ratio(by[(c, f"new {scheme}")], by[(c, f"base {scheme}")], f"{c} {scheme}: new / base", 40)
