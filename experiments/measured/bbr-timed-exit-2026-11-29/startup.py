"""Usage: startup.py RUN_OUT. Startup of each EVDO transfer in run.sh's RUN_OUT: the bandwidth
estimate (Mbit/s) each time it rose by more than 2%, until drain (the pacing rate below 2
Mbit/s), from the server socket's ss samples: the kernel's BBR's `bbr:(bw:...)`, ccswitch's
pacing rate over startup's gain (2.885). Times in s from the socket's first sample."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import bbr_model, client_socket_flows, drain_span, rate, ss_trace  # noqa: E402

HIGH_GAIN = 2.885
out = sys.argv[1]


def sample(now, line):
    model = bbr_model(line)
    return now, rate(line, "pacing_rate"), model[0] / 1e6 if model else None


rows = []
for t, flow, t0 in client_socket_flows(os.path.join(out, "transfers.jsonl"), ss_trace(out), sample, "evdo"):
    best, steps = 0.0, []
    drain, _ = drain_span(pacing for _, pacing, _ in flow)
    for now, pacing, bw in flow[:drain]:
        est = bw if bw is not None else pacing / HIGH_GAIN
        if est > best * 1.02:
            best = est
            steps.append(f"{now - t0:.2f}:{est:.2f}")
    if drain is not None:
        steps.append(f"| drain {flow[drain][0] - t0:.2f}")
    rows.append((t["scheme"], t["tct_s"], f"{t['scheme']:10s} rep {t['repetition']} {t['tct_s']:6.2f} s: " + " ".join(steps)))
for _, _, line in sorted(rows):
    print(line)
