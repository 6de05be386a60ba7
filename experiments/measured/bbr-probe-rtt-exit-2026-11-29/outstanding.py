"""Usage: outstanding.py RUN_OUT... For each BBR transfer on the UMTS client of run.sh's RUN_OUTs
(ss.txt.xz beside transfers.jsonl): the segments outstanding when the socket's window first
fell to 4 or less past 10 s of the flow (the trace's first outage's timeout, window 1), and when
they had drained to 4 (times from the socket's first ss sample): in the trickle before the
second outage, or only in the burst of ACKs after it (past 18 s)."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import field, ss_trace, umts_socket_flows  # noqa: E402

for out in sys.argv[1:]:
    sample = lambda now, line: (now, field(line, "cwnd"), field(line, "unacked"))
    for t, flow, t0 in umts_socket_flows(os.path.join(out, "transfers.jsonl"), ss_trace(out), sample):
        fell = next(((now - t0, unacked) for now, cwnd, unacked in flow if now - t0 > 10 and cwnd <= 4), None)
        drained = fell and next((now - t0 for now, _, unacked in flow if now - t0 >= fell[0] and unacked <= 4), None)
        what = f"window fell at {fell[0]:6.3f} s with {fell[1]:3.0f} outstanding" if fell else "window never fell"
        when = f"drained at {drained:6.3f} s ({'after the outage' if drained > 18 else 'in the trickle'})" if drained else "not drained"
        print(f"{os.path.basename(os.path.dirname(os.path.abspath(out)))[:22]:22s} {t['scheme']:10s} rep {t['repetition']} {t['tct_s']:6.2f} s: {what}, {when}")
