"""Samples of `perf script -F comm,ip,sym,symoff` (DIR/script.txt) inside ccsw_cong_control: the
chain of kernel functions above the program when sampled (its last three), and the program's
source line each call was made from (DIR/jit.json, DIR/xlated.txt as split.py reads them).
Usage: callers.py DIR"""
import bisect
import collections
import json
import re
import sys
from pathlib import Path

here = Path(sys.argv[1])
samples, cur = [], []
for line in open(here / "script.txt"):
    if not line.strip():
        if cur:
            samples.append(cur)
        cur = []
    else:
        cur.append(line.rstrip())
if cur:
    samples.append(cur)
jit = json.loads((here / "jit.json").read_text())
rows = sorted(jit["lines"], key=lambda r: r["jit_off"])
starts = [r["jit_off"] for r in rows]
source, text = {}, None
for line in open(here / "xlated.txt"):
    if line.startswith("; "):
        text = line.strip()[2:]
    m = re.match(r"\s*(\d+): ", line)
    if m and text:
        source[int(m.group(1))] = text
chains, sites = collections.Counter(), collections.Counter()
for s in samples:
    frames = s[1:]
    at = [i for i, f in enumerate(frames) if "ccsw_cong_control" in f]
    if not at:
        continue
    i = at[0]
    chain = [re.sub(r"\+0x[0-9a-f]+", "", f.split()[-1]) for f in frames[:i]]
    chains[" <- ".join(chain[-3:]) if chain else "program body"] += 1
    if i > 0:
        off = int(re.search(r"ccsw_cong_control\+0x([0-9a-f]+)", frames[i]).group(1), 16) - 1
        sites[source.get(rows[bisect.bisect_right(starts, off) - 1]["insn"], "?")[:120]] += 1
n = sum(chains.values())
print(f"{n} samples in ccsw_cong_control")
for k, v in chains.most_common(10):
    print(f"  {v:5d} {100 * v / n:5.1f}%  {k}")
print("calls made from:")
for k, v in sites.most_common(5):
    print(f"  {v:5d}  {k}")
