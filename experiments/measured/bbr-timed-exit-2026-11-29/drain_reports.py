"""Usage: drain_reports.py FLOWS_DIR RUNS_DIR. For each candidate EVDO transfer of the batch
(its flow log in FLOWS_DIR/candidate-N/flows, from cellular-flows.tar.xz; its completion time
in RUNS_DIR/candidate-N/transfers.jsonl): when the agent's pacing rate fell below 2 Mbit/s
after being above 5 (drain) and when it rose above 2 again (drain's end), in s from the flow's
first report; then the slow mode (over 10.4 s) by when drain ended."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import batch_flows, drain_span  # noqa: E402

flows, runs = sys.argv[1], sys.argv[2]
rows = []
for name, evdo, reports in batch_flows(flows, runs, "evdo"):
    at = lambda i: (reports[i]["t_us"] - reports[0]["t_us"]) / 1e6
    start, end = drain_span(r["pacing_rate_bps"] / 1e6 for r in reports)
    start, end = at(start), (None if end is None else at(end))
    rows.append((end or float("inf"), start, evdo["tct_s"], name))
for end, start, tct, name in sorted(rows):
    print(f"{name:13s} {tct:6.2f} s: drain {start:6.3f} to {end:6.3f} s")
for label, keep in (("drain over by 2.2 s", lambda e: e <= 2.2), ("drain over later", lambda e: e > 2.2)):
    group = [tct for end, _, tct, _ in rows if keep(end)]
    print(f"{label}: {len(group)} transfers, {sum(t > 10.4 for t in group)} slow (over 10.4 s)")
