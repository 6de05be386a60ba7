"""Usage: ratios.py RUN_DIR. Paired ratios of mean TCT (by repetition, 5,000-resample
bootstrap 95% interval) of kernel:bbr with and without the long-term bandwidth estimator
(lt_bw) against native:bbr, with the median retransmissions per transfer of each."""
import json, random, statistics as st, collections, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/transfers.jsonl")]
by = collections.defaultdict(dict)
for r in rows:
    if r.get("tct_s") and r.get("sha256_ok"):
        by[(r["client"], r["scheme"])][r["repetition"]] = r
random.seed(1)
def retrans(d):
    vals = [d[i].get("retrans_segs") for i in d if d[i].get("retrans_segs") is not None]
    return f"{st.median(vals):.0f}" if vals else "-"
def ratio(a, b, label):
    reps = sorted(set(a) & set(b))
    if not reps:
        return
    tot = lambda d, s: sum(d[i]["tct_s"] for i in s)
    r = tot(a, reps) / tot(b, reps)
    bs = sorted(tot(a, s) / tot(b, s) for s in ([random.choice(reps) for _ in reps] for _ in range(5000)))
    print(f"{label:42s} n={len(reps)} {r:.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] medians "
          f"{st.median(a[i]['tct_s'] for i in reps):.3f} / {st.median(b[i]['tct_s'] for i in reps):.3f} s;"
          f" retrans {retrans(a)} / {retrans(b)}")
N, K, K0 = "native:bbr", "kernel:bbr", "kernel:bbr:rounds_by_delivery=1"
for c in dict.fromkeys(k[0] for k in by):
    ratio(by[(c, K)], by[(c, N)], c + " by time / native")
    ratio(by[(c, K0)], by[(c, N)], c + " by delivery / native")
    ratio(by[(c, K0)], by[(c, K)], c + " by delivery / by time")
