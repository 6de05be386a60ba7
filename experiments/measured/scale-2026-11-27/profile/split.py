"""Samples of `perf script -F comm,ip,sym,symoff` (script.txt) inside ccsw_cong_control: what the
program called when sampled, the JIT offsets of the body's samples, and the body's samples by
source function, through jitinfo.py's JIT-offset -> line_info map (jit.json) and
`bpftool prog dump xlated id N linum` (xlated.txt). Usage: split.py DIR TAG"""
import bisect
import collections
import json
import re
import sys
from pathlib import Path

here, tag = Path(sys.argv[1]), sys.argv[2]
repo = Path(__file__).resolve().parents[4]
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

under, offsets = collections.Counter(), collections.Counter()
for s in samples:
    frames = s[1:]
    idx = [i for i, f in enumerate(frames) if "ccsw_cong_control" in f]
    if not idx:
        continue
    i = idx[0]
    under[re.sub(r"\+0x[0-9a-f]+", "", frames[i - 1].split()[-1]) if i > 0 else "program body"] += 1
    m = re.search(rf"bpf_prog_{tag}\w*_ccsw_cong_control\+0x([0-9a-f]+)", frames[0])
    if m:
        offsets[int(m.group(1), 16)] += 1
n = sum(under.values())
print(f"samples in ccsw_cong_control (both loads): {n}")
for k, v in under.most_common():
    print(f"  {v:5d} {100 * v / n:5.1f}%  {k}")

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


def functions(path):
    out = []
    for i, line in enumerate(open(path), 1):
        m = re.match(r"(?:static __always_inline |static )?[\w\s\*]*?\b(\w+)\s*\(", line)
        if m and line[:1].isalpha():
            out.append((i, m.group(1)))
    return out


files = {p.name: functions(p) for p in [repo / "datapaths/kernel/src/bpf/kernel.bpf.c", repo / "datapaths/bpf/std_fold.bpf.h"]}


def function_of(text):
    m = re.search(r"\[file:\S*/([\w.]+) line_num:(\d+)", text or "")
    if not m or m.group(1) not in files:
        return "?"
    lst = files[m.group(1)]
    k = bisect.bisect_right([a for a, _ in lst], int(m.group(2))) - 1
    return f"{m.group(1)}:{lst[k][1] if k >= 0 else '?'}"


by_function = collections.Counter()
for off, v in offsets.items():
    by_function[function_of(source.get(rows[bisect.bisect_right(starts, off) - 1]["insn"]))] += v
body = sum(offsets.values())
print(f"\nbody samples of the load with tag {tag}, by JIT offset (>= 5):")
for off, v in sorted(offsets.items(), key=lambda kv: -kv[1]):
    if v >= 5:
        r = rows[bisect.bisect_right(starts, off) - 1]
        print(f"  {hex(off):>8} {v:4d} {100 * v / body:5.1f}%  {source.get(r['insn'], '?')[:110]}")
print(f"\nthe same {body} samples by source function:")
for k, v in by_function.most_common():
    print(f"  {v:5d} {100 * v / body:5.1f}%  {k}")
