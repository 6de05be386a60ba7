"""Each transfer's window from slow start's overflow on, from a trace of tcp:tcp_probe
(OUT/trace.txt, see ../cubic-same-drops-trace-2026-11-28/server_trace.py): every ~30 ms from
0.38 s to 0.70 s after its first ACK, snd_cwnd, ssthresh, and snd_una, snd_nxt and their
difference in segments from the first ACK. Usage: recovery.py OUT"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cubic-same-drops-trace-2026-11-28"))
from server_trace import read  # noqa: E402

SEGMENT = 1448
flows, transfers = read(Path(sys.argv[1]))
print("Each transfer's window from 0.38 s (slow start's overflow) every ~30 ms: snd_cwnd, ssthresh, and")
print("snd_una, snd_nxt and their difference in segments from the first ACK (tcp:tcp_probe).")
for d in sorted(transfers.values(), key=lambda d: (d["repetition"], d["scheme"])):
    acks = [(t, v) for t, k, v in flows.get(d["client_port"], []) if k == "ack"]
    if not acks:
        continue
    t0, una0 = acks[0][0], acks[0][1][1]
    print(f"rep {d['repetition']} {d['scheme']} {d['tct_s']:.3f} s, {d['retrans_segs']} segments retransmitted")
    at = 0.38
    for t, (cwnd, una, _, ssthresh, nxt) in acks:
        if at <= t - t0 < 0.70:
            seg = lambda s: ((s - una0) % 2**32) / SEGMENT
            print(f"   {t - t0:.3f} cwnd {cwnd:4d} ssthresh {ssthresh if ssthresh < 1e9 else '-':>4} "
                  f"una {seg(una):5.0f} nxt {seg(nxt):5.0f} nxt-una {((nxt - una) % 2**32) / SEGMENT:4.0f}")
            at = t - t0 + 0.03
