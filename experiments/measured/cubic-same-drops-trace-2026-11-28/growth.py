"""Where kernel:cubic loses time against native:cubic, from OUT/trace.txt (see compare.py).
Per transfer, in the Open state (0) after the first reduction, ACK by ACK: the window's rise
per RTT (segments gained over the time spent, in srtt units), how often it rose and fell by
itself, and the time to deliver each MB (from snd_una), kernel minus native by repetition.
Then per scheme, over all reductions: when the window gained its k-th segment after the
reduction ended (RTTs since, and windows acknowledged since), median of all.
Usage: growth.py OUT"""
import collections
import sys
from pathlib import Path

from server_trace import read

flows, transfers = read(Path(sys.argv[1]))
MB = 1 << 20


def analyse(evs):
    state, seen_reduction, open_time, gained, rises, falls = 0, False, 0.0, 0, 0, 0
    prev = None
    una0, mb_at = None, {}
    increments, phase = collections.defaultdict(list), None
    for t, kind, v in evs:
        if kind == "state":
            if v == 0 and state in (2, 3, 4):
                phase = {"t": t, "k": 0, "cwnd": None}
            elif v != 0:
                phase = None
            seen_reduction |= v in (2, 3, 4)
            state = v
            prev = None if v != 0 else prev
            continue
        cwnd, una, srtt_us = v[:3]
        if phase is not None:
            if phase["cwnd"] is None:
                phase.update(cwnd=cwnd, cwnd0=cwnd, una=una)
            elif cwnd > phase["cwnd"]:
                if phase["k"] < 4:
                    increments[phase["k"]].append(((t - phase["t"]) / (srtt_us / 1e6),
                                                   ((una - phase["una"]) % 2**32) / 1448 / phase["cwnd0"]))
                phase["k"] += 1
                phase["cwnd"] = cwnd
            else:
                phase["cwnd"] = cwnd
        if una0 is None:
            una0, t0 = una, t
        done = (una - una0) % 2**32
        for mb in range(1, done // MB + 1):
            mb_at.setdefault(mb, t - t0)
        if state == 0 and seen_reduction:
            if prev is not None:
                pt, pc = prev
                open_time += (t - pt) / (srtt_us / 1e6)
                if cwnd > pc:
                    gained += cwnd - pc
                    rises += 1
                elif cwnd < pc:
                    falls += 1
            prev = (t, cwnd)
    return {"rtts_open": open_time, "per_rtt": gained / max(open_time, 1e-9), "rises": rises, "falls": falls,
            "mb_at": mb_at, "increments": increments}


by_rep = collections.defaultdict(dict)
for port, evs in flows.items():
    d = transfers.get(port)
    if d:
        by_rep[d["repetition"]][d["scheme"]] = (d, analyse(evs))
for rep in sorted(by_rep):
    for scheme, (d, a) in sorted(by_rep[rep].items()):
        print(f"rep {rep} {scheme:13s} {d['tct_s']:7.3f} s  open {a['rtts_open']:6.1f} RTTs  rise "
              f"{a['per_rtt']:.3f} seg/RTT  rises {a['rises']}  falls in Open {a['falls']}")
    if len(by_rep[rep]) == 2:
        n, k = by_rep[rep]["native:cubic"][1]["mb_at"], by_rep[rep]["kernel:cubic"][1]["mb_at"]
        print("   kernel - native at each MB, ms:", " ".join(f"{(k[mb] - n[mb]) * 1e3:.0f}" for mb in sorted(n) if mb in k))

print("k-th segment gained after a reduction ended: median RTTs since / windows acknowledged since (n)")
for scheme in ("native:cubic", "kernel:cubic"):
    pooled = collections.defaultdict(list)
    for arms in by_rep.values():
        if scheme in arms:
            for k, v in arms[scheme][1]["increments"].items():
                pooled[k].extend(v)
    cells = []
    for k in sorted(pooled):
        v = pooled[k]
        rtts, windows = sorted(x[0] for x in v), sorted(x[1] for x in v)
        cells.append(f"{k + 1}: {rtts[len(v) // 2]:.2f} / {windows[len(v) // 2]:.2f} ({len(v)})")
    print(f"  {scheme:13s} " + "   ".join(cells))
