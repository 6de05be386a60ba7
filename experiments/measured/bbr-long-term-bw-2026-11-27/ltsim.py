"""Usage: ltsim.py FLOW_LOG. Replays a kernel:bbr flow log's reports (agent flows/*.jsonl) through
the long-term bandwidth estimator's rules, rounds by time (min_rtt), and prints each interval
it closes (time s, rate Mbit/s, loss fraction, previous rate) and when a policer is found."""
import json,sys
rows=[json.loads(l) for l in open(sys.argv[1])]
rows=[r for r in rows if r.get('event')=='report']
t0=rows[0]['dp_us']; mss=1448
minrtt=None; round_start=None; delivered=0; lost=0
lt=dict(sampling=False,in_use=False,bw=0,rounds=0,start=0,sd=0,sl=0)
events=[]
def start_iv(now):
    lt.update(start=now,sd=delivered,sl=lost,rounds=0)
for r in rows:
    now=r['dp_us']
    if r['rtt_us']: minrtt = r['rtt_us'] if minrtt is None else min(minrtt, r['rtt_us'])
    delivered+=r['acked_bytes']; lost+=r['lost_packets']*mss
    rs = round_start is None or (now-round_start>=minrtt)
    if rs: round_start=now
    l = r['lost_packets']>0 or r['timeout']
    if lt['in_use']: continue
    if not lt['sampling']:
        if not l: continue
        start_iv(now); lt['sampling']=True
    if rs: lt['rounds']+=1
    if lt['rounds']<4: continue
    if lt['rounds']>16:
        events.append((round((now-t0)/1e6,2),'reset>16')); lt.update(sampling=False,bw=0); start_iv(now); continue
    if not l: continue
    d=delivered-lt['sd']; lo=lost-lt['sl']; el=now-lt['start']
    if d==0 or lo < 50/256*d or el<1000:
        continue
    bw=d*1e6/el
    events.append((round((now-t0)/1e6,2),'interval', round(bw*8/1e6,2), 'loss', round(lo/d,2), 'prev', round(lt['bw']*8/1e6,2)))
    if lt['bw'] and (abs(bw-lt['bw'])<=lt['bw']/8):
        lt['bw']=(bw+lt['bw'])/2; lt['in_use']=True; events.append(('IN USE', round(lt['bw']*8/1e6,2)))
        continue
    lt['bw']=bw; start_iv(now)
print(sys.argv[1].split('/')[-1][:45], 'total lost', lost//mss, 'delivered', delivered//mss)
for e in events: print('  ', e)
