"""Usage: item7_ratios.py RUN_DIR. kernel:X / native:X on UMTS and EVDO, paired by repetition
(5,000-resample bootstrap), with per-transfer times and retransmissions."""
import json, random, statistics as st, collections, sys
by = collections.defaultdict(dict)
for l in open(sys.argv[1] + "/transfers.jsonl"):
    r = json.loads(l)
    if r.get("tct_s") and r.get("sha256_ok"):
        by[(r["client"], r["scheme"])][r["repetition"]] = r
random.seed(1)
for c in ("umts", "evdo"):
    for alg in ("bbr", "cubic"):
        a, b = by[(c, "kernel:" + alg)], by[(c, "native:" + alg)]
        reps = sorted(set(a) & set(b))
        if not reps:  # a run of some of the algorithms only
            continue
        tot = lambda d, s: sum(d[i]["tct_s"] for i in s)
        bs = sorted(tot(a, s) / tot(b, s) for s in ([random.choice(reps) for _ in reps] for _ in range(5000)))
        print(f"{c} {alg}: n={len(reps)} {tot(a, reps) / tot(b, reps):.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] "
              f"medians {st.median(a[i]['tct_s'] for i in a):.2f} / {st.median(b[i]['tct_s'] for i in b):.2f} s; "
              f"retransmissions median {st.median(a[i]['retrans_segs'] for i in a):.0f} / {st.median(b[i]['retrans_segs'] for i in b):.0f}")
        print(f"    kernel {sorted(round(a[i]['tct_s'], 2) for i in a)}\n    native {sorted(round(b[i]['tct_s'], 2) for i in b)}")
