"""The shim's samples by function, inclusive (a sample counts once for every function on its
stack), from `perf script -F comm,tid,ip,sym` of `perf record --call-graph dwarf -p <shim>`
(script.txt[.xz]). Usage: shim_inclusive.py DIR [N]"""
import collections
import sys
from pathlib import Path

from perfscript import samples

here, top = Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 60
samples = samples(here)
inclusive = collections.Counter()
for s in samples:
    names = dict.fromkeys(f.split(None, 1)[1][:110] if len(f.split(None, 1)) > 1 else f for f in s[1:])  # in stack order: ties print alike every time
    inclusive.update(list(names))
print(f"{len(samples)} samples of the shim")
for name, n in inclusive.most_common(top):
    print(f"{n:5d} {100 * n / len(samples):5.1f}% {name}")
