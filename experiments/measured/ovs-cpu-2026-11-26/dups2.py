import re, sys, collections
pat = re.compile(r'^(\S+) \S+\s+(In|Out)\s+IP (\S+) > (\S+): Flags \[([^\]]*)\](?:, seq (\d+):(\d+))?(?:, ack (\d+))?, win (\d+)(.*)length (\d+)')
flows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = pat.match(line)
    if not m: continue
    t, d, src, dst, fl, s0, s1, ack, win, rest, ln = m.groups()
    t = float(t)
    if src.endswith('.9000'):
        if s0 and int(ln) > 0:
            tv = int(re.search(r'TS val (\d+)', rest).group(1))
            flows[dst].append(('D', t, int(s0), int(s1), tv))
    else:
        flows[src].append(('A', t, int(ack)))
lt = lambda a, b: (a - b) % 2**32 > 2**31
res = collections.defaultdict(list)
for k, evs in flows.items():
    first = {}; acks = []
    for e in evs:
        if e[0] == 'A': acks.append((e[1], e[2])); continue
        _, t, s0, s1, tv = e
        key = (s0, s1)
        if key in first:
            who = 'shim' if first[key][1] == tv else 'server'
            cov = next((ta for ta, an in acks if not lt(an, s1)), None)
            if cov is None: res[who + ', not acked yet'].append((t - first[key][0]) * 1000)
            else: res[who + ', acked'].append((t - cov) * 1000)
        else: first[key] = (t, tv)
for k, g in sorted(res.items()):
    g.sort(); n = len(g)
    print(k, n, 'ms since the covering ACK (or since the original) p10 %.1f p50 %.1f p90 %.1f' % (g[n//10], g[n//2], g[9*n//10]))
