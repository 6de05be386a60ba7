"""Usage: stuck.py FLOWS_DIR. For each ccswitch BBR flow log in FLOWS_DIR (allowance-ss/flows:
the combined build with its per-report extra_acked_bytes), the spans of time (s from the
flow's first report) over which every report's measured ACK aggregation was the whole window
(extra_acked_bytes at least cwnd_bytes: the measure's cap). Within a timeout's recovery,
where the window is a few segments, that is expected; across seconds of probe_bw it is the
ACK epoch that never restarted (the program capped the epoch's expected count at one unit of
time, about a second, so an epoch that had kept pace that long expected no more)."""
import glob, json, os, sys

for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    reports = [r for r in map(json.loads, open(path)) if r.get("event") == "report"]
    t0 = reports[0]["t_us"]
    spans, since = [], None
    for r in reports:
        t = (r["t_us"] - t0) / 1e6
        at_cap = r.get("extra_acked_bytes", 0) >= r["cwnd_bytes"]
        if at_cap and since is None:
            since = t
        elif not at_cap and since is not None:
            spans.append((since, t))
            since = None
    if since is not None:
        spans.append((since, (reports[-1]["t_us"] - t0) / 1e6))
    longest = max((b - a for a, b in spans), default=0.0)
    shown = ", ".join(f"{a:.2f}-{b:.2f}" for a, b in spans)
    print(f"{os.path.basename(path)[:40]:40s} longest {longest:5.2f} s: {shown}")
