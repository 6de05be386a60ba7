import re,sys
pat=re.compile(r'\s(\d+\.\d+): (tcp_probe|tcp_cong_state_set): (.*)')
kv=re.compile(r'(\w+)=(\S+)')
port=sys.argv[2]; a=float(sys.argv[3]); b=float(sys.argv[4])
t0=None; last=None; n=0
for line in open(sys.argv[1]):
    m=pat.search(line)
    if not m: continue
    d=dict(kv.findall(m.group(3)))
    if m.group(2)=='tcp_probe':
        if not d['dest'].endswith(':'+port) or not d['src'].endswith(':8080'): continue
    elif d.get('dport')!=port or d.get('sport')!='8080': continue
    t=float(m.group(1))
    if t0 is None: t0=t
    rt=t-t0
    if m.group(2)=='tcp_probe': n+=1
    if not (a<=rt<=b): continue
    if m.group(2)=='tcp_cong_state_set':
        print(f'{rt:8.3f} STATE {d["cong_state"]}'); continue
    cw=int(d['snd_cwnd']); infl=(int(d['snd_nxt'],16)-int(d['snd_una'],16))%2**32//1448
    key=(cw,d['ssthresh'])
    if key!=last:
        print(f'{rt:8.3f} cwnd {cw:3d} ssth {d["ssthresh"]:>10} inflight {infl:3d} srtt {int(d["srtt"])/1000:.1f} acks_since {n}')
        last=key; n=0
