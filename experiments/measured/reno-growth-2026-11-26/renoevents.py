"""Per flow of a tcp_probe trace: loss episodes (state entries), the window before and after each,
time in Recovery/Loss, time-weighted mean cwnd, and congestion-avoidance growth per RTT."""
import re, sys, collections
pat = re.compile(r'\s(\d+\.\d+): (tcp_probe|tcp_cong_state_set|tcp_retransmit_skb): (.*)')
kv = re.compile(r'(\w+)=(\S+)')
flows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = pat.search(line)
    if not m: continue
    t = float(m.group(1)); kind = m.group(2); d = dict(kv.findall(m.group(3)))
    if kind == 'tcp_probe':
        if not d['src'].endswith(':8080'): continue
        port = int(d['dest'].rsplit(':', 1)[1])
    else:
        if d.get('sport') != '8080': continue
        port = int(d['dport'])
    flows[port].append((t, kind, d))
want = [int(p) for p in sys.argv[2:]]
for port in want:
    evs = flows[port]
    t0 = evs[0][0]; state = 0; cw = 10; sst = None; last_t = t0
    area = 0.0; entries = collections.Counter(); in_rec = collections.Counter(); rtx = 0
    episodes = []; cur = None; ca_growth = []; ca_start = None; srtt = 50000
    for t, kind, d in evs:
        dt = t - last_t; area += cw * dt; in_rec[state] += dt; last_t = t
        if kind == 'tcp_probe':
            cw = int(d['snd_cwnd']); sst = int(d['ssthresh']); srtt = int(d['srtt'])
            if cur and cur.get('after') is None and state == 0:
                cur['after'] = cw
            if state == 0 and sst < 2**31 - 1:
                if ca_start is None: ca_start = (t, cw)
        elif kind == 'tcp_cong_state_set':
            new = int(d['cong_state'])
            if new in (3, 4) and state != new:
                entries[new] += 1
                if ca_start is not None and t - ca_start[0] > 0.2:
                    ca_growth.append((cw - ca_start[1]) / ((t - ca_start[0]) / (srtt / 1e6)))
                ca_start = None
                cur = {'t': t - t0, 'state': new, 'before': cw, 'after': None}
                episodes.append(cur)
            if new == 0: ca_start = None
            state = new
        else:
            rtx += 1
    dur = last_t - t0
    print(f'port {port}: {dur:.1f} s, mean cwnd {area/dur:.1f}, rtx {rtx}, entries {dict(entries)}, '
          f'time by state { {k: round(v,1) for k,v in sorted(in_rec.items())} }')
    import statistics as S
    rat = [e['after'] / e['before'] for e in episodes if e['after'] and e['before']]
    print(f'   after/before median {S.median(rat):.3f}  mean {S.mean(rat):.3f}; CA growth seg/RTT median {S.median(ca_growth):.3f} mean {S.mean(ca_growth):.3f} (n={len(ca_growth)})')
    print('   first episodes:', [(round(e['t'],2), e['state'], e['before'], e['after']) for e in episodes[:12]])
