"""Usage: windows.py RUN_OUT... For each BBR transfer on the UMTS client of run.sh's RUN_OUTs
(ss.txt.xz beside transfers.jsonl): the socket's window, segments outstanding and pacing rate
over 6-10.5 s of the flow (from its first ss sample; before the trace's first outage), medians;
for the kernel's BBR also its bandwidth estimate and min_rtt (ss's bbr:(...))."""
import os, statistics, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import bbr_model, field, rate, ss_trace, umts_socket_flows  # noqa: E402

for out in sys.argv[1:]:
    def sample(now, line):
        model = bbr_model(line)
        return (now, field(line, "cwnd"), field(line, "unacked"), rate(line, "pacing_rate") or None,
                model[0] / 1e6 if model else None, model[1] if model else None)

    for t, flow, t0 in umts_socket_flows(os.path.join(out, "transfers.jsonl"), ss_trace(out), sample):
        window = [s for s in flow if 6 < s[0] - t0 < 10.5]
        med = lambda k: statistics.median(s[k] for s in window if s[k] is not None) if any(s[k] is not None for s in window) else None
        kernel = f", bw {med(4):.2f} Mbit/s, min_rtt {med(5):.0f} ms" if med(4) is not None else ""
        print(f"{os.path.basename(os.path.dirname(os.path.abspath(out)))[:22]:22s} {t['scheme']:10s} rep {t['repetition']} {t['tct_s']:6.2f} s: "
              f"window {med(1):3.0f}, outstanding {med(2):3.0f}, pacing {med(3):.2f} Mbit/s{kernel}")
