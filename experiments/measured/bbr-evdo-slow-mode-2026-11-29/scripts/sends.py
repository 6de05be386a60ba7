"""Usage: sends.py RUN_OUT KEY... (KEY: scheme prefix and repetition, e.g. kernel2 native5).
From linklog_run.py's mm-link downlink logs: per 10 ms of the first 0.7 s of each chosen
transfer, data packets that arrived at the link's queue / left it / were queued after it."""
import json
import os
import sys

out, want = sys.argv[1], sys.argv[2:]
for line in open(os.path.join(out, "transfers.jsonl")):
    t = json.loads(line)
    key = f"{t['scheme'].split(':')[0]}{t['repetition']}"
    if key not in want:
        continue
    arrivals, departures = [], []
    for entry in open(os.path.join(out, t["link_log"])):
        p = entry.split()
        if len(p) >= 3 and p[1] in ("+", "-") and int(p[2]) > 1000:
            (arrivals if p[1] == "+" else departures).append(int(p[0]))
    t0 = arrivals[0]
    cells = []
    for start in range(0, 700, 10):
        a = sum(1 for x in arrivals if start <= x - t0 < start + 10)
        d = sum(1 for x in departures if start <= x - t0 < start + 10)
        q = sum(1 for x in arrivals if x - t0 < start + 10) - sum(1 for x in departures if x - t0 < start + 10)
        cells.append(f"{a}/{d}/{q}")
    print(key, t["tct_s"])
    for i in range(0, len(cells), 10):
        print(f"  {i * 10:4d} ms " + " ".join(f"{c:>8s}" for c in cells[i:i + 10]))
