"""The server's Recovery episodes per transfer, from a trace of tcp:tcp_cong_state_set and
tcp:tcp_probe (OUT/trace.txt: perf script -F time,event,trace) joined with the run's
transfers (OUT/run/transfers.jsonl, by client port): for each transfer its scheme and time,
and each entry into Recovery (3) or Loss (4): when (ms from the transfer's first ACK), the
window and ssthresh on the ACK before it and after it, and how long until the state left it.
Usage: episodes.py OUT"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cubic-same-drops-trace-2026-11-28"))
from server_trace import read  # noqa: E402

flows, transfers = read(Path(sys.argv[1]))
# Each ACK as (cwnd, ssthresh), the pair this listing prints.
events = {port: [(t, k, (v[0], v[3]) if k == "ack" else v) for t, k, v in evs] for port, evs in flows.items()}
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
