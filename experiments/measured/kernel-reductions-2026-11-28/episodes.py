"""Each kernel:reno transfer of a run, from the agent's reports (the run's flows/*.jsonl): the
agent's cuts (window before -> after @ ms from the first report), the kernel's window
reductions as the reports carry them (K#count @ ms, with the segments in flight), and the
ends of the kernel's reductions (Kend), over the first 1.5 s.
Usage: episodes.py RUN_DIR"""
import json,sys,glob
for f in sorted(glob.glob(sys.argv[1]+'/flows/*kernel_reno-rep*.jsonl'), key=lambda p:int(p.split('rep')[-1].split('.')[0])):
    rows=[json.loads(l) for l in open(f)]
    rep=[r for r in rows if r['event']=='report']
    t0=rep[0]['dp_us']; prev=None; prevred=None; previn=None; out=[]
    for r in rep:
        c=r['cwnd_bytes']//1448; red=r.get('sender_reductions'); inr=r.get('sender_in_reduction')
        t=(r['dp_us']-t0)/1000
        if prev is not None and c<prev: out.append(f"cut {prev}->{c}@{t:.0f}")
        if red!=prevred: out.append(f"K#{red}@{t:.0f}(infl {r['bytes_in_flight']//1448})")
        if previn and not inr: out.append(f"Kend@{t:.0f}")
        prev=c; prevred=red; previn=inr
        if t>1500: break
    print(f.split('-rep')[-1].split('.')[0], ' '.join(out))
