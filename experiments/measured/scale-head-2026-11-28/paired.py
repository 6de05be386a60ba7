"""Two arms of an alternation folder (runs named ARM-LOAD-ROUND) compared round by round: for
each load, FIELD of the other arm over the base arm's, per round, their median, and how many
rounds came out lower. Usage: paired.py DIR BASE OTHER FIELD"""
import json
import statistics
import sys
from pathlib import Path

here, base, other, field = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
loads = sorted({p.stem[len(base) + 1:].rpartition("-")[0] for p in here.glob(f"{base}-*-[0-9]*.json")})
for load in loads:
    ratios = []
    for p in sorted(here.glob(f"{base}-{load}-[0-9]*.json")):
        q = here / p.name.replace(f"{base}-", f"{other}-", 1)
        if q.exists():
            a, b = json.loads(p.read_text())[field], json.loads(q.read_text())[field]
            if a and b is not None:
                ratios.append(b / a)
    if ratios:
        print(f"{load}: {field} {other}/{base} per round " + ", ".join(f"{r:.3f}" for r in ratios)
              + f"; median {statistics.median(ratios):.3f}, {sum(r < 1 for r in ratios)} of {len(ratios)} lower")
