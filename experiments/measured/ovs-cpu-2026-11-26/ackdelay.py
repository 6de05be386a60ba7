import re, sys, collections
# per flow: data segments in (server->client) and ACKs out; ACK delay = first ACK covering a segment's end - its arrival
pat = re.compile(r'^(\S+) \S+\s+(In|Out)\s+IP (\S+) > (\S+): Flags \[([^\]]*)\](?:, seq (\d+):(\d+))?(?:, ack (\d+))?, win (\d+)(.*)length (\d+)')
flows = collections.defaultdict(lambda: {'segs': [], 'acks': []})
for line in open(sys.argv[1]):
    m = pat.match(line)
    if not m: continue
    t, d, src, dst, fl, s0, s1, ack, win, rest, ln = m.groups()
    t = float(t)
    if src.endswith('.9000'):
        if s0 and int(ln) > 0:
            flows[dst]['segs'].append((t, int(s0), int(s1)))
    else:
        sack = re.findall(r'\{(\d+):(\d+)\}', rest)
        flows[src]['acks'].append((t, int(ack), int(win), sack))
delays = []; dup = 0; total = 0; dsacks = 0; gaps = []
for k, f in flows.items():
    seen = set()
    acks = f['acks']
    for a in acks:
        if a[3] and (int(a[3][0][1]) - int(a[3][0][0])) and (int(a[3][0][0]) - a[1]) % 2**32 > 2**31: dsacks += 1
    for (t, s0, s1) in f['segs']:
        total += 1
        if (s0, s1) in seen:
            dup += 1; continue
        seen.add((s0, s1))
        for (ta, an, w, sk) in acks:
            if ta >= t and (an - s1) % 2**32 < 2**31:
                delays.append(ta - t); break
delays.sort()
n = len(delays)
q = lambda p: delays[min(n-1, int(p*n))]*1000
print(f"flows {len(flows)} segs {total} dup arrivals {dup} dsack-acks {dsacks} acked {n}")
print("ack delay ms p10 %.1f p25 %.1f p50 %.1f p75 %.1f p90 %.1f p99 %.1f max %.1f" % (q(.1), q(.25), q(.5), q(.75), q(.9), q(.99), delays[-1]*1000))
for lim in (0.002, 0.01, 0.02, 0.05, 0.1, 0.2):
    print(f" > {lim*1000:g} ms: {sum(1 for x in delays if x > lim)/n:.1%}")
