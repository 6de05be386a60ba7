"""Per arm, client and scheme of OUT/<arm>-<round> runs (../kernel-reductions-2026-11-28/run.sh):
the transfers, their median TCT, how many took over 5% longer than the median of the same
client's native transfers of both arms (a slow mode), and their retransmitted segments,
median [min, max]. Usage: retrans.py OUT"""
import collections
import json
import statistics
import sys
from pathlib import Path

runs = collections.defaultdict(list)
for run in sorted(Path(sys.argv[1]).iterdir()):
    if not (run / "summary.txt").exists():
        continue
    arm = run.name.rsplit("-", 1)[0]
    for line in open(run / "transfers.jsonl"):
        d = json.loads(line)
        if d.get("tct_s") and d.get("sha256_ok", True):
            runs[(d["client"], d["scheme"], arm)].append((d["tct_s"], d.get("retrans_segs")))
native = collections.defaultdict(list)
for (client, scheme, _), v in runs.items():
    if scheme.startswith("native:"):
        native[client] += [t for t, _ in v]
for (client, scheme, arm), v in sorted(runs.items()):
    slow_line = 1.05 * statistics.median(native[client])
    tct = [t for t, _ in v]
    retrans = [r for _, r in v if r is not None]
    spread = f"{statistics.median(retrans):.0f} [{min(retrans)}, {max(retrans)}]" if retrans else "-"
    print(f"{client:24s} {scheme:13s} {arm:7s} n={len(v):2d}  TCT median {statistics.median(tct):.3f} s  "
          f"over {slow_line:.3f} s: {sum(t > slow_line for t in tct):2d}  retransmitted {spread}")
