"""Usage: ratios.py RUNS_DIR. Runs main-N (native:bbr, kernel:bbr on main's fold) and
sample-N (kernel:bbr with Linux's rate sample) alternated per repetition N: ratio of mean TCT,
paired by N, 5,000-resample bootstrap 95% interval; medians; median retransmissions."""
import json, glob, os, random, statistics as st, sys, collections
by = collections.defaultdict(dict)
for d in glob.glob(os.path.join(sys.argv[1], "*-*")):
    if not os.path.isdir(d) or not os.path.exists(d + "/transfers.jsonl"):
        continue
    side, rep = os.path.basename(d).rsplit("-", 1)
    for line in open(d + "/transfers.jsonl"):
        r = json.loads(line)
        if r.get("sha256_ok"):
            label = "native" if r["scheme"] == "native:bbr" else side
            by[(r["client"], label)][int(rep)] = r
random.seed(1)
def ratio(a, b, label):
    reps = sorted(set(a) & set(b))
    if not reps:
        return
    tot = lambda d, s: sum(d[i]["tct_s"] for i in s)
    bs = sorted(tot(a, s) / tot(b, s) for s in ([random.choice(reps) for _ in reps] for _ in range(5000)))
    rt = lambda d: st.median(d[i]["retrans_segs"] for i in reps)
    print(f"{label:40s} n={len(reps)} {tot(a, reps) / tot(b, reps):.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] medians "
          f"{st.median(a[i]['tct_s'] for i in reps):.3f} / {st.median(b[i]['tct_s'] for i in reps):.3f} s; retrans {rt(a):.0f} / {rt(b):.0f}")
for c in dict.fromkeys(k[0] for k in by):
    ratio(by[(c, "main")], by[(c, "native")], c + " main / native")
    ratio(by[(c, "sample")], by[(c, "native")], c + " sample / native")
    ratio(by[(c, "sample")], by[(c, "main")], c + " sample / main")
