"""Usage: fidelity.py RUNS. fidelity.sh's runs fifo-N and normal-N: per client and scheme, the
ratio of mean TCT with the shim real-time to under the normal scheduler, paired by N
(5,000-resample bootstrap 95% interval), medians and median retransmissions (the shared ratio
function of bbr-long-term-bw-2026-11-27)."""
import os, random, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, ratio  # noqa: E402

by = alternated_runs(sys.argv[1], lambda side, scheme: (side, scheme))
random.seed(1)
for client, scheme in dict.fromkeys((c, s) for c, (_, s) in by):
    ratio(by[(client, ("fifo", scheme))], by[(client, ("normal", scheme))], f"{client} {scheme} real-time / normal", 48)
