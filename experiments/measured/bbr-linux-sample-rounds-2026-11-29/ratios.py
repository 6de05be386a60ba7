"""Usage: ratios.py RUNS_DIR. Runs main-N (native:bbr, kernel:bbr on the ACK-interval sample) and
sample-N (on Linux's rate sample: kernel:bbr:ack_aggregation=1, with rounds of one min_rtt
and ended by send time), alternated per repetition N: ratio of mean TCT, paired by N,
5,000-resample bootstrap 95% interval; medians; median retransmissions (the shared ratio
function of bbr-long-term-bw-2026-11-27)."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

LABELS = {
    "native:bbr": "native",
    "kernel:bbr": "main",
    "kernel:bbr:ack_aggregation=1": "sample+allowance",
    "kernel:bbr:ack_aggregation=1,rounds_by_send_time=1": "sample+allowance+send-time rounds",
}
by = alternated_runs(sys.argv[1], lambda side, scheme: LABELS[scheme])
random.seed(1)
for c in dict.fromkeys(k[0] for k in by):
    for label in ("main", "sample+allowance", "sample+allowance+send-time rounds"):
        ratio(by[(c, label)], by[(c, "native")], f"{c} {label} / native", 52)
    ratio(by[(c, "sample+allowance+send-time rounds")], by[(c, "sample+allowance")], f"{c} send-time rounds / min_rtt rounds", 52)
