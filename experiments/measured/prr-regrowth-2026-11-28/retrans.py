"""Per arm, client and scheme of OUT/<arm>-<round> runs (../kernel-reductions-2026-11-28/run.sh):
the transfers, their median TCT, how many took over 5% longer than the median of the same
client's native transfers of both arms (a slow mode), and their retransmitted segments,
median [min, max]. Usage: retrans.py OUT"""
import collections
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cubic-same-drops-trace-2026-11-28"))
from ratio import finished_runs  # noqa: E402  (the same runs ratio.py pairs)

runs = collections.defaultdict(list)
for arm, transfers in finished_runs(sys.argv[1]):
    for d in transfers:
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
