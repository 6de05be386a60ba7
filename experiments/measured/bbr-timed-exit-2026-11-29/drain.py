"""Usage: drain.py RUN_OUT. Each EVDO transfer of run.sh's RUN_OUT, from the server socket's
ss samples (s since its first): when startup ended (pacing fell below 2 Mbit/s after being
above 5: BBR's drain, at 1/2.89 of the estimate), when drain ended (pacing back above 2), and
the window, unacknowledged segments, smoothed RTT and KB acknowledged at those moments."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import client_socket_flows, drain_span, field, rate, ss_trace  # noqa: E402

out = sys.argv[1]
sample = lambda now, line: (now, rate(line, "pacing_rate"), int(field(line, "cwnd")), int(field(line, "unacked")),
                            field(line, "rtt"), field(line, "bytes_acked") / 1e3)
rows = []
for t, flow, t0 in client_socket_flows(os.path.join(out, "transfers.jsonl"), ss_trace(out), sample, "evdo"):
    start, end = drain_span(x[1] for x in flow)
    startup_end, drain_end = (None if i is None else flow[i] for i in (start, end))
    show = lambda x: f"{x[0] - t0:6.3f} s (cwnd {x[2]:3d}, unacked {x[3]:3d}, rtt {x[4]:5.0f} ms, acked {x[5]:4.0f} KB)" if x else "-"
    rows.append((t["scheme"], t["tct_s"], f"{t['scheme']:10s} rep {t['repetition']} {t['tct_s']:6.2f} s: drain from {show(startup_end)} to {show(drain_end)}"))
for _, _, line in sorted(rows):
    print(line)
