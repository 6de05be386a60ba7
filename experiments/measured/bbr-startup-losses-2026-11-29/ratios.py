"""Usage: ratios.py RUNS_DIR. The runs SIDE-N of ab.sh, builds alternated per repetition N: each
ccswitch scheme against native:bbr, ratio of mean TCT paired by N, 5,000-resample bootstrap
95% interval; medians; median retransmissions (the ratio function of
bbr-long-term-bw-2026-11-27). First run: sides main and own-window; second: own-main and
sample."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

LABELS = {
    ("main", "native:bbr"): "native",
    ("main", "kernel:bbr"): "main",
    ("own-window", "kernel:bbr"): "own window",
    ("own-window", "kernel:bbr:rounds_by_send_time=1"): "own window + send-time rounds",
    ("own-main", "native:bbr"): "native",
    ("own-main", "kernel:bbr"): "main (own window)",
    ("sample", "kernel:bbr:rounds_by_send_time=1"): "Linux sample + send-time rounds",
    ("sample", "kernel:bbr:ack_aggregation=1,rounds_by_send_time=1"): "Linux sample + allowance + send-time rounds",
}
by = alternated_runs(sys.argv[1], lambda side, scheme: LABELS[(side, scheme)])
random.seed(1)
for c in dict.fromkeys(k[0] for k in by):
    for label in dict.fromkeys(LABELS.values()):
        if label != "native" and (c, label) in by:
            ratio(by[(c, label)], by[(c, "native")], f"{c} {label} / native", 60)
