"""Usage: rounds.py RUNS_DIR [FROM_S TO_S]. For the candidate's UMTS, EVDO and LTE flow logs of
each repetition (RUNS_DIR/candidate-N/flows/*.jsonl), over FROM_S-TO_S s of the flow (default
3-9.5): the reports, and the rounds counted two ways from the same reports:
- "at reports": BBR's rule with rounds_by_send_time (a round ends at the first report whose
  newest acknowledged segment was sent after the round began, now less its RTT sample), the
  next round starting at that report;
- "on the RTT grid": the same end test, the next round starting where the ended one's first
  segment was acknowledged, one RTT sample after it began (Linux's next round begins at the
  ACK that ended the last, between two reports).
Sums over the repetitions, per client."""
import collections, glob, json, os, sys

runs = sys.argv[1]
lo, hi = (float(sys.argv[2]), float(sys.argv[3])) if len(sys.argv) > 3 else (3.0, 9.5)
totals = collections.defaultdict(lambda: [0, 0, 0, 0])


def rounds(reports, on_grid):
    start, count = None, 0
    for r in reports:
        now, rtt = r["t_us"], r["rtt_us"]
        if start is None:
            start = now
        elif rtt > 0 and now - start >= rtt:
            count += 1
            start = start + (now - start) // rtt * rtt if on_grid else now
    return count


for path in sorted(glob.glob(os.path.join(runs, "candidate-*", "flows", "*.jsonl"))):
    client = os.path.basename(path).split("-")[1]
    reports = [r for r in map(json.loads, open(path)) if r.get("event") == "report"]
    t0 = reports[0]["t_us"]
    window = [r for r in reports if lo <= (r["t_us"] - t0) / 1e6 <= hi]
    t = totals[client]
    t[0] += 1
    t[1] += len(window)
    t[2] += rounds(window, False)
    t[3] += rounds(window, True)
for client, (n, reports, at_reports, on_grid) in sorted(totals.items()):
    if not reports:
        continue  # the 2 MB transfers end before FROM_S
    print(f"{client:5s} {n} transfers, {lo:g}-{hi:g} s: {reports} reports, rounds at reports {at_reports}, "
          f"on the RTT grid {on_grid} ({on_grid / max(at_reports, 1):.2f}x)")
