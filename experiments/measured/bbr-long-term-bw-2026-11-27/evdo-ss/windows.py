"""Usage: windows.py SS_SAMPLES. Per flow of an `ss -tinHa` sample file (ss-sampler.sh), after its
first 1.5 s: the median window and its range, and the median pacing rate."""
import re, statistics as st, sys
cur, rows = None, {}
lines = open(sys.argv[1]).read().split("\n")
for i, l in enumerate(lines):
    if l.startswith("T "):
        cur = float(l.split()[1])
        continue
    if "rtt:" not in l or "cwnd:" not in l:
        continue
    flow, cc = lines[i - 1].split()[-1], l.split()[0]
    cwnd = int(re.search(r"cwnd:(\d+)", l).group(1))
    m = re.search(r"pacing_rate ([0-9.]+)([KMG]?)bps", l)
    pace = float(m.group(1)) * {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)] / 1e6
    rows.setdefault((flow, cc), []).append((cur, cwnd, pace))
for (flow, cc), r in rows.items():
    late = [x for x in r if x[0] - r[0][0] > 1.5]
    print(f"{cc:9s} {flow}: window median {st.median(x[1] for x in late)} [{min(x[1] for x in late)}, "
          f"{max(x[1] for x in late)}] segments, pacing median {st.median(x[2] for x in late):.2f} Mbit/s")
