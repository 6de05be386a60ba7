"""Per-round ratio of one figure between two arms of a batch run alternately (B-TAG-i over
A-TAG-i, the run pairs that ran next to each other), with their median.
Usage: pairs.py DIR A B TAG [FIELD] (FIELD: bpf_ns_per_packet_egress if not given)."""
import json
import statistics
import sys
from pathlib import Path

here, a, b, tag = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
field = sys.argv[5] if len(sys.argv) > 5 else "bpf_ns_per_packet_egress"
ratios = []
for pa in sorted(here.glob(f"{a}-{tag}-[0-9]*.json"), key=lambda p: int(p.stem.rpartition("-")[2])):
    pb = here / pa.name.replace(f"{a}-{tag}-", f"{b}-{tag}-", 1)
    if not pb.exists():
        continue
    x, y = json.loads(pa.read_text())[field], json.loads(pb.read_text())[field]
    ratios.append(y / x)
    print(f"{pa.stem.rpartition('-')[2]}: {a} {x:,.0f}  {b} {y:,.0f}  {b}/{a} {y / x:.3f}")
if ratios:
    print(f"median {b}/{a} of {len(ratios)}: {statistics.median(ratios):.3f} [{min(ratios):.3f}, {max(ratios):.3f}]")
