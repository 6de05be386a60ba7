"""When ccswitch's BBR left startup, from the agent's flow logs of runs (RUN/flows/*-CLIENT-*.jsonl,
one or more RUN folders): the first report whose pacing rate is under half the highest so far
(drain's gain is 0.35 of startup's 2.89), in ms after the flow's first report; the largest
window; the packets reported lost. Usage: python3 startup.py CLIENT RUN [RUN...]"""
import glob
import json
import os
import sys

client, runs = sys.argv[1], sys.argv[2:]
paths = [p for run in runs for p in glob.glob(os.path.join(run, "flows", f"*-{client}-*.jsonl"))]
# by scheme (the file name between the file size and the repetition), then run and name
key = lambda p: (p.rsplit("-rep", 1)[0].split("-", 3)[3], p)
for path in sorted(paths, key=key):
    reports = [r for r in map(json.loads, open(path)) if r.get("event") == "report"]
    t0 = reports[0]["dp_us"]
    peak, left, cwnd, lost = 0, None, 0, 0
    for r in reports:
        cwnd, lost = max(cwnd, r["cwnd_bytes"]), lost + r["lost_packets"]
        if r["pacing_rate_bps"] > peak:
            peak = r["pacing_rate_bps"]
        elif left is None and r["pacing_rate_bps"] < peak / 2:
            left = (r["dp_us"] - t0) / 1e3
    name = os.path.join(os.path.basename(os.path.dirname(os.path.dirname(path))), os.path.basename(path))
    print(f"{name:75s} left startup {left if left is None else round(left, 1)} ms  window {cwnd // 1448} segments  lost {lost}")
