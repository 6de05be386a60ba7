"""Usage: pooled.py. main's BBR against the kernel's on T-Mobile LTE (10 MB, 100-packet queue),
pooling this folder's 10 pairs with the 30 of ../bbr-combined-batch-2026-11-29 (sides
"main" and "native"): ratio of mean TCT over the 40 pairs, 5,000-resample bootstrap 95%
interval, pairs resampled within each source."""
import os, random, sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "bbr-long-term-bw-2026-11-27"))
from ratios import alternated_runs, rows_by_scheme  # noqa: E402

one = rows_by_scheme(os.path.join(here, "transfers.jsonl"))
batch = alternated_runs(os.path.join(here, "..", "bbr-combined-batch-2026-11-29", "runs"), lambda side, scheme: side)
sources = [
    [(one[("lte-tmobile", "kernel:bbr")][n]["tct_s"], one[("lte-tmobile", "native:bbr")][n]["tct_s"])
     for n in sorted(set(one[("lte-tmobile", "kernel:bbr")]) & set(one[("lte-tmobile", "native:bbr")]))],
    [(batch[("lte-tmobile", "main")][n]["tct_s"], batch[("lte-tmobile", "native")][n]["tct_s"])
     for n in sorted(set(batch[("lte-tmobile", "main")]) & set(batch[("lte-tmobile", "native")]))],
]
ratio = lambda pairs: sum(a for a, _ in pairs) / sum(b for _, b in pairs)
random.seed(1)
boot = sorted(ratio([p for s in sources for p in (random.choice(s) for _ in s)]) for _ in range(5000))
pairs = [p for s in sources for p in s]
print(f"lte-tmobile kernel:bbr / native:bbr, pooled n={len(pairs)} ({len(sources[0])} + {len(sources[1])}): "
      f"{ratio(pairs):.3f} [{boot[125]:.3f}, {boot[-126]:.3f}]")
