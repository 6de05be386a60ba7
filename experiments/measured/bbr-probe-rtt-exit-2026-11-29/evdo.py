"""Usage: evdo.py FLOWS_DIR RUNS_DIR. The candidate's EVDO transfers (flow logs in
FLOWS_DIR/candidate-N/flows, completion times in RUNS_DIR): each raise of the agent's window
by 8 segments or more followed by no report for over 0.25 s (a raised window waiting for an
ACK), and the bytes acknowledged by 1-9 s of the flow (from its first report), medians over
the fast and the slow transfers (over 10.4 s)."""
import os, statistics, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import batch_flows  # noqa: E402

MSS = 1448
MARKS = [1, 2, 3, 4, 5, 6, 7, 8, 9]
flows, runs = sys.argv[1], sys.argv[2]
by_mode = {False: [], True: []}
for name, evdo, reports in batch_flows(flows, runs, "evdo"):
    t0 = reports[0]["t_us"]
    at = lambda r: (r["t_us"] - t0) / 1e6
    waits = [f"{at(r):.2f} s {p['cwnd_bytes'] // MSS}->{r['cwnd_bytes'] // MSS}, next report {at(n) - at(r):.2f} s later"
             for p, r, n in zip(reports, reports[1:], reports[2:])
             if r["cwnd_bytes"] >= p["cwnd_bytes"] + 8 * MSS and at(n) - at(r) > 0.25]
    slow = evdo["tct_s"] > 10.4
    acked, delivered = 0, {}
    for r in reports:
        for m in MARKS:
            if at(r) <= m:
                delivered[m] = acked + r["acked_bytes"]
        acked += r["acked_bytes"]
    by_mode[slow].append([delivered.get(m, acked) / 1e3 for m in MARKS])
    print(f"{name:13s} {evdo['tct_s']:6.2f} s {'slow' if slow else 'fast'}: {'; '.join(waits) or 'no raise waited'}")
for slow, rows in by_mode.items():
    med = [round(statistics.median(col)) for col in zip(*rows)]
    print(f"{'slow' if slow else 'fast'} ({len(rows)}): KB acknowledged by {MARKS} s: {med}")
