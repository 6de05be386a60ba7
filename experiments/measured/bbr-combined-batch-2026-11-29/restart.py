"""Usage: restart.py RUNS_DIR. For each combined UMTS transfer's flow log (RUNS_DIR/combined-N/
flows/004-umts-*.jsonl; in umts-probe-flows.tar.xz), seconds from its first report: the
timeout in the trace's outage, the in-flight segments it reported, when a report first showed
in flight at most 4 segments after it (ProbeRtt's drain), and when the window came back above
12 segments (ProbeRtt's end)."""
import glob, json, os, sys

MSS = 1448


def rep(path):
    return int(path.split(os.sep)[-3].rsplit("-", 1)[1])


for path in sorted(glob.glob(os.path.join(sys.argv[1], "combined-*", "flows", "004-umts-*.jsonl")), key=rep):
    reports = [r for r in map(json.loads, open(path)) if r.get("event") == "report"]
    t0 = reports[0]["t_us"]
    timeout = in_flight = drained = restored = None
    for r in reports:
        t = (r["t_us"] - t0) / 1e6
        if r["timeout"] and timeout is None and t > 9:
            timeout, in_flight = t, r["bytes_in_flight"] // MSS
        elif timeout is not None and drained is None and r["bytes_in_flight"] <= 4 * MSS:
            drained = t
        if timeout is not None and restored is None and t > 16 and r["cwnd_bytes"] > 12 * MSS:
            restored = t
    show = lambda v: f"{v:6.2f}" if v is not None else "     -"
    print(f"combined-{rep(path):<3d} timeout {show(timeout)} s, in flight {in_flight}, "
          f"drained to 4 {show(drained)} s, window back {show(restored)} s")
