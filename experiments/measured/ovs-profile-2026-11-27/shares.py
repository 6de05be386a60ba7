"""Where the ovs port programs' and the shim's samples go, from `perf script -F comm,ip,sym,symoff`
of a system-wide `perf record -a -g` (script.txt) and the programs' JIT line maps (jitinfo.py of
../scale-2026-11-27/profile: jit-<prog>.json, and `bpftool prog dump xlated id N linum`:
xlated-<prog>.txt). Usage: shares.py DIR"""
import bisect
import collections
import json
import re
import sys
from pathlib import Path

from perfscript import lines, samples

here = Path(sys.argv[1])
samples = samples(here)
print(f"{len(samples)} samples in or under a port program")
for prog in ["ccsw_egress", "ccsw_ingress"]:
    under, offsets, n = collections.Counter(), collections.Counter(), 0
    for s in samples:
        frames = s[1:]
        idx = [i for i, f in enumerate(frames) if prog in f]
        if not idx:
            continue
        i, n = idx[0], n + 1
        under[re.sub(r"\+0x[0-9a-f]+", "", frames[i - 1].split()[-1]) if i > 0 else "program body"] += 1
        m = re.search(rf"bpf_prog_\w+_{prog}\+0x([0-9a-f]+)", frames[0])
        if m:
            offsets[int(m.group(1), 16)] += 1
    print(f"\n{prog}: {n} samples; what it was in")
    for k, v in under.most_common(14):
        print(f"  {v:5d} {100 * v / n:5.1f}%  {k}")
    jit_path = here / f"jit-{prog}.json"
    if not jit_path.exists():
        continue
    rows = sorted(json.loads(jit_path.read_text())["lines"], key=lambda r: r["jit_off"])
    starts = [r["jit_off"] for r in rows]
    source, text = {}, None
    for line in lines(here, f"xlated-{prog}.txt"):
        if line.startswith("; "):
            text = line.strip()[2:]
        m = re.match(r"\s*(\d+): ", line)
        if m and text:
            source[int(m.group(1))] = text
    by_line = collections.Counter()
    for off, v in offsets.items():
        t = source.get(rows[bisect.bisect_right(starts, off) - 1]["insn"], "?")
        m = re.search(r"line_num:(\d+)", t)
        by_line[(m.group(1) if m else "?", re.sub(r"\s*\[file.*", "", t)[:90])] += v
    print(f"  its body's samples by source line, % of the program's samples:")
    for (ln, src), v in by_line.most_common(12):
        print(f"  {v:5d} {100 * v / n:5.1f}% {ln:>5} {src}")
