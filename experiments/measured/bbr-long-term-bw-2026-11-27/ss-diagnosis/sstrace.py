import re, sys
cur=None; last=None; start=None
for l in open(sys.argv[1]):
    if l.startswith('T '):
        cur=float(l.split()[1]); continue
    if 'cwnd:' not in l or 'rtt:' not in l: continue
    state = l.split()[0] if not l.startswith('\t') else None
    m=re.search(r'bbr:\(bw:([0-9.]+)([KMG]?)bps,mrtt:([0-9.]+)(?:,pacing_gain:([0-9.]+))?',l)
    cw=re.search(r'cwnd:(\d+)',l); ret=re.search(r'retrans:\d+/(\d+)',l); pr=re.search(r'pacing_rate ([0-9.]+)([KMG]?)bps',l)
    cc = l.split()[0]
    bw = float(m.group(1))*{'':1,'K':1e3,'M':1e6,'G':1e9}[m.group(2)]/1e6 if m else None
    pace = float(pr.group(1))*{'':1,'K':1e3,'M':1e6,'G':1e9}[pr.group(2)]/1e6 if pr else None
    gain = m.group(4) if m else None
    key=(cc, bw and round(bw,1), gain, pace and round(pace,0))
    if key!=last:
        print(f"{cur%1000:9.3f} {cc:5s} bw {bw if bw is None else round(bw,2)} gain {gain} pace {pace if pace is None else round(pace,2)} cwnd {cw.group(1)} retr {ret.group(1) if ret else 0}")
        last=key
