import json,random,statistics as st,collections,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
by=collections.defaultdict(dict)
for r in rows:
    if r.get('tct_s') is None: continue
    by[(r['client'],r['scheme'])][r['repetition']]=r['tct_s']
random.seed(1)
def ratio(a,b,label):
    reps=sorted(set(a)&set(b))
    r=sum(a[i] for i in reps)/sum(b[i] for i in reps)
    bs=[]
    for _ in range(5000):
        s=[random.choice(reps) for _ in reps]
        bs.append(sum(a[i] for i in s)/sum(b[i] for i in s))
    bs.sort()
    print(f"{label:50s} n={len(reps)} {r:.3f} [{bs[125]:.3f}, {bs[-126]:.3f}] medians {st.median(a.values()):.3f} / {st.median(b.values()):.3f}")
alt=sys.argv[2]
for c in sorted({k[0] for k in by}):
    n=by[(c,'native:bbr')]; k=by[(c,'kernel:bbr')]; o=by[(c,alt)]
    ratio(k,n,c+' kernel:bbr / native')
    ratio(o,n,c+' '+alt+' / native')
    ratio(k,o,c+' kernel:bbr / '+alt)
