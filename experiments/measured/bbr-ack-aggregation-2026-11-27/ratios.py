"""Usage: ratios.py RUNS_DIR. Runs main-N (native:bbr, kernel:bbr and
kernel:bbr:ack_aggregation=1 on the ACK-interval sample) and sample-N
(kernel:bbr:ack_aggregation=1 on Linux's rate sample), alternated per repetition N: ratio of
mean TCT, paired by N, 5,000-resample bootstrap 95% interval; medians; median retransmissions
(the shared ratio function of bbr-long-term-bw-2026-11-27)."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

LABELS = {"native:bbr": "native", "kernel:bbr": "kernel", "kernel:bbr:ack_aggregation=1": "aggregation"}
by = alternated_runs(sys.argv[1], lambda side, scheme: LABELS[scheme] + ("+linux-sample" if side == "sample" else ""))
random.seed(1)
for c in dict.fromkeys(k[0] for k in by):
    for label in ("kernel", "aggregation", "aggregation+linux-sample"):
        ratio(by[(c, label)], by[(c, "native")], f"{c} {label} / native", 48)
    ratio(by[(c, "aggregation")], by[(c, "kernel")], f"{c} aggregation / kernel", 48)
