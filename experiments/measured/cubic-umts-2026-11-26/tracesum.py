"""Summarise a tcp_probe trace per flow: where slow start ends, the first loss, progress."""
import re,sys,json,collections
pat=re.compile(r'\s(\d+\.\d+): (tcp_probe|tcp_cong_state_set|tcp_retransmit_skb): (.*)')
kv=re.compile(r'(\w+)=(\S+)')
flows=collections.OrderedDict()
for line in open(sys.argv[1]):
    m=pat.search(line)
    if not m: continue
    t=float(m.group(1)); kind=m.group(2); d=dict(kv.findall(m.group(3)))
    if kind=='tcp_probe':
        port=int(d['dest'].rsplit(':',1)[1])
    else:
        port=int(d.get('dport',0))
        if d.get('sport')!='8080': continue
    f=flows.setdefault(port,[])
    f.append((t,kind,d))
ports=None
if len(sys.argv)>2:
    ports={int(p):lab for p,lab in (x.split('=') for x in sys.argv[2:])}
for port,evs in flows.items():
    if ports and port not in ports: continue
    t0=evs[0][0]; isn=None
    ss_exit=None; first_state=None; cw_hist=[]; rtx=0; maxcw=0
    progress={}
    for t,kind,d in evs:
        rt=t-t0
        if kind=='tcp_probe':
            una=int(d['snd_una'],16); cw=int(d['snd_cwnd']); sst=int(d['ssthresh'])
            if isn is None: isn=una
            acked=(una-isn)%2**32
            maxcw=max(maxcw,cw)
            if ss_exit is None and sst<2147483647:
                ss_exit=(rt,cw,sst)
            for mark in (0.5,1,1.5,2,3,4,6,8):
                if rt>=mark and mark not in progress: progress[mark]=acked
            cw_hist.append((rt,cw,sst,int(d['srtt'])))
        elif kind=='tcp_cong_state_set':
            st=int(d['cong_state'])
            if st in (3,4) and first_state is None: first_state=(rt,st)
        elif kind=='tcp_retransmit_skb':
            rtx+=1
    lab=ports.get(port,'') if ports else ''
    print(f"port {port} {lab}: ssthresh first set at {ss_exit and '%.3fs cwnd %d ssthresh %d'%ss_exit}; first recovery/loss state {first_state}; retransmits {rtx}; max cwnd {maxcw}")
    print("   acked MB at", {k:round(v/1e6,3) for k,v in progress.items()})
    # cwnd at some times
    marks=[0.3,0.5,0.75,1.0,1.25,1.5,2,2.5,3,4,5]
    out=[];i=0
    for mk in marks:
        while i<len(cw_hist)-1 and cw_hist[i+1][0]<=mk: i+=1
        if cw_hist and cw_hist[i][0]<=mk: out.append(f"{mk}:{cw_hist[i][1]}/{cw_hist[i][2] if cw_hist[i][2]<2**31-1 else 'inf'}")
    print("   cwnd/ssthresh", ' '.join(out))
