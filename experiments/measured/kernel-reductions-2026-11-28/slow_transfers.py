"""Per run and scheme: transfers, median and mean TCT, and how many took longer than a
threshold (the slow mode of Reno on the 200-packet path: 3.69 s against 3.94-3.97 s).
Usage: slow_transfers.py DIR [THRESHOLD_S, default 3.8]; DIR holds runs (*/transfers.jsonl)."""
import json
import statistics
import sys
from pathlib import Path

root = Path(sys.argv[1])
threshold = float(sys.argv[2]) if len(sys.argv) > 2 else 3.8
print(f"{'run':<12} {'client':<16} {'scheme':<14} {'n':>3} {'median s':>9} {'mean s':>8} {'> ' + str(threshold) + ' s':>8}")
for run in sorted(p.parent for p in root.glob("*/transfers.jsonl")):
    by = {}
    for line in (run / "transfers.jsonl").read_text().splitlines():
        t = json.loads(line)
        if t.get("tct_s") is not None:
            by.setdefault((t["client"], t["scheme"]), []).append(t["tct_s"])
    for (client, scheme), tcts in sorted(by.items()):
        slow = sum(1 for x in tcts if x > threshold)
        print(f"{run.name:<12} {client:<16} {scheme:<14} {len(tcts):>3} {statistics.median(tcts):>9.3f} {statistics.mean(tcts):>8.3f} {slow:>8}")
