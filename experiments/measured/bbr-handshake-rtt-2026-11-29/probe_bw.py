"""ProbeBW's window against the kernel's (probe-bw-ss.toml under run.sh). For each transfer,
over FROM-TO s after its first sample: the window (median segments), the bandwidth estimate
and min_rtt behind it, and what the window holds beyond 2 x estimate x min_rtt (the
allowance and the quantization budget). The kernel's BBR from `ss` (its bbr:(bw, mrtt));
ccswitch's from the agent's flow log (the estimate as the median pacing rate / 0.99, most of
ProbeBW's phases pacing at gain 1; min_rtt as the least of the handshake's and the reports'
RTTs so far). Usage: probe_bw.py RUN_OUT (run.sh's OUT: ss.txt, run/)"""
import glob, json, os, re, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import bbr_model, socket_samples  # noqa: E402

out = sys.argv[1]
WINDOWS = {"umts": (3.0, 8.0), "evdo": (2.0, 8.0)}
MSS = 1448


kernel = {}  # client port -> [(t, cwnd, bw Mbit/s, mrtt ms)]
for now, port, line in socket_samples(os.path.join(out, "ss.txt")):
    model = bbr_model(line)
    cw = re.search(r"\bcwnd:(\d+)", line)
    if model and cw:
        kernel.setdefault(port, []).append((now, int(cw.group(1)), model[0] / 1e6, model[1]))

transfers = [json.loads(l) for l in open(os.path.join(out, "run", "transfers.jsonl"))]
print(f"{'transfer':44s} {'tct s':>6} {'cwnd':>5} {'bw Mbit/s':>9} {'min_rtt ms':>10} {'2 BDP':>6} {'beyond':>6}")
for t in sorted(transfers, key=lambda r: r["started_at"]):
    c = t["client"]
    lo, hi = WINDOWS[c]
    if t["scheme"].startswith("native"):
        rows = kernel.get(t["client_port"], [])
        if not rows:
            continue
        t0 = rows[0][0]
        rows = [r for r in rows if lo <= r[0] - t0 <= hi]
        cwnd, bw, rtt = st.median(r[1] for r in rows), st.median(r[2] for r in rows), st.median(r[3] for r in rows)
    else:
        (path,) = glob.glob(os.path.join(out, "run", "flows", f"*-{c}-*-rep{t['repetition']}.jsonl"))
        reports = [r for r in map(json.loads, open(path)) if r["event"] == "report"]
        t0 = reports[0]["t_us"]
        least, rows = None, []
        for r in reports:
            for v in (r.get("handshake_rtt_us"), r["rtt_us"]):
                if v:
                    least = v if least is None else min(least, v)
            if lo <= (r["t_us"] - t0) / 1e6 <= hi:
                rows.append((r["cwnd_bytes"] / MSS, r["pacing_rate_bps"] / 1e6 / 0.99, least / 1000))
        cwnd, bw, rtt = (st.median(x[i] for x in rows) for i in range(3))
    bdp2 = 2 * bw * 1e6 / 8 * rtt / 1000 / MSS
    print(f"{c + ' ' + t['scheme'][:20] + ' rep ' + str(t['repetition']):44s} {t['tct_s']:6.2f} {cwnd:5.0f} {bw:9.2f} {rtt:10.1f} {bdp2:6.1f} {cwnd - bdp2:6.1f}")
