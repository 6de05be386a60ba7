"""Usage: outage.py RUN_OUT [AT_S]. For each BBR transfer on the UMTS client of run.sh's RUN_OUT
(ss.txt or ss.txt.xz beside run/, or a folder with ss.txt.xz beside transfers.jsonl and flows/),
its window as the trace's outage begins (the last ss sample at or before AT_S s of the flow,
default 9.5), in segments, split as Linux's BBR sizes it: the quantized 2 BDP
(ceil(2 x bw x min_rtt) + 3 TSO bursts of 2, even) and the rest, the ACK-aggregation allowance
(plus 2 in probe_bw's first phase). The kernel's bw and min_rtt are its own, from ss; ccswitch's
are rebuilt from its flow log: the median pacing rate of the reports over the last 2.5 s (gain
1 in six of probe_bw's eight phases) less Linux's 1% margin, and the least RTT sample of the
last 10 s, or the handshake's.
Also what ss counts unacknowledged then, and for ccswitch's transfers, from the flow log, when
in flight first fell to 4 segments after the outage's timeout (probe_rtt's drain) and when the
agent set the window back above 12 after 16 s. All times count from the socket's first ss
sample (reports' t_us and the sampler's clock are both the wall clock)."""
import math, os, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import bbr_model, field, flow_reports, ss_trace, umts_socket_flows  # noqa: E402

MSS = 1448
out = sys.argv[1]
at = float(sys.argv[2]) if len(sys.argv) > 2 else 9.5
run = os.path.join(out, "run") if os.path.isdir(os.path.join(out, "run")) else out
logs = flow_reports(os.path.join(run, "flows"))


def quantized(bw_bps, min_rtt_ms):
    q = math.ceil(2 * bw_bps / 8 * min_rtt_ms / 1000 / MSS) + 6
    return q + q % 2


rows = {}
sample = lambda now, line: (now, field(line, "cwnd"), field(line, "unacked"), bbr_model(line))
for t, flow, t0 in umts_socket_flows(os.path.join(run, "transfers.jsonl"), ss_trace(out), sample):
    port = t["client_port"]
    now, cwnd, unacked, model = [s for s in flow if s[0] - t0 <= at][-1]
    if model:
        bw, min_rtt = model[0], model[1]
    else:
        reports = logs[port]
        # Reports' t_us and the sampler's `date` are both the wall clock: a report's time in
        # the flow is its t_us less the socket's first ss sample.
        recent = [r for r in reports if r["t_us"] / 1e6 <= now]
        last = recent[-1]["t_us"]
        # Paced at gain 1 in six of probe_bw's eight phases: the median pacing rate, less
        # Linux's 1% margin, is the estimate.
        bw = st.median(r["pacing_rate_bps"] for r in recent if last - r["t_us"] <= 2.5e6) / 0.99
        rtts = [r["min_rtt_us"] for r in recent if r.get("min_rtt_us") and last - r["t_us"] <= 10e6]
        rtts += [reports[0]["handshake_rtt_us"]] if reports[0].get("handshake_rtt_us") else []
        min_rtt = min(rtts) / 1000
    q = quantized(bw, min_rtt)
    rows.setdefault(t["scheme"], []).append((cwnd, unacked, bw / 1e6, min_rtt, q, cwnd - q))
    restart = ""
    if port in logs:
        reports, timeout, drained, back = logs[port], None, None, None
        for r in reports:
            s = r["t_us"] / 1e6 - t0
            if r["timeout"] and timeout is None and s > 9:
                timeout = s
            elif timeout is not None and drained is None and r["bytes_in_flight"] <= 4 * MSS:
                drained = s
            if timeout is not None and back is None and s > 16 and r["cwnd_bytes"] > 12 * MSS:
                back = s
        show = lambda v: f"{v:5.2f}" if v is not None else "    -"
        restart = f"; drained {show(drained)} s, window back {show(back)} s"
    print(f"{t['scheme']:11s} rep {t['repetition']} {t['tct_s']:6.2f} s  at {now - t0:4.2f} s: cwnd {cwnd:3.0f}, unacked {unacked:3.0f};"
          f" bw {bw / 1e6:5.2f} Mbit/s, min_rtt {min_rtt:5.1f} ms: 2 BDP quantized {q:3d}, the rest {cwnd - q:3.0f}{restart}")
for scheme, r in rows.items():
    print(f"{scheme:11s} medians: cwnd {st.median(x[0] for x in r):4.1f}, unacked {st.median(x[1] for x in r):4.1f}, bw {st.median(x[2] for x in r):5.2f},"
          f" min_rtt {st.median(x[3] for x in r):5.1f}, 2 BDP {st.median(x[4] for x in r):4.1f}, the rest {st.median(x[5] for x in r):4.1f} (n={len(r)})")
