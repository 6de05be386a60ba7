"""Usage: ratios.py RUN_DIR. Paired ratios of mean TCT (by repetition, 5,000-resample
bootstrap) of kernel:bbr with and without packet conservation against native:bbr."""
import json, random, statistics as st, collections, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/transfers.jsonl")]
by = collections.defaultdict(dict)
for r in rows:
    if r.get("tct_s") and r.get("sha256_ok"):
        by[(r["client"], r["scheme"])][r["repetition"]] = r
random.seed(1)
def ratio(a, b, label, handshake=True):
    reps = sorted(set(a) & set(b))
    v = lambda d, i: d[i]["tct_s"] - (0 if handshake else d[i]["connect_s"])
    tot = lambda d, s: sum(v(d, i) for i in s)
    r = tot(a, reps) / tot(b, reps)
    bs = sorted(tot(a, s) / tot(b, s) for s in ([random.choice(reps) for _ in reps] for _ in range(5000)))
    print(f"{label:55s} n={len(reps)} {r:.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] medians "
          f"{st.median(v(a, i) for i in a):.3f} / {st.median(v(b, i) for i in b):.3f}")
N, K, K0 = "native:bbr", "kernel:bbr", "kernel:bbr:packet_conservation=0"
for c in dict.fromkeys(k[0] for k in by):
    ratio(by[(c, K)], by[(c, N)], c + " conservation / native")
    ratio(by[(c, K0)], by[(c, N)], c + " none / native")
    ratio(by[(c, K)], by[(c, K0)], c + " conservation / none")
    if c == "loss1-50ms":
        ratio(by[(c, K)], by[(c, N)], c + " conservation / native, no handshake", False)
