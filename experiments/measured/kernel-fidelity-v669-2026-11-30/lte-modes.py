"""Usage: lte-modes.py. The 30 LTE pairs of this folder (transfers.jsonl's 6 and lte-pairs/'s 24)
split by mode: a transfer is slow above 4.95 s. Per scheme: how many were slow, their path drops,
and the mean and median TCT of the rest."""
import json
import os
import statistics as st
from collections import defaultdict

here = os.path.dirname(os.path.abspath(__file__))
by = defaultdict(list)
for f in ("transfers.jsonl", "lte-pairs/transfers.jsonl"):
    for line in open(os.path.join(here, f)):
        r = json.loads(line)
        if r["client"] == "lte-tmobile" and r.get("sha256_ok"):
            by[r["scheme"]].append(r)
for alg in ("reno", "cubic", "bbr"):
    for side in ("native", "kernel"):
        rows = by[f"{side}:{alg}"]
        slow = [r for r in rows if r["tct_s"] > 4.95]
        fast = [r["tct_s"] for r in rows if r["tct_s"] <= 4.95]
        rest = f"the rest mean {st.mean(fast):.3f} median {st.median(fast):.3f} s" if fast else "no fast ones"
        print(f"{side}:{alg:6s} n={len(rows)} slow {len(slow):2d}, their drops {sorted(r['path_drops'] for r in slow)}; "
              f"{rest}; median drops of all {st.median(r['path_drops'] for r in rows):.0f}")
