"""Usage: windows.py RUN_OUT FROM_S TO_S. The congestion window of each BBR transfer of a run.sh
folder (allowance-ss: ss.txt.xz, transfers.jsonl, flows/) over FROM_S-TO_S s of the flow, in
segments, median and 10th/90th percentiles: the kernel's (native:bbr) from ss, sampled every
~10 ms; ccswitch's from its flow log, each report's window weighted by the time it was in
force (the window a report shows held since the report before)."""
import json, os, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import bbr_model, field, flow_reports, socket_samples  # noqa: E402

out, lo, hi = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
kernel = {}
for now, port, line in socket_samples(os.path.join(out, "ss.txt.xz")):
    if bbr_model(line):
        kernel.setdefault(port, []).append((now, field(line, "cwnd")))
logs = flow_reports(os.path.join(out, "flows"))


def spread(xs):
    xs = sorted(xs)
    return f"median {st.median(xs):5.1f}  p10 {xs[len(xs) // 10]:5.1f}  p90 {xs[9 * len(xs) // 10]:5.1f}"


for t in sorted(map(json.loads, open(os.path.join(out, "transfers.jsonl"))), key=lambda r: (r["client"], r["repetition"])):
    port, label = t["client_port"], f"{t['client']:5s} rep {t['repetition']} {t['scheme'][:10]:10s}"
    if port in kernel:
        t0 = kernel[port][0][0]
        print(f"{label}  {spread([c for now, c in kernel[port] if lo <= now - t0 <= hi])}")
    elif port in logs:
        reports = logs[port]
        t0 = reports[0]["t_us"]
        weighted = []
        for a, b in zip(reports, reports[1:]):
            start, end = max(lo, (a["t_us"] - t0) / 1e6), min(hi, (b["t_us"] - t0) / 1e6)
            if end > start:
                weighted += [b["cwnd_bytes"] / 1448] * max(1, round((end - start) * 100))
        print(f"{label}  {spread(weighted)}")
