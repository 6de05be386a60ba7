"""Every 25 ms of a transfer (400-1,300 ms): the sender's window/ssthresh/segments in flight/
kernel congestion state, from OUT/trace.txt (run.sh). Run in OUT: python3 cwnd_series.py
Each entry: ms:cwnd/ssthresh/segments in flight (snd_nxt - snd_una)/s<state>."""
import json, re

tr={}
for l in open('run/transfers.jsonl'):
    d=json.loads(l); tr[(d['scheme'],d['repetition'])]=d['client_port']
def series(scheme,rep,lo=400,hi=1300,step=25):
    port=tr[(scheme,rep)]
    t0=None; nextp=lo; state=0; out=[]
    for line in open('trace.txt'):
        if f':{port} ' not in line and f'dport={port} ' not in line: continue
        m=re.match(r"\s*([\d.]+):\s+tcp:(\w+):\s+(.*)",line)
        t=float(m.group(1)); f=dict(kv.split('=',1) for kv in m.group(3).split() if '=' in kv)
        if m.group(2)=='tcp_probe':
            if not f['src'].endswith(':8080'): continue
            t0=t0 or t; ms=(t-t0)*1e3
            if ms>=nextp and ms<hi:
                inflight=(int(f['snd_nxt'],16)-int(f['snd_una'],16))%2**32//1448
                out.append(f"{ms:6.0f}:{f['snd_cwnd']}/{f['ssthresh']}/{inflight}/s{state}"); nextp=ms+step
        else:
            if int(f['sport'])==8080: state=int(f['cong_state'])
    print(scheme,rep,' '.join(out))
for s,r in [('kernel:reno',2),('native:reno',2),('kernel:reno',4),('native:reno',4)]:
    series(s,r)
