"""Usage: ratios.py TRANSFERS. One run, one build (Linux's rate sample, rounds-by-delivery.patch):
each kernel:bbr variant against native:bbr and rounds by delivery against by time, paired by
repetition (the shared ratio function of bbr-long-term-bw-2026-11-27)."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bbr-long-term-bw-2026-11-27"))
from ratios import ratio, rows_by_scheme  # noqa: E402

by = rows_by_scheme(sys.argv[1])
random.seed(1)
N, T, D = "native:bbr", "kernel:bbr:ack_aggregation=1", "kernel:bbr:ack_aggregation=1,rounds_by_delivery=1"
for c in dict.fromkeys(k[0] for k in by):
    ratio(by[(c, T)], by[(c, N)], f"{c} by time / native", 30)
    ratio(by[(c, D)], by[(c, N)], f"{c} by delivery / native", 30)
    ratio(by[(c, D)], by[(c, T)], f"{c} by delivery / by time", 30)
