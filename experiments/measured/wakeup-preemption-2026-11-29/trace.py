"""What CPU 0 did between each wake-up of the probe's sleeper and the moment it ran.

Usage: python3 trace.py TRACE.txt.xz [LONG_US]

The sleeper is the thread named `wakeup` switched in on CPU 0 (its waker is pinned to CPU 1).
For each of its wake-ups, the wait is the time to its next switch-in on CPU 0; within it, the
time CPU 0 spent in softirqs (by vector) and hard IRQs, and the task that held CPU 0 when the
wake-up was made. Prints the wait's percentiles and, for the waits over LONG_US (default 1,000),
what filled them.
"""
import collections
import lzma
import re
import statistics
import sys

LINE = re.compile(r"^\s*(?P<task>.+?)-(?P<pid>\d+)\s+\[(?P<cpu>\d+)\]\s+\S+\s+(?P<ts>[\d.]+):\s+(?P<event>\w+):\s(?P<body>.*)$")


def events(path):
    with lzma.open(path, "rt") as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield int(m["cpu"]), float(m["ts"]), m["event"], m["body"], m["task"], int(m["pid"])


def main(path, long_us):
    rows = list(events(path))
    sleeper = next(int(re.search(r"next_pid=(\d+)", b)[1]) for cpu, _, e, b, _, _ in rows
                   if cpu == 0 and e == "sched_switch" and "next_comm=wakeup " in b)
    waits = []  # (latency_s, holder, softirq_s by vector, hardirq_s, longest softirq_s)
    pending = None  # (wake ts, task on CPU 0 then)
    running = "?"
    soft_start = {}
    hard_start = None
    soft, hard, longest = collections.Counter(), 0.0, 0.0
    for cpu, ts, e, b, task, pid in rows:
        if e == "sched_wakeup" and f"pid={sleeper} " in b and pending is None:
            pending = (ts, running)
            soft, hard, longest = collections.Counter(), 0.0, 0.0
            continue
        if cpu != 0:
            continue
        if e == "sched_switch":
            nxt = re.search(r"next_comm=(.*?) next_pid=(\d+)", b)
            running = nxt[1]
            if pending and int(nxt[2]) == sleeper:
                waits.append((ts - pending[0], pending[1], soft, hard, longest))
                pending = None
        elif e == "softirq_entry":
            soft_start[b] = ts
        elif e == "softirq_exit" and pending:
            vec = re.search(r"action=(\w+)", b)[1]
            start = max(soft_start.get(b, pending[0]), pending[0])
            soft[vec] += ts - start
            longest = max(longest, ts - start)
        elif e == "irq_handler_entry":
            hard_start = ts
        elif e == "irq_handler_exit" and pending and hard_start is not None:
            hard += ts - max(hard_start, pending[0])
    lat = sorted(w[0] for w in waits)
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))] * 1e6
    print(f"sleeper pid {sleeper}: {len(lat)} wake-ups on CPU 0")
    print(f"wait µs: p50 {q(0.5):.0f}  p90 {q(0.9):.0f}  p99 {q(0.99):.0f}  max {lat[-1] * 1e6:.0f}")
    long = [w for w in waits if w[0] > long_us / 1e6]
    print(f"waits over {long_us} µs: {len(long)}")
    if not long:
        return
    holders = collections.Counter(w[1] for w in long)
    print("task holding CPU 0 at the wake-up:", ", ".join(f"{k} {v}" for k, v in holders.most_common(6)))
    share = [sum(w[2].values()) / w[0] for w in long]
    print(f"share of the wait in softirq: median {statistics.median(share):.2f}, range [{min(share):.2f}, {max(share):.2f}]")
    vec = collections.Counter()
    for w in long:
        vec.update(w[2])
    print("softirq time in the long waits, by vector, ms:", ", ".join(f"{k} {v * 1e3:.1f}" for k, v in vec.most_common()))
    print(f"longest single softirq inside a long wait, ms: median {statistics.median(w[4] for w in long) * 1e3:.2f}, max {max(w[4] for w in long) * 1e3:.2f}")
    print(f"hard IRQ share of the long waits: median {statistics.median(w[3] / w[0] for w in long):.3f}")
    short = [w for w in waits if w[0] <= long_us / 1e6]
    sh = collections.Counter(w[1] for w in short)
    print(f"task holding CPU 0 at the wake-up, waits up to {long_us} µs:", ", ".join(f"{k} {v}" for k, v in sh.most_common(6)))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1000)
