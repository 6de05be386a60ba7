import re, sys
cur=None; state=None; flows=[]; last_cc=None
def num(pat, l, conv=float):
    m=re.search(pat, l); return conv(m.group(1)) if m else None
for l in open(sys.argv[1]):
    if l.startswith('T '): cur=float(l.split()[1]); continue
    if not l.startswith('\t'): state=l.split()[0]; continue
    if state=='LISTEN' or 'rtt:' not in l: continue
    cc=l.split()[0]
    if cc!=last_cc or not flows or cur-flows[-1][-1][0]>3:
        flows.append([]); last_cc=cc
    bwm=re.search(r'bbr:\(bw:([0-9.]+)([KMG]?)bps,mrtt:([0-9.]+)(?:,pacing_gain:([0-9.]+))?(?:,cwnd_gain:([0-9.]+))?',l)
    bw=float(bwm.group(1))*{'':1,'K':1e3,'M':1e6,'G':1e9}[bwm.group(2)]/1e6 if bwm else None
    flows[-1].append((cur, state, cc, num(r'cwnd:(\d+)',l,int), bw, bwm.group(3) if bwm else None, bwm.group(4) if bwm else None,
                      num(r'unacked:(\d+)',l,int), num(r'retrans:\d+/(\d+)',l,int), num(r'lost:(\d+)',l,int), num(r' rtt:([0-9.]+)',l), num(r'pacing_rate ([0-9.]+)',l)))
which=int(sys.argv[2]); step=float(sys.argv[3]) if len(sys.argv)>3 else 0.2
f=flows[which]; t0=f[0][0]; nxt=0
print(len(flows), 'flows', [ (x[0][2], round(x[-1][0]-x[0][0],1)) for x in flows])
for r in f:
    t=r[0]-t0
    if t>=nxt:
        print(f"{t:7.2f} {r[1]:10s} cwnd {r[3]} bw {r[4] and round(r[4],2)} mrtt {r[5]} gain {r[6]} unacked {r[7]} retr {r[8]} lost {r[9]} rtt {r[10]} pace {r[11] and round(r[11]/1e6,2)}")
        nxt=t+step
