import re, sys, collections
pat = re.compile(r'^(\S+) \S+\s+(In|Out)\s+IP (\S+) > (\S+): Flags \[([^\]]*)\](?:, seq (\d+):(\d+))?(?:, ack (\d+))?, win (\d+)(.*)length (\d+)')
flows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = pat.match(line)
    if not m: continue
    t, d, src, dst, fl, s0, s1, ack, win, rest, ln = m.groups()
    if src.endswith('.9000') and s0 and int(ln) > 0:
        tsv = re.search(r'TS val (\d+)', rest)
        flows[dst].append((float(t), int(s0), int(s1), int(tsv.group(1))))
c = collections.Counter()
for k, segs in flows.items():
    first = {}; maxts = None
    for (t, s0, s1, tv) in segs:
        key = (s0, s1)
        copy = key in first and first[key] == tv
        kind = 'copy of an earlier frame' if copy else ('server retransmission' if key in first else 'first arrival')
        stale = maxts is not None and (maxts - tv) % 2**32 < 2**31 and maxts - tv > 1
        c[(kind, 'TSval stale (PAWS)' if stale else 'TSval fresh')] += 1
        if key not in first: first[key] = tv
        if maxts is None or (tv - maxts) % 2**32 < 2**31: maxts = tv
for k, v in sorted(c.items()): print(k, v)
