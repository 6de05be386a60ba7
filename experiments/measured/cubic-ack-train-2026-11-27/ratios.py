"""Usage: ratios.py RUN_DIR NSTAT_FILE[.gz]. Paired ratios of mean TCT (by repetition, 5000-resample bootstrap) for the ACK-train A/B,
and per native transfer the HyStart counters that moved during it (nstat samples)."""
import json, random, statistics as st, collections, sys, datetime, gzip
rows = [json.loads(l) for l in open(sys.argv[1] + "/transfers.jsonl")]
by = collections.defaultdict(dict)
for r in rows:
    if r.get("tct_s") is not None and r.get("sha256_ok"):
        by[(r["client"], r["scheme"])][r["repetition"]] = r
random.seed(1)
def ratio(a, b, label):
    reps = sorted(set(a) & set(b))
    tot = lambda d, s: sum(d[i]["tct_s"] for i in s)
    r = tot(a, reps) / tot(b, reps)
    bs = sorted(tot(a, s) / tot(b, s) for s in ([random.choice(reps) for _ in reps] for _ in range(5000)))
    print(f"{label:58s} n={len(reps)} {r:.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] medians "
          f"{st.median(a[i]['tct_s'] for i in a):.3f} / {st.median(b[i]['tct_s'] for i in b):.3f}")
N, K, K0 = "native:cubic", "kernel:cubic", "kernel:cubic:hystart_ack_train=0"
for c in dict.fromkeys(k[0] for k in by):
    ratio(by[(c, K)], by[(c, N)], f"{c} train / native")
    ratio(by[(c, K0)], by[(c, N)], f"{c} no-train / native")
    ratio(by[(c, K)], by[(c, K0)], f"{c} train / no-train")
# HyStart counters of the server namespace, moved during each native transfer
samples = []
for line in (gzip.open(sys.argv[2], "rt") if sys.argv[2].endswith(".gz") else open(sys.argv[2])):
    p = line.split()
    if len(p) > 2:
        samples.append((float(p[1]), dict(kv.split("=") for kv in p[2:])))
def at(t):
    best = None
    for ts, d in samples:
        if ts <= t: best = d
    return best
print("\nper transfer: tct, retrans, HyStart exits during it (train / delay), exit cwnd")
for c in dict.fromkeys(k[0] for k in by):
    for scheme in (N, K, K0):
        for rep, r in sorted(by[(c, scheme)].items()):
            t0 = datetime.datetime.fromisoformat(r["started_at"]).timestamp()
            a, b = at(t0), at(t0 + r["wall_s"] + 0.6)
            d = {k: int(b[k]) - int(a[k]) for k in b} if a and b else {}
            mark = ""
            if scheme == N and d:
                tr, dl = d.get("TcpExtTCPHystartTrainDetect", 0), d.get("TcpExtTCPHystartDelayDetect", 0)
                cw = d.get("TcpExtTCPHystartTrainCwnd", 0) + d.get("TcpExtTCPHystartDelayCwnd", 0)
                mark = f"train {tr} delay {dl} cwnd {cw}"
            print(f"  {c:22s} {scheme:34s} rep {rep}: {r['tct_s']:7.3f} s  retrans {r.get('retrans_segs')}  {mark}")
