"""Usage: allowance.py RUN_OUT [FROM_S TO_S]. The ACK-aggregation allowance of each BBR
transfer of run.sh's RUN_OUT (ss.txt beside run/; or a folder as allowance-ss/, with
ss.txt.xz beside transfers.jsonl and flows/) over FROM_S-TO_S s of the flow (default
3-9.5, ProbeBw before the UMTS trace's outage), in segments:
- the kernel's (native:bbr), implied by ss: cwnd less Linux's quantized target
  (ceil(2 x bw x mrtt) + 3 TSO bursts of 2 segments, even), at every sample with cwnd_gain 2;
- ccswitch's, from its flow log: each report's extra_acked_bytes, and the allowance BBR then
  held, the largest of the reports of the last 10 rounds (taken as 10 x the smallest RTT
  sample) at most 100 ms of the pacing rate's estimate.
Medians and 90th percentiles."""
import json, math, os, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import bbr_model, field, flow_reports, socket_samples  # noqa: E402

MSS = 1448
out = sys.argv[1]
lo, hi = (float(sys.argv[2]), float(sys.argv[3])) if len(sys.argv) > 3 else (3.0, 9.5)


def summary(xs):
    xs = sorted(xs)
    return f"median {st.median(xs):5.1f}  p90 {xs[int(0.9 * (len(xs) - 1))]:5.1f}  n={len(xs)}" if xs else "none"


run = os.path.join(out, "run") if os.path.isdir(os.path.join(out, "run")) else out
ss_path = os.path.join(out, "ss.txt")
kernel = {}
for now, port, line in socket_samples(ss_path if os.path.exists(ss_path) else ss_path + ".xz"):
    model = bbr_model(line)
    if model and model[2]:
        kernel.setdefault(port, []).append((now, int(field(line, "cwnd")), *model))
logs = flow_reports(os.path.join(run, "flows"))
transfers = sorted((json.loads(l) for l in open(os.path.join(run, "transfers.jsonl"))), key=lambda r: r["started_at"])
for t in transfers:
    label = f"{t['client']:5s} {t['scheme'][:10]:10s} rep {t['repetition']} {t['tct_s']:6.2f} s"
    port = t["client_port"]
    if t["scheme"].startswith("native") and port in kernel:
        f = kernel[port]
        t0 = f[0][0]
        allow = []
        for now, cwnd, bw, mrtt_ms, cwnd_gain in f:
            if lo <= now - t0 <= hi and cwnd_gain == "2":
                q = math.ceil(2 * bw / 8 * mrtt_ms / 1000 / MSS) + 6
                allow.append(cwnd - (q + q % 2))
        print(f"{label}  kernel's implied allowance: {summary(allow)}")
    elif port in logs:
        reps = logs[port]
        t0 = reps[0]["t_us"]
        extra, held = [], []
        for i, r in enumerate(reps):
            t = (r["t_us"] - t0) / 1e6
            if not lo <= t <= hi:
                continue
            extra.append(r.get("extra_acked_bytes", 0) / MSS)
            rtts = [x["min_rtt_us"] for x in reps[: i + 1] if x.get("min_rtt_us") and (r["t_us"] - x["t_us"]) < 10e6]
            window_us = 10 * min(rtts) if rtts else 0
            recent = [x.get("extra_acked_bytes", 0) for x in reps[: i + 1] if r["t_us"] - x["t_us"] <= window_us]
            cap = r["pacing_rate_bps"] / 8 / 0.99 * 0.1 if r.get("pacing_rate_bps") else 0
            held.append(min(max(recent, default=0), cap) / MSS)
        print(f"{label}  ccswitch's reports' extra_acked: {summary(extra)}; allowance held: {summary(held)}")
    else:
        print(f"{label}  (no trace)")
