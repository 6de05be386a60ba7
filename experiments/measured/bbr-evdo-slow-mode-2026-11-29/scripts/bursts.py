"""Usage: bursts.py RUN_OUT [MS]. From the mm-link downlink logs of a run made by
linklog_run.py: per transfer, over its first MS ms (1000), how many milliseconds saw n data
packets arrive at the link's queue (the server's send pattern, one delay shell later), and how
many packets arrived in milliseconds of 3 or more."""
import collections
import json
import os
import sys

out = sys.argv[1]
limit_ms = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
for line in open(os.path.join(out, "transfers.jsonl")):
    t = json.loads(line)
    if not t.get("link_log"):
        continue
    arrivals = []
    for entry in open(os.path.join(out, t["link_log"])):
        p = entry.split()
        if len(p) >= 3 and p[1] == "+" and int(p[2]) > 1000:
            arrivals.append(int(p[0]))
    per_ms = collections.Counter(a - arrivals[0] for a in arrivals if a - arrivals[0] < limit_ms)
    sizes = collections.Counter(per_ms.values())
    print(f"{t['scheme']:10s} rep {t['repetition']:2d} {t['tct_s']:6.2f} s  packets {sum(per_ms.values()):4d}  ms with n: "
          + " ".join(f"{n}:{c}" for n, c in sorted(sizes.items()))
          + f"  in ms of 3 or more: {sum(n for n in per_ms.values() if n >= 3)}")
