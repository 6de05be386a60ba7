"""Per flow of a tcp_probe trace: how much data is delivered after a recovery episode ends
(the kernel leaves TCP_CA_Recovery for Open) before the window first grows, in windows (the
window recovery left). Linux's Reno counts from the ACK that ends recovery and grows after one
window, less that ACK's segment; ccswitch's agent counts from its own estimate of the end.

    python3 recoveryend.py OUT.trace PORT...

Per episode: the window W after recovery, the segments delivered (snd_una's advance) between
the end of recovery and the first probe with a larger window, over W. Episodes cut short by
another loss before any growth are left out. Also the window at each loss (cwnd before the
cut), for comparison between schemes."""
import collections, re, statistics as S, sys

MSS = 1448
pat = re.compile(r'\s(\d+\.\d+): (tcp_probe|tcp_cong_state_set|tcp_retransmit_skb): (.*)')
kv = re.compile(r'(\w+)=(\S+)')
flows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    m = pat.search(line)
    if not m:
        continue
    t = float(m.group(1)); kind = m.group(2); d = dict(kv.findall(m.group(3)))
    if kind == 'tcp_probe':
        if not d['src'].endswith(':8080'):
            continue
        port = int(d['dest'].rsplit(':', 1)[1])
    else:
        if d.get('sport') != '8080':
            continue
        port = int(d['dport'])
    flows[port].append((t, kind, d))

for port in [int(p) for p in sys.argv[2:]]:
    state = 0; cw = 10; una = None
    ratios = []; at_loss = []
    end = None  # (window after recovery, snd_una at its end) while waiting for the first growth
    for t, kind, d in flows[port]:
        if kind == 'tcp_probe':
            cw = int(d['snd_cwnd']); una = int(d['snd_una'], 16)
            if end is not None and state == 0:
                if end[0] is None:
                    end = (cw, una)
                elif cw > end[0]:
                    ratios.append(((una - end[1]) % 2**32 / MSS) / end[0])
                    end = None
        elif kind == 'tcp_cong_state_set':
            new = int(d['cong_state'])
            if new in (3, 4) and state not in (3, 4):
                at_loss.append(cw)
                end = None
            if state in (3, 4) and new == 0:
                end = (None, None)
            state = new
    print(f'port {port}: {len(ratios)} episodes; delivered after recovery before the first growth, '
          f'in windows: median {S.median(ratios):.3f} mean {S.mean(ratios):.3f}; '
          f'cwnd at loss median {S.median(at_loss)}')
