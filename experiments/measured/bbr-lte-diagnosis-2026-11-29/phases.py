"""Usage: phases.py RUN_OUT [TIMES...]. From run.sh's RUN_OUT (ss.txt or ss.txt.xz beside run/,
or a folder with ss.txt.xz beside transfers.jsonl), per scheme, medians over its transfers of
the server socket's state at each time (s from the flow's first sample; default 0.5 1 1.5 2 3
4): MB acknowledged (bytes_acked), segments retransmitted so far, cwnd; and the transfers'
completion times."""
import json, os, re, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import field, socket_samples  # noqa: E402

out = sys.argv[1]
times = [float(x) for x in sys.argv[2:]] or [0.5, 1, 1.5, 2, 3, 4]
run = os.path.join(out, "run") if os.path.isdir(os.path.join(out, "run")) else out
ss = os.path.join(out, "ss.txt")
flows = {}
for now, port, line in socket_samples(ss if os.path.exists(ss) else ss + ".xz"):
    retr = re.search(r"retrans:\d+/(\d+)", line)
    flows.setdefault(port, []).append((now, field(line, "bytes_acked"), int(retr.group(1)) if retr else 0, field(line, "cwnd")))
by_scheme = {}
for t in map(json.loads, open(os.path.join(run, "transfers.jsonl"))):
    flow = flows.get(t["client_port"])
    if not flow:
        continue
    t0 = flow[0][0]
    row = {"tct": t["tct_s"]}
    for at in times:
        before = [s for s in flow if s[0] - t0 <= at]
        last = before[-1] if before else flow[0]
        row[at] = (last[1] / 1e6, last[2], last[3])
    by_scheme.setdefault(t["scheme"], []).append(row)
for scheme, rows in by_scheme.items():
    print(f"{scheme}: n={len(rows)}, TCT median {st.median(r['tct'] for r in rows):.3f} s")
    for i, name in enumerate(("MB acked", "retransmitted", "cwnd")):
        print(f"  {name:14s}" + "".join(f"  {at:4g}s {st.median(r[at][i] for r in rows):7.2f}" for at in times))
