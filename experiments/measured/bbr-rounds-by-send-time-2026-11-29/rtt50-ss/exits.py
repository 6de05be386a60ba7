"""When the kernel's BBR left startup on each flow of an ss trace (ss.txt of run.sh), by way of
sstrace.py's lines: from a flow's first sample (no estimate yet) to its first sample at drain's
gain (0.34375), in ms, and its retransmissions then. Usage: python3 exits.py SSTRACE_OUTPUT"""
import sys

start = None
for line in open(sys.argv[1]):
    f = line.split()
    t, gain, retr = float(f[0]), f[5], f[-1]
    if f[3] == "0.0" and gain == "None":
        start = t
    elif gain == "0.34375" and start is not None:
        print(f"left startup {1000 * (t - start):6.1f} ms after its first sample, {retr} retransmitted")
        start = None
