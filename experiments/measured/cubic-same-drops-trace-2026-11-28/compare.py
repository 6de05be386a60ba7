"""native:cubic against kernel:cubic of each repetition, episode by episode, from a trace of
tcp:tcp_cong_state_set and tcp:tcp_probe (OUT/trace.txt: perf script -F time,event,trace)
joined with OUT/run/transfers.jsonl by client port. Both lose the same segments, so their
k-th window reductions answer the same loss. For each transfer: its time, its entries into
Recovery (3), CWR (2) and Loss (4), the mean window over the transfer (per ACK), and per
episode: when it began (ms from the first ACK), the window on the ACK before it, the window
on the ACK that ended it, and the window just before the next episode (growth in between).
Usage: compare.py OUT [EPISODES to list, default 12]"""
import collections
import sys
from pathlib import Path

from server_trace import read

events, transfers = read(Path(sys.argv[1]))
listed = int(sys.argv[2]) if len(sys.argv) > 2 else 12


def episodes(evs):
    t0 = next(t for t, k, _ in evs if k == "ack")
    cwnd, state, eps, acks, cwnd_sum = None, 0, [], 0, 0
    for t, k, v in evs:
        if k == "ack":
            cwnd = v[0]
            acks += 1
            cwnd_sum += cwnd
            if eps and eps[-1]["end_cwnd"] is None and eps[-1]["left_ms"] is not None:
                eps[-1]["end_cwnd"] = cwnd
            if eps:
                eps[-1]["next_cwnd"] = cwnd
        elif v in (2, 3, 4) and state not in (2, 3, 4):
            eps.append({"at_ms": (t - t0) * 1e3, "state": v, "before": cwnd, "left_ms": None,
                        "end_cwnd": None, "next_cwnd": None})
            state = v
        else:
            if v not in (2, 3, 4) and state in (2, 3, 4) and eps:
                eps[-1]["left_ms"] = (t - t0) * 1e3
            state = v
    return eps, cwnd_sum / max(acks, 1)


by_rep = collections.defaultdict(dict)
for port, evs in events.items():
    d = transfers.get(port)
    if d and any(k == "ack" for _, k, _ in evs):
        by_rep[d["repetition"]][d["scheme"]] = (d, *episodes(evs))
NAME = {2: "C", 3: "R", 4: "L"}
for rep in sorted(by_rep):
    arms = by_rep[rep]
    for scheme in sorted(arms):
        d, eps, mean = arms[scheme]
        kinds = collections.Counter(NAME[e["state"]] for e in eps)
        print(f"rep {rep} {scheme:13s} {d['tct_s']:7.3f} s  mean cwnd {mean:5.2f}  episodes {dict(kinds)}")
    if len(arms) < 2:
        continue
    (_, ne, _), (_, ke, _) = arms["native:cubic"], arms["kernel:cubic"]
    print("   k | native: at_ms state before->end ... next_before | kernel: same")
    for k in range(min(listed, max(len(ne), len(ke)))):
        row = []
        for e in (ne[k] if k < len(ne) else None, ke[k] if k < len(ke) else None):
            row.append("-" if e is None else
                       f"{e['at_ms']:8.0f} {NAME[e['state']]} {e['before']}->{e['end_cwnd']} .. {e['next_cwnd']}"
                       f" ({(e['left_ms'] or 0) - e['at_ms']:.0f} ms)")
        print(f"  {k:2d} | {row[0]:38s} | {row[1]}")
