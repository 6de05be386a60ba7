# Markdown table of medians [min, max] per build: table.py NAME:run,run,... ...
import sys, statistics, json
ARGS = sys.argv[1:]
sys.path.insert(0, '/tmp/ovs-cpu-runs')
from summarize import figures
from extra import extra
rows = [
    ('shim % of a core', 'shim_cpu_pct', 1), ('agent % of a core', 'agent_cpu_pct', 1),
    ('egress ns per packet', 'egress_ns', 0), ('ingress ns per packet', 'ingress_ns', 0),
    ('flows fallen back in the window', 'flows_fallen_back', 0), ('corrupt flows', 'corrupt', 0),
    ('goodput Mbit/s (1,000 offered)', 'goodput_mbps', 0), ('flows below half their rate', 'flows_below_half_rate', 0),
    ('shim retransmissions per run', 'shim_retx_run', 0), ('shim timeouts per run', 'shim_timeouts_run', 0),
    ('D-SACKs seen by the shim per run', 'dsacks_run', 0),
    ('server retransmissions /s', 'server_retrans_per_s', 0), ('server timeouts /s', 'server_timeouts_per_s', 0),
    ('client: copies dropped by PAWS /s', 'client_paws_rejected_per_s', 0),
    ('client: duplicates received /s', 'client_dups_received_per_s', 0),
    ('ovs-vswitchd % of a core', 'ovs_vswitchd_cpu_pct', 1), ('OVS packet-socket drops /s', 'packet_socket_drops_per_s', 0),
    ('machine busy %', 'machine_busy_pct', 0), ('urgent report -> directive p99 us', 'urgent_p99_us', 0),
]
builds = []
for arg in ARGS:
    name, runs = arg.split(':')
    fs = []
    for r in runs.split(','):
        f = figures(r); f.update(extra(r)); fs.append(f)
    builds.append((name, fs))
print('| | ' + ' | '.join(f'{n} (n={len(fs)})' for n, fs in builds) + ' |')
print('|---|' + '---|' * len(builds))
for label, k, nd in rows:
    cells = []
    for n, fs in builds:
        v = [f[k] for f in fs]
        fmt = lambda x: f'{x:,.{nd}f}'
        cells.append(f'{fmt(statistics.median(v))} [{fmt(min(v))}, {fmt(max(v))}]')
    print(f'| {label} | ' + ' | '.join(cells) + ' |')
print('| fallback reasons (window), per run | ' + ' | '.join('; '.join(json.dumps(f['reasons']) for f in fs) for n, fs in builds) + ' |')
