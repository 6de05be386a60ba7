"""native:cubic against kernel:cubic of each repetition on a trace of tcp:tcp_probe (OUT/trace.txt,
see ../cubic-same-drops-trace-2026-11-28/server_trace.py): the time each 125 kB was
acknowledged (s from the first ACK) and the window then (segments), and kernel minus native,
ms. Usage: windows.py OUT"""
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "cubic-same-drops-trace-2026-11-28"))
from server_trace import read  # noqa: E402

STEP = 125_000
flows, transfers = read(Path(sys.argv[1]))
by_rep = collections.defaultdict(dict)
for port, evs in flows.items():
    d = transfers.get(port)
    acks = [v for _, k, v in evs if k == "ack"]
    if not d or not acks:
        continue
    times = [t for t, k, _ in evs if k == "ack"]
    una0, at = acks[0][1], {}
    for t, (cwnd, una, *_) in zip(times, acks):
        for step in range(1, ((una - una0) % 2**32) // STEP + 1):
            at.setdefault(step, (t - times[0], cwnd))
    by_rep[d["repetition"]][d["scheme"]] = (d["tct_s"], at)
for rep in sorted(by_rep):
    (kt, k), (nt, n) = by_rep[rep]["kernel:cubic"], by_rep[rep]["native:cubic"]
    print(f"rep {rep}: kernel {kt:.2f} s, native {nt:.2f} s")
    print("   native  " + " ".join(f"{n[s][0]:.2f}/{n[s][1]}" for s in sorted(n)))
    print("   kernel  " + " ".join(f"{k[s][0]:.2f}/{k[s][1]}" for s in sorted(k)))
    print("   k - n   " + " ".join(f"{(k[s][0] - n[s][0]) * 1e3:.0f}" for s in sorted(n) if s in k))
