"""Usage: ratios.py RUN_DIR [VARIANT]. Paired ratios of mean TCT (by repetition, 5,000-resample
bootstrap 95% interval) of kernel:bbr and of the variant scheme VARIANT (default
kernel:bbr:lt_bw=0) against native:bbr, and of kernel:bbr against the variant, with the
medians and the median retransmissions per transfer of each."""
import json, random, statistics as st, collections, sys


def retrans(d):
    vals = [d[i].get("retrans_segs") for i in d if d[i].get("retrans_segs") is not None]
    return f"{st.median(vals):.0f}" if vals else "-"


def ratio(a, b, label, width=75):
    """a, b: rows by repetition. Prints the ratio of a's to b's mean TCT over the repetitions
    both have, its bootstrap interval, the medians and the median retransmissions."""
    reps = sorted(set(a) & set(b))
    if not reps:
        return
    tot = lambda d, s: sum(d[i]["tct_s"] for i in s)
    r = tot(a, reps) / tot(b, reps)
    bs = sorted(tot(a, s) / tot(b, s) for s in ([random.choice(reps) for _ in reps] for _ in range(5000)))
    print(f"{label:{width}s} n={len(reps)} {r:.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] medians "
          f"{st.median(a[i]['tct_s'] for i in reps):.3f} / {st.median(b[i]['tct_s'] for i in reps):.3f} s;"
          f" retrans {retrans(a)} / {retrans(b)}")


def alternated_runs(runs_dir, label):
    """Rows of the runs SIDE-N under runs_dir (builds alternated per repetition N), by
    (client, label(side, scheme)) and then N; only transfers whose file checked."""
    import glob, os
    by = collections.defaultdict(dict)
    for d in glob.glob(os.path.join(runs_dir, "*-*")):
        if not os.path.isdir(d) or not os.path.exists(d + "/transfers.jsonl"):
            continue
        side, rep = os.path.basename(d).rsplit("-", 1)
        for line in open(d + "/transfers.jsonl"):
            r = json.loads(line)
            if r.get("sha256_ok"):
                by[(r["client"], label(side, r["scheme"]))][int(rep)] = r
    return by


def rows_by_scheme(transfers_path):
    """Rows of one run's transfers.jsonl by (client, scheme) and then repetition; only
    transfers that finished and whose file checked."""
    by = collections.defaultdict(dict)
    for line in open(transfers_path):
        r = json.loads(line)
        if r.get("tct_s") and r.get("sha256_ok"):
            by[(r["client"], r["scheme"])][r["repetition"]] = r
    return by


if __name__ == "__main__":
    by = rows_by_scheme(sys.argv[1] + "/transfers.jsonl")
    random.seed(1)
    N, K = "native:bbr", "kernel:bbr"
    K0 = sys.argv[2] if len(sys.argv) > 2 else "kernel:bbr:lt_bw=0"
    for c in dict.fromkeys(k[0] for k in by):
        ratio(by[(c, K)], by[(c, N)], f"{c} {K} / native")
        ratio(by[(c, K0)], by[(c, N)], f"{c} {K0} / native")
        ratio(by[(c, K)], by[(c, K0)], f"{c} {K} / {K0}")
