"""Usage: aa.py RUNS_A RUNS_B [SIDE]. The kernel's BBR against itself: side SIDE (default
"native") of one ab.sh batch against the same side of another, paired by repetition, per
client (ratio of mean TCT, 5,000-resample bootstrap 95% interval, as ratios.py). What a
perfect copy of the kernel's BBR would read against it at this many pairs; and, per
client, the odd repetitions of RUNS_A against its even ones."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

side = sys.argv[3] if len(sys.argv) > 3 else "native"
a = alternated_runs(sys.argv[1], lambda s, scheme: s)
b = alternated_runs(sys.argv[2], lambda s, scheme: s)
random.seed(1)
for c in dict.fromkeys(k[0] for k in a if k[1] == side):
    ratio(a[(c, side)], b[(c, side)], f"{c} {side}: A / B", 24)
for c in dict.fromkeys(k[0] for k in a if k[1] == side):
    rows = a[(c, side)]
    odd = {(n + 1) // 2: r for n, r in rows.items() if n % 2}
    even = {n // 2: r for n, r in rows.items() if not n % 2}
    ratio(odd, even, f"{c} {side}: A odd / A even", 24)
