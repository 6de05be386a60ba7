"""Usage: modes.py RUNS_DIR. The two cellular cells are bimodal for every side: per side, how
many transfers fell in the slow mode (EVDO over 10.4 s; UMTS over 21 s, past the trace's
delivery window at 18-20 s), with a Wilson 95% interval of the fraction."""
import math, os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs  # noqa: E402

SLOW_S = {"evdo": 10.4, "umts": 21.0}


def wilson(k, n, z=1.96):
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


by = alternated_runs(sys.argv[1], lambda side, scheme: side)
for client, slow in SLOW_S.items():
    for (c, side), rows in sorted(by.items()):
        if c != client:
            continue
        tcts = [r["tct_s"] for r in rows.values()]
        k, n = sum(t > slow for t in tcts), len(tcts)
        lo, hi = wilson(k, n)
        print(f"{client} {side:10s} slow (> {slow} s): {k:2d} of {n} = {k / n:.2f} [{lo:.2f}, {hi:.2f}]")
