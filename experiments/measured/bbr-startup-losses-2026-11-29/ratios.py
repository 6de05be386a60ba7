"""Usage: ratios.py RUNS_DIR. Runs main-N (native:bbr, kernel:bbr) and own-window-N (kernel:bbr
and kernel:bbr:rounds_by_send_time=1 with in flight counted up to the agent's window),
alternated per repetition N: ratio of mean TCT, paired by N, 5,000-resample bootstrap 95%
interval; medians; median retransmissions (the ratio function of bbr-long-term-bw-2026-11-27)."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

LABELS = {
    ("main", "native:bbr"): "native",
    ("main", "kernel:bbr"): "main",
    ("own-window", "kernel:bbr"): "own window",
    ("own-window", "kernel:bbr:rounds_by_send_time=1"): "own window + send-time rounds",
}
by = alternated_runs(sys.argv[1], lambda side, scheme: LABELS[(side, scheme)])
random.seed(1)
for c in dict.fromkeys(k[0] for k in by):
    for label in ("main", "own window", "own window + send-time rounds"):
        ratio(by[(c, label)], by[(c, "native")], f"{c} {label} / native", 48)
