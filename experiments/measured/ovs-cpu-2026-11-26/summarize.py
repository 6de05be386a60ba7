# Medians and ranges of the figures of several runs per build: summarize.py A:run1,run2,... B:...
import json, sys, statistics, os
R = '/tmp/ovs-cpu-runs'
def figures(run):
    d = json.load(open(f'{R}/{run}/scale.json'))
    st = json.load(open(f'{R}/{run}/logs/ovs/001-scale.json'))
    sh = st['shim']
    f = {
        'shim_cpu_pct': d['shim_cpu_pct'], 'agent_cpu_pct': d['agent_cpu_pct'],
        'egress_ns': d['bpf_ns_per_packet_egress'], 'ingress_ns': d['bpf_ns_per_packet_ingress'],
        'flows_fallen_back': d['flows_fallen_back'], 'corrupt': d['flows_corrupt'],
        'goodput_mbps': d['goodput_mbps'], 'flows_below_half_rate': d['flows_below_half_rate'],
        'machine_busy_pct': d['machine_cpu_busy_pct'],
        'shim_retx_run': sh['retransmissions']['total'], 'shim_timeouts_run': sh['timeouts'],
        'dsacks_run': sh['dsacks'], 'server_retrans_per_s': d['server_tcp_per_s']['RetransSegs'],
        'server_timeouts_per_s': d['server_tcp_per_s']['TCPTimeouts'],
        'segments_copied_per_s': d['segments_copied_per_s'], 'urgent_p99_us': d['urgent_p99_us'],
    }
    f['reasons'] = d['fallback_reasons']
    f['reasons_whole_run'] = sh['fallbacks']
    return f
if __name__ != "__main__": sys.argv = sys.argv[:1]
out = {}
for arg in (sys.argv[1:] if __name__ == "__main__" else []):
    name, runs = arg.split(':')
    runs = runs.split(',')
    fs = [figures(r) for r in runs]
    out[name] = fs
    print(f'== {name} ({len(fs)} runs: {", ".join(runs)})')
    for k in fs[0]:
        vals = [f[k] for f in fs]
        if isinstance(vals[0], dict):
            print(f'  {k:24s} {vals}')
        else:
            print(f'  {k:24s} median {statistics.median(vals):10.1f}  range [{min(vals):.1f}, {max(vals):.1f}]  all {[round(v,1) for v in vals]}')
