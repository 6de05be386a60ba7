"""Usage: rate_ratios.py RUN_DIR. Paired ratios (by repetition, 5,000-resample bootstrap) of
kernel:bbr and kernel:bbr:rounds_by_delivery=0 against native:bbr, with retransmissions."""
import json, random, statistics as st, collections, sys
by = collections.defaultdict(dict)
for l in open(sys.argv[1] + "/transfers.jsonl"):
    r = json.loads(l)
    if r.get("tct_s") and r.get("sha256_ok"):
        by[(r["client"], r["scheme"])][r["repetition"]] = r
random.seed(1)
def ratio(a, b, label):
    reps = sorted(set(a) & set(b))
    if not reps:
        return
    tot = lambda d, s: sum(d[i]["tct_s"] for i in s)
    r = tot(a, reps) / tot(b, reps)
    bs = sorted(tot(a, s) / tot(b, s) for s in ([random.choice(reps) for _ in reps] for _ in range(5000)))
    med = lambda d: st.median(d[i]["tct_s"] for i in d)
    rt = lambda d: st.median(d[i].get("retrans_segs") or 0 for i in d)
    print(f"{label:50s} n={len(reps)} {r:.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] medians {med(a):.3f} / {med(b):.3f} s; "
          f"retransmissions (median) {rt(a):.0f} / {rt(b):.0f}")
N, K, K0 = "native:bbr", "kernel:bbr", "kernel:bbr:rounds_by_delivery=0"
for c in dict.fromkeys(k[0] for k in by):
    ratio(by[(c, K)], by[(c, N)], f"{c} kernel / native")
    ratio(by[(c, K0)], by[(c, N)], f"{c} by time / native")
