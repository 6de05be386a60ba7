"""Usage: policer.py RUN_OUT. For each BBR transfer of run.sh's RUN_OUT (ss.txt or ss.txt.xz
beside run/, or a folder with ss.txt.xz beside transfers.jsonl), from the server socket's
pacing rate in ss: the rate it paced at 4 s into the flow (on the T-Mobile LTE client both
BBRs have by then taken the trace for a policer and pace at their long-term estimate, gain 1),
when it first paced within 1% of that rate, and the completion time. Per scheme, medians."""
import json, os, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import rate, socket_samples  # noqa: E402

out = sys.argv[1]
ss = os.path.join(out, "ss.txt")
flows = {}
for now, port, line in socket_samples(ss if os.path.exists(ss) else ss + ".xz"):
    flows.setdefault(port, []).append((now, rate(line, "pacing_rate")))
rows = {}
run = os.path.join(out, "run") if os.path.isdir(os.path.join(out, "run")) else out
for t in sorted(map(json.loads, open(os.path.join(run, "transfers.jsonl"))), key=lambda r: r["started_at"]):
    flow = flows.get(t["client_port"])
    if not flow:
        continue
    t0 = flow[0][0]
    at4 = [p for n, p in flow if n - t0 <= 4.0][-1]
    since = next(n - t0 for n, p in flow if n - t0 > 1.0 and abs(p - at4) <= 0.01 * at4
                 and all(abs(q - at4) <= 0.01 * at4 for m, q in flow if n <= m <= t0 + 4.0))
    rows.setdefault(t["scheme"], []).append((at4, since, t["tct_s"]))
    print(f"{t['scheme']:12s} rep {t['repetition']}: paced {at4:6.2f} Mbit/s at 4 s, since {since:5.2f} s; TCT {t['tct_s']:.3f} s")
for scheme, r in rows.items():
    print(f"{scheme:12s} medians: {st.median(x[0] for x in r):6.2f} Mbit/s since {st.median(x[1] for x in r):5.2f} s; TCT {st.median(x[2] for x in r):.3f} s (n={len(r)})")
