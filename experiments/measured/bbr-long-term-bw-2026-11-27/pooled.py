"""Usage: pooled.py TRANSFERS.jsonl... Ratio of mean TCT kernel:bbr / native:bbr per client,
paired by repetition within each file and pooled over the files, 5,000-resample bootstrap
95% interval, and the medians kernel / native."""
import json, random, statistics as st, sys
clients = {}
for path in sys.argv[1:]:
    by_rep = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("sha256_ok") and r["scheme"] in ("native:bbr", "kernel:bbr"):
            by_rep.setdefault((r["client"], r["repetition"]), {})[r["scheme"]] = r["tct_s"]
    for (client, _), v in by_rep.items():
        if len(v) == 2:
            clients.setdefault(client, []).append((v["kernel:bbr"], v["native:bbr"]))
random.seed(1)
for client, p in clients.items():
    ratio = lambda s: sum(a for a, _ in s) / sum(b for _, b in s)
    bs = sorted(ratio([random.choice(p) for _ in p]) for _ in range(5000))
    print(f"{client:24s} n={len(p)} {ratio(p):.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] medians "
          f"{st.median(a for a, _ in p):.3f} / {st.median(b for _, b in p):.3f} s")
