# Per run: the client's PAWS rejections and duplicates (TcpExt, over ~8 s of the window),
# ovs-vswitchd's CPU (% of one core) and the bridge namespace's packet-socket drops.
import sys, re, os, statistics
R = '/tmp/ovs-cpu-runs'
def netstat(p):
    l = open(p).read().split('\n'); h = l[0].split(); v = l[1].split()
    return dict(zip(h[1:], map(int, v[1:])))
def ovs(p):
    l = open(p).read().split('\n'); t = float(l[0]); f = l[1].split(') ')[1].split()
    return t, (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
def drops(p):
    return sum(int(x) for x in re.findall(r',d(\d+)\)', open(p).read()))
def extra(run):
    d = f'{R}/{run}'
    a, b = netstat(f'{d}/netstat-client-start.txt'), netstat(f'{d}/netstat-client-end.txt')
    (t0, c0), (t1, c1) = ovs(f'{d}/ovs-vswitchd-stat-start.txt'), ovs(f'{d}/ovs-vswitchd-stat-end.txt')
    dt = t1 - t0
    return {
        'client_paws_rejected_per_s': (b['PAWSEstab'] - a['PAWSEstab']) / dt,
        'client_dups_received_per_s': (b['TCPDSACKOldSent'] - a['TCPDSACKOldSent']) / dt,
        'ovs_vswitchd_cpu_pct': 100 * (c1 - c0) / dt,
        'packet_socket_drops_per_s': (drops(f'{d}/packet-sockets-end.txt') - drops(f'{d}/packet-sockets-start.txt')) / dt,
    }
for arg in (sys.argv[1:] if __name__ == "__main__" else []):
    name, runs = arg.split(':')
    es = [extra(r) for r in runs.split(',')]
    print(f'== {name}')
    for k in es[0]:
        v = [e[k] for e in es]
        print(f'  {k:30s} median {statistics.median(v):9.1f}  range [{min(v):.1f}, {max(v):.1f}]')
