"""Usage: ratios.py RUNS_DIR. Runs main-N (native:bbr, kernel:bbr on main's fold) and
sample-N (kernel:bbr with Linux's rate sample) alternated per repetition N: ratio of mean TCT,
paired by N, 5,000-resample bootstrap 95% interval; medians; median retransmissions."""
import json, glob, os, random, sys, collections

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ratios import ratio  # noqa: E402
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
for c in dict.fromkeys(k[0] for k in by):
    ratio(by[(c, "main")], by[(c, "native")], c + " main / native", 40)
    ratio(by[(c, "sample")], by[(c, "native")], c + " sample / native", 40)
    ratio(by[(c, "sample")], by[(c, "main")], c + " sample / main", 40)
