# Compare what crossed the server port (bridge namespace) with what the client saw (root
# namespace): data frames lost between the port and the client, ACKs lost between the client
# and the port (by OVS), and ACKs the port dropped (after its TC egress program).
import re, sys, collections, subprocess
pat = re.compile(r'^(\S+) (?:\S+\s+)?(In|Out|P|)\s*IP (\S+) > (\S+): Flags \[([^\]]*)\](?:, seq (\d+):(\d+))?(?:, ack (\d+))?, win (\d+)(.*)length (\d+)')
def load(path):
    out = subprocess.run(['tcpdump', '-r', path, '-tt', '-nn', '-S'], capture_output=True, text=True).stdout
    data = collections.Counter(); acks = collections.Counter(); t0 = t1 = None
    for line in out.splitlines():
        m = pat.match(line)
        if not m: continue
        t, d, src, dst, fl, s0, s1, ack, win, rest, ln = m.groups()
        t = float(t); t0 = t if t0 is None else t0; t1 = t
        tsv = re.search(r'TS val (\d+)', rest)
        if src.endswith('.9000'):
            if s0 and int(ln) > 0: data[(dst, s0, s1, tsv.group(1) if tsv else '')] += 1
        else:
            acks[(src, ack, win, rest.strip())] += 1
    return data, acks, t0, t1
cd, ca, c0, c1 = load(sys.argv[1])
pd, pa, p0, p1 = load(sys.argv[2])
print('client capture', len(cd), 'data', len(ca), 'acks; port capture', len(pd), 'data', len(pa), 'acks')
lost_data = sum(n for k, n in pd.items() if k not in cd)
extra_data = sum(n for k, n in cd.items() if k not in pd)
print('data frames at the port never seen by the client:', lost_data, ' seen by client, not at port:', extra_data)
# ACKs: the port rewrites windows (and strips SACK), so match on (flow, ack) multiset
cak = collections.Counter((k[0], k[1]) for k in ca.elements())
pak = collections.Counter((k[0], k[1]) for k in pa.elements())
miss = cak - pak
print('client ACKs (flow, ack) not seen leaving the port:', sum(miss.values()), 'of', sum(cak.values()))
# per flow, in time order: advancing client ACKs (a new highest ack number) missing at the port
def acks_in_order(path):
    out = subprocess.run(['tcpdump', '-r', path, '-tt', '-nn', '-S'], capture_output=True, text=True).stdout
    res = collections.defaultdict(list)
    for line in out.splitlines():
        m = pat.match(line)
        if not m: continue
        t, d, src, dst, fl, s0, s1, ack, win, rest, ln = m.groups()
        if not src.endswith('.9000') and ack:
            res[src].append((float(t), int(ack)))
    return res
ca2 = acks_in_order(sys.argv[1]); pa2 = acks_in_order(sys.argv[2])
lo = max(c0, p0) + 0.5; hi = min(c1, p1) - 0.5
adv_total = adv_missing = rep_total = rep_missing = 0
for flow, acks in ca2.items():
    port_acks = collections.Counter(a for t, a in pa2.get(flow, []))
    best = None
    for t, a in acks:
        advancing = best is None or (a - best) % 2**32 < 2**31 and a != best
        if advancing: best = a
        if not (lo <= t <= hi): continue
        if advancing:
            adv_total += 1
            if port_acks[a] == 0: adv_missing += 1
        else:
            rep_total += 1
            if port_acks[a] == 0: rep_missing += 1
print(f'advancing client ACKs (new highest ack) never seen at the port: {adv_missing} of {adv_total}; repeats never seen: {rep_missing} of {rep_total}')
