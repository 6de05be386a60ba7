"""Which of a Reno transfer's loss reports came through the urgent lane (the first of a kernel
window reduction, f26acb4) and which the routine lane (a later one of the same reduction):
each agent report of flows/*.jsonl is matched by its datapath time (dp_us) to the shim's
"urgent lane report" lines (urgent-lane-reports.txt, from lane-log.patch) within 2 us.
Usage: lanes.py DIR"""
import bisect
import json
import re
import sys
from pathlib import Path

here = Path(sys.argv[1])
urgent = sorted(int(x) for x in re.findall(r"ts_us=(\d+)", (here / "urgent-lane-reports.txt").read_text()))
for f in sorted((here / "flows").glob("*.jsonl")):
    print(f"== {f.name}")
    t0, prev = None, None
    for d in map(json.loads, open(f)):
        if d.get("event") != "report":
            continue
        t0 = t0 or d["t_us"]
        i = bisect.bisect_left(urgent, d["dp_us"] - 2)
        near = any(abs(u - d["dp_us"]) <= 2 for u in urgent[max(0, i - 1):i + 2])
        if d["lost_packets"] > 0 and (near or prev != d["cwnd_bytes"] or d["t_us"] - t0 > 700_000):
            print(f"{(d['t_us'] - t0) / 1e3:8.1f} ms  cwnd {d['cwnd_bytes']:7d}  lost {d['lost_packets']}  "
                  f"acked {d['acked_bytes']:7d}  {'urgent' if near else 'routine'}")
        prev = d["cwnd_bytes"]
