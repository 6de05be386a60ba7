"""The shim's samples by function, inclusive (a sample counts once for every function on its
stack), from `perf script -F comm,tid,ip,sym` of `perf record --call-graph dwarf -p <shim>`
(script.txt[.xz]). Usage: shim_inclusive.py DIR [N]"""
import collections
import lzma
import sys
from pathlib import Path

here, top = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 60
path = here / "script.txt"
samples, cur = [], []
for line in (open(path) if path.exists() else lzma.open(f"{path}.xz", "rt")):
    if not line.strip():
        if cur:
            samples.append(cur)
        cur = []
    else:
        cur.append(line.rstrip())
if cur:
    samples.append(cur)
inclusive = collections.Counter()
for s in samples:
    names = {f.split(None, 1)[1][:110] if len(f.split(None, 1)) > 1 else f for f in s[1:]}
    inclusive.update(names)
print(f"{len(samples)} samples of the shim")
for name, n in inclusive.most_common(top):
    print(f"{n:5d} {100 * n / len(samples):5.1f}% {name}")
