# Medians [min, max] of each build's runs: python3 summarize.py NAME:run,run,... ...
# Reads the run directories run.sh wrote (/tmp/ovs-shim-copies-runs, or runs/ here, which keeps
# each run's scale.json, the shim's stats without buffer samples, and the counter snapshots).
# With 6 runs, [min, max] covers the median with 97% confidence (binomial order statistics);
# with 3, 75%.
import json, os, statistics, sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOTS = ['/tmp/ovs-shim-copies-runs', os.path.join(HERE, 'runs')]


def path(run, name):
    for root in ROOTS:
        p = os.path.join(root, run, name)
        if os.path.exists(p):
            return p
    raise FileNotFoundError(f'{run}/{name}')


def netstat(run, when):
    head, vals = open(path(run, f'netstat-client-{when}.txt')).read().split('\n')[:2]
    return dict(zip(head.split()[1:], map(int, vals.split()[1:])))


def figures(run):
    d = json.load(open(path(run, 'scale.json')))
    try:
        st = json.load(open(path(run, 'shim-stats.json')))
    except FileNotFoundError:
        st = json.load(open(path(run, 'logs/ovs/001-scale.json')))
    sh, dp = st['shim'], st['datapath']
    a, b = netstat(run, 'start'), netstat(run, 'end')
    ovs = [open(path(run, f'ovs-vswitchd-stat-{w}.txt')).read().split('\n') for w in ('start', 'end')]
    wall = float(ovs[1][0]) - float(ovs[0][0])
    ticks = [sum(int(x) for x in o[1].split(')')[-1].split()[11:13]) for o in ovs]
    return {
        'shim % of a core': d['shim_cpu_pct'],
        'agent % of a core': d['agent_cpu_pct'],
        'egress ns per packet': d['bpf_ns_per_packet_egress'],
        'ingress ns per packet': d['bpf_ns_per_packet_ingress'],
        'flows fallen back (window)': d['flows_fallen_back'],
        'flows fallen back (whole run)': d['flows_fallen_back_whole_run'],
        'corrupt flows': d['flows_corrupt'],
        'goodput Mbit/s': d['goodput_mbps'],
        'flows below half their rate': d['flows_below_half_rate'],
        'urgent report -> directive p99 us': d['urgent_p99_us'],
        'segments copied /s': d['segments_copied_per_s'],
        'shim copies seen, per run': dp.get('copies_seen', 0),
        'server retransmissions not copied, per run': dp['resent'],
        'shim retransmissions per run': sh['retransmissions']['total'],
        'shim timeouts per run': sh['timeouts'],
        'D-SACKs seen by the shim per run': sh['dsacks'],
        'server retransmissions /s': d['server_tcp_per_s']['RetransSegs'],
        'client: copies dropped by PAWS /s': (b['PAWSEstab'] - a['PAWSEstab']) / wall,
        'client: duplicates received /s': (b['TCPDSACKOldSent'] - a['TCPDSACKOldSent']) / wall,
        'ovs-vswitchd % of a core': (ticks[1] - ticks[0]) / os.sysconf('SC_CLK_TCK') / wall * 100,
        'machine busy %': d['machine_cpu_busy_pct'],
        'fallback reasons (window)': d['fallback_reasons'],
    }


def main(args):
    builds = [(a.split(':')[0], a.split(':')[1].split(',')) for a in args]
    table = {name: [figures(r) for r in runs] for name, runs in builds}
    keys = list(next(iter(table.values()))[0])
    print('| | ' + ' | '.join(f'{n} (n={len(table[n])})' for n, _ in builds) + ' |')
    print('|---|' + '---|' * len(builds))
    for k in keys:
        cells = []
        for n, _ in builds:
            vals = [f[k] for f in table[n]]
            if isinstance(vals[0], dict):
                cells.append('; '.join(json.dumps(v) for v in vals))
            else:
                fmt = (lambda v: f'{v:,.1f}') if max(vals) < 100 else (lambda v: f'{v:,.0f}')
                cells.append(f'{fmt(statistics.median(vals))} [{fmt(min(vals))}, {fmt(max(vals))}]')
        print(f'| {k} | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
    main(sys.argv[1:])
