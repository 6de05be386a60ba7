"""Per flow of a tcp_probe trace: how late each step of congestion avoidance comes. For each
growth of the window by one segment outside Recovery, the segments delivered (snd_una's
advance) since the window last changed, less that window: about 0 when the step comes on the
ACK that earns it (-1..+3 with delayed ACKs and the credit a step leaves over), a round's
worth when it waited for a report.

    python3 latesteps.py OUT.trace PORT...

Prints the distribution from -3 to 8 segments and how many steps came 4 or more late."""
import collections, re, sys

MSS = 1448
pat = re.compile(r'\s(\d+\.\d+): (tcp_probe|tcp_cong_state_set): (.*)')
kv = re.compile(r'(\w+)=(\S+)')
flows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = pat.search(line)
    if not m:
        continue
    d = dict(kv.findall(m.group(3)))
    if m.group(2) == 'tcp_probe':
        if not d['src'].endswith(':8080'):
            continue
        port = d['dest'].rsplit(':', 1)[1]
    else:
        if d.get('sport') != '8080':
            continue
        port = d['dport']
    flows[port].append((m.group(2), d))

for port in sys.argv[2:]:
    state = 0; base = None; late = collections.Counter()
    for kind, d in flows[port]:
        if kind == 'tcp_cong_state_set':
            state = int(d['cong_state']); base = None
            continue
        cwnd = int(d['snd_cwnd']); una = int(d['snd_una'], 16)
        if state != 0:
            base = None
        elif base is None or cwnd not in (base[0], base[0] + 1):
            base = (cwnd, una)
        elif cwnd == base[0] + 1:
            late[(una - base[1]) % 2**32 // MSS - base[0]] += 1
            base = (cwnd, una)
    steps = sum(late.values()); at_least_4 = sum(n for k, n in late.items() if k >= 4)
    print(f'port {port}: {steps} steps, {at_least_4} came 4 or more segments late; '
          f'by lateness {dict((k, late.get(k, 0)) for k in range(-3, 9))}')
