"""Usage: exits.py FLOWS_DIR RUNS_DIR. For each candidate UMTS transfer (its flow log in
FLOWS_DIR/candidate-N/flows, from cellular-flows.tar.xz; its completion time in
RUNS_DIR/candidate-N/transfers.jsonl): when the agent set a window above 12 segments again
after the trace's outage (past 16 s of the flow, counted from its first report), and the
report before it. An exit in the burst of ACKs that ends the outage (under 18.5 s) ended
probe_rtt's round there: the pre-set window applied on that ACK. A later one waited for the
200 ms, then for the next ACK. Then the slow mode (over 21 s) per group."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import batch_flows  # noqa: E402

MSS = 1448
flows, runs = sys.argv[1], sys.argv[2]
groups = {"early": [], "late": [], "none": []}
for name, umts, reports in batch_flows(flows, runs, "umts"):
    tct = umts["tct_s"]
    t0 = reports[0]["t_us"]
    at = lambda r: (r["t_us"] - t0) / 1e6
    exit_i = next((i for i, r in enumerate(reports) if at(r) > 16 and r["cwnd_bytes"] > 12 * MSS), None)
    if exit_i is None:
        groups["none"].append(tct)
        print(f"{name:13s} {tct:6.2f} s: no window above 12 segments after 16 s")
        continue
    exit_at, before_at = at(reports[exit_i]), at(reports[exit_i - 1])
    group = "early" if exit_at < 18.5 else "late"
    groups[group].append(tct)
    print(f"{name:13s} {tct:6.2f} s: exit at {exit_at:6.3f} s ({group}), the report before at {before_at:6.3f} s")
for group, tcts in groups.items():
    slow = sum(t > 21 for t in tcts)
    print(f"{group:5s}: {len(tcts):2d} transfers, {slow} slow (over 21 s)")
