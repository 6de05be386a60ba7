"""One row per run of run.sh (or of rto-floor/run.sh: `table.py rto-floor floor10 floor40 floor100`): the scale figures, the bridge's drops
and the shim's retransmission counters. Usage: table.py FOLDER [PREFIX...]"""
import json
import sys
from pathlib import Path

runs = Path(sys.argv[1])
prefixes = sys.argv[2:] or ["before", "slab", "after"]
print("| run | goodput Mbit/s | bridge drops/s (from server) | shim % | agent % | egress / ingress ns "
      "| fallen back | corrupt | urgent p99 ms | shim retransmissions: timeout / RACK / total | D-SACKs "
      "| server RTOs/s | flows below half rate |")
print("|" + "---|" * 13)
files = [f for p in prefixes for f in sorted(runs.glob(f"{p}-[0-9].json"))]
for f in sorted(files, key=lambda p: (p.stem.split("-")[-1], prefixes.index(p.stem.rsplit("-", 1)[0]))):
    d = json.loads(f.read_text())
    stats_path = runs / f"{f.stem}-shim-stats.json"
    if not stats_path.exists():
        stats_path = runs / f.stem / "ovs" / "001-scale.json"
    st = json.loads(stats_path.read_text())["shim"]
    rt = st["retransmissions"]
    drops = d.get("bridge_drops_from_server_per_s")
    print(f"| {f.stem} | {d['goodput_mbps']:.0f} | {'-' if drops is None else f'{drops:,.0f}'} | {d['shim_cpu_pct']:.1f} "
          f"| {d['agent_cpu_pct']:.1f} | {d['bpf_ns_per_packet_egress']:,.0f} / {d['bpf_ns_per_packet_ingress']:.0f} "
          f"| {d['flows_fallen_back']} {d['fallback_reasons'] or ''} | {d['flows_corrupt']} | {d['urgent_p99_us'] / 1000:.1f} "
          f"| {rt['timeout'] / 1000:.0f}k / {rt['rack'] / 1000:.0f}k / {rt['total'] / 1000:.0f}k | {st['dsacks'] / 1000:.0f}k "
          f"| {d['server_tcp_per_s']['TCPTimeouts']:,.0f} | {d['flows_below_half_rate']} |")
