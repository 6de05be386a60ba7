"""Usage: estimates.py RUN_OUT. Per EVDO transfer of run.sh's RUN_OUT (transfers.jsonl and
ss.txt or ss.txt.xz): at 0.25, 0.30, ..., 0.50 s from the socket's first sample, the bandwidth
estimate (Mbit/s: the kernel's BBR's `bbr:(bw:...)`, ccswitch's pacing rate over startup's gain
and margin, 2.885 x 0.99), the least RTT (ms: BBR's `mrtt`, or the socket's `minrtt`) and cwnd."""
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bbr-startup-losses-2026-11-29"))
from trajectories import bbr_model, client_socket_flows, field, rate, ss_trace  # noqa: E402

TIMES = [0.25, 0.30, 0.35, 0.40, 0.45, 0.50]


def sample(now, line):
    model = bbr_model(line)
    if model:
        return now, model[0] / 1e6, model[1], field(line, "cwnd")
    least = re.search(r"minrtt:([0-9.]+)", line)
    return now, rate(line, "pacing_rate") / 2.885 / 0.99, float(least.group(1)) if least else 0.0, field(line, "cwnd")


out = sys.argv[1]
rows = []
for t, flow, t0 in client_socket_flows(os.path.join(out, "transfers.jsonl"), ss_trace(out), sample, "evdo"):
    cells = []
    for at in TIMES:
        _, bw, least, cwnd = [s for s in flow if s[0] - t0 <= at][-1]
        cells.append(f"{bw:4.2f}/{least:5.1f}/{cwnd:3.0f}")
    rows.append((t["scheme"], t["repetition"], f"{t['scheme']:10s} rep {t['repetition']:2d} {t['tct_s']:6.2f} s  " + "  ".join(cells)))
print("estimate Mbit/s / least RTT ms / cwnd at " + ", ".join(f"{a:.2f}" for a in TIMES) + " s")
for _, _, line in sorted(rows):
    print(line)
