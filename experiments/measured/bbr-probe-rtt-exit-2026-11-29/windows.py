"""Usage: windows.py RUN_OUT... For each BBR transfer on the UMTS client of run.sh's RUN_OUTs
(ss.txt.xz beside transfers.jsonl): the socket's window, segments outstanding and pacing rate
over 6-10.5 s of the flow (from its first ss sample; before the trace's first outage), medians;
for the kernel's BBR also its bandwidth estimate and min_rtt (ss's bbr:(...))."""
import json, os, re, statistics, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import field, socket_samples  # noqa: E402

UNIT = {"": 1, "K": 1e3, "M": 1e6}
for out in sys.argv[1:]:
    samples = {}
    for now, port, line in socket_samples(os.path.join(out, "ss.txt.xz")):
        bbr = re.search(r"bbr:\(bw:([\d.]+)([KM]?)bps,mrtt:([\d.]+)", line)
        pacing = re.search(r"pacing_rate (\d+)bps", line)
        samples.setdefault(port, []).append((now, field(line, "cwnd"), field(line, "unacked"),
                                             int(pacing.group(1)) / 1e6 if pacing else None,
                                             float(bbr.group(1)) * UNIT[bbr.group(2)] / 1e6 if bbr else None,
                                             float(bbr.group(3)) if bbr else None))
    for t in sorted(map(json.loads, open(os.path.join(out, "transfers.jsonl"))), key=lambda r: r["started_at"]):
        flow = samples.get(t["client_port"])
        if t["client"] != "umts" or not flow:
            continue
        t0 = flow[0][0]
        window = [s for s in flow if 6 < s[0] - t0 < 10.5]
        med = lambda k: statistics.median(s[k] for s in window if s[k] is not None) if any(s[k] is not None for s in window) else None
        kernel = f", bw {med(4):.2f} Mbit/s, min_rtt {med(5):.0f} ms" if med(4) is not None else ""
        print(f"{os.path.basename(os.path.dirname(os.path.abspath(out)))[:22]:22s} {t['scheme']:10s} rep {t['repetition']} {t['tct_s']:6.2f} s: "
              f"window {med(1):3.0f}, outstanding {med(2):3.0f}, pacing {med(3):.2f} Mbit/s{kernel}")
