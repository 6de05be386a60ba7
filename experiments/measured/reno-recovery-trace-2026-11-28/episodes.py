"""The server's Recovery episodes per transfer, from a trace of tcp:tcp_cong_state_set and
tcp:tcp_probe (OUT/trace.txt: perf script -F time,event,trace) joined with the run's
transfers (OUT/run/transfers.jsonl, by client port): for each transfer its scheme and time,
and each entry into Recovery (3) or Loss (4): when (ms from the transfer's first ACK), the
window and ssthresh on the ACK before it and after it, and how long until the state left it.
Usage: episodes.py OUT"""
import collections
import json
import re
import sys
from pathlib import Path

out = Path(sys.argv[1])
SERVER_PORT = 8080
events = collections.defaultdict(list)  # client port -> [(t, kind, fields)]
line_re = re.compile(r"^\s*([\d.]+):\s+tcp:(\w+):\s+(.*)$")
for line in open(out / "trace.txt"):
    m = line_re.match(line)
    if not m:
        continue
    t, kind, rest = float(m.group(1)), m.group(2), m.group(3)
    f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
    if kind == "tcp_cong_state_set":
        if int(f["sport"]) != SERVER_PORT:
            continue
        events[int(f["dport"])].append((t, "state", int(f["cong_state"])))
    elif kind == "tcp_probe":
        src, dst = f["src"], f["dest"]
        if not src.endswith(f":{SERVER_PORT}"):
            continue
        events[int(dst.rsplit(":", 1)[1])].append((t, "ack", (int(f["snd_cwnd"]), int(f["ssthresh"]))))

transfers = {}
for line in open(out / "run" / "transfers.jsonl"):
    d = json.loads(line)
    transfers[d["client_port"]] = d
for port, evs in sorted(events.items(), key=lambda kv: kv[1][0][0]):
    d = transfers.get(port)
    if not d:
        continue
    t0 = next((t for t, k, _ in evs if k == "ack"), evs[0][0])
    last_ack, state, entries = None, 0, []
    for t, k, v in evs:
        if k == "ack":
            last_ack = v
            if entries and entries[-1]["after"] is None:
                entries[-1]["after"] = v
        else:
            if v in (3, 4) and state not in (3, 4):
                entries.append({"at_ms": (t - t0) * 1e3, "state": v, "before": last_ack, "after": None, "left_ms": None})
            if v not in (3, 4) and state in (3, 4) and entries:
                entries[-1]["left_ms"] = (t - t0) * 1e3
            state = v
    print(f"{d['scheme']:12s} rep {d['repetition']:2d}  {d['tct_s']:.3f} s")
    for e in entries:
        dur = f"{e['left_ms'] - e['at_ms']:6.1f}" if e["left_ms"] is not None else "   end"
        print(f"    {'Recovery' if e['state'] == 3 else 'Loss':8s} at {e['at_ms']:7.1f} ms for {dur} ms;"
              f" cwnd/ssthresh before {e['before']}, after {e['after']}")
