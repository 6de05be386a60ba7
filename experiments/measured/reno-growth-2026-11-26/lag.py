import json,sys,re,bisect
trace,flows,port=sys.argv[1],sys.argv[2],sys.argv[3]
pat=re.compile(r'\s(\d+\.\d+): tcp_probe: (.*)'); kv=re.compile(r'(\w+)=(\S+)')
probes=[]
for line in open(trace):
    m=pat.search(line)
    if not m or f'dest=198.18.0.1:{port} ' not in line: continue
    d=dict(kv.findall(m.group(2))); probes.append((float(m.group(1)),int(d['snd_cwnd'])))
ts=[p[0] for p in probes]
lags=[];prev=None;gaps=[]
for l in open(flows):
    d=json.loads(l)
    if d.get('event')!='report': continue
    t=d['dp_us']/1e6; c=d['cwnd_bytes']//1448
    if prev is not None and c!=prev and d['lost_packets']==0:
        i=bisect.bisect_right(ts,t)
        # next probe showing c
        j=i
        while j<len(probes) and probes[j][1]!=c and probes[j][0]-t<0.3: j+=1
        if j<len(probes) and probes[j][1]==c:
            lags.append(probes[j][0]-t)
            # ack count between report and that probe
            gaps.append(j-i)
    prev=c
import statistics as S
lags.sort()
print(port,'n',len(lags),'lag ms p10/p50/p90', [round(lags[int(q*len(lags))]*1000,1) for q in (0.1,0.5,0.9)], 'acks before applied p50', S.median(gaps))
