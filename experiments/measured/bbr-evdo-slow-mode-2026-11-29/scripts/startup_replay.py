"""Usage: startup_replay.py FLOW_LOG... Replays BBR's startup exit (rounds ended by send time,
the 10-round max filter of the reports' delivery rates, 25% growth in 3 rounds) over an agent
flow log's reports: per round, when it began (s from the first report), the report's RTT, the
estimate, the full-bandwidth mark and whether it grew. It reproduces where the agent's BBR left
startup (drain-reports.txt of ../bbr-timed-exit-2026-11-29), so it shows which sample restarted
the count."""
import json
import sys
from collections import deque


def replay(path):
    reports = [r for r in map(json.loads, open(path)) if r["event"] == "report"]
    t0 = reports[0]["dp_us"]
    start, rounds, window, full, count, lines = None, 0, deque(), 0, 0, []
    for r in reports:
        now, rtt = r["dp_us"], r["rtt_us"]
        ends = start is None or (now > start and now - start >= rtt)
        if ends:
            rounds, start = rounds + 1, now
        if r["delivery_rate_bps"] > 0:
            v = r["delivery_rate_bps"]
            while window and window[-1][1] <= v:
                window.pop()
            window.append((rounds, v))
            while window and window[0][0] + 10 <= rounds:
                window.popleft()
        bw = window[0][1] if window else 0
        if ends:
            if bw >= full * 1.25:
                full, count, tag = bw, 0, "grew"
            else:
                count += 1
                tag = f"{count} without growth"
            lines.append(f"{(now - t0) / 1e6:6.3f} s round {rounds:3d} rtt {rtt / 1e3:6.1f} ms estimate {bw / 1e6:5.2f} full {full / 1e6:5.2f} Mbit/s {tag}")
            if count >= 3:
                break
    return lines


for p in sys.argv[1:]:
    print(p)
    print("\n".join(replay(p)))
