import re,sys
pat=re.compile(r'\s(\d+\.\d+): tcp_probe: (.*)')
kv=re.compile(r'(\w+)=(\S+)')
def series(path,port):
    t0=None; out=[]; isn=None
    for line in open(path):
        m=pat.search(line)
        if not m or f':{port} ' not in line: continue
        t=float(m.group(1)); d=dict(kv.findall(m.group(2)))
        if t0 is None: t0=t
        una=int(d['snd_una'],16)
        if isn is None: isn=una
        out.append((t-t0,int(d['snd_cwnd']),(una-isn)%2**32,(int(d['snd_nxt'],16)-una)%2**32//1448))
    return out
def at(s,mk):
    r=None
    for x in s:
        if x[0]<=mk: r=x
        else: break
    return r
path=sys.argv[1]; ports=sys.argv[2:]
S=[series(path,p) for p in ports]
step=float(__import__('os').environ.get('STEP','0.25')); end=float(__import__('os').environ.get('END','6'))
print('t    '+'  '.join(f'{p:>18}' for p in ports))
mk=0.0
while mk<=end:
    row=[]
    for s in S:
        r=at(s,mk)
        row.append(f'{r[1]:4d} {r[3]:4d} {r[2]/1e3:8.1f}' if r else ' '*18)
    print(f'{mk:5.2f} '+'  '.join(row))
    mk=round(mk+step,3)
