"""The final runs' figures against issue 21's targets, as tables (table.md)."""
import json
import statistics
from pathlib import Path

here = Path(__file__).resolve().parent
load = lambda n: json.loads((here / f"{n}.json").read_text())
print("## ovs, 10k x 100 kbit/s: the stop's start and its final build, alternated\n")
print("| run | shim % of a core | egress ns | ingress ns | goodput Mbit/s | shim µs per packet | fallen back | corrupt | bridge drops/s |")
print("|---|---|---|---|---|---|---|---|---|")
arms = {}
for r in range(1, 5):
    for arm in ["start", "final"]:
        d = load(f"ovs-{arm}-{r}")
        arms.setdefault(arm, []).append(d)
        print(f"| {arm}-{r} | {d['shim_cpu_pct']:.1f} | {d['bpf_ns_per_packet_egress']:,.0f} | {d['bpf_ns_per_packet_ingress']:,.0f} | "
              f"{d['goodput_mbps']:.0f} | {d['shim_cpu_pct'] * 1e4 / d['packets_per_s']:.2f} | {d['flows_fallen_back']} | {d['flows_corrupt']} | "
              f"{d['bridge_drops_from_server_per_s']:,.0f} |")
print()
ratios = sorted(f["shim_cpu_pct"] / s["shim_cpu_pct"] for s, f in zip(arms["start"], arms["final"]))
print(f"shim % final / start, paired by round: {', '.join(f'{x:.3f}' for x in ratios)}; median {statistics.median(ratios):.3f}\n")
print("## kernel datapath, final build (kernel-100k-start-2: the stop's start)\n")
print("| run | shim + agent % | fallen back | BPF ns/ACK | urgent p99 µs | urgent answers | untimed | other |")
print("|---|---|---|---|---|---|---|---|")
for n in ["kernel-10k-clean-1", "kernel-10k-clean-2", "kernel-10k-loss1-1", "kernel-10k-loss1-2", "kernel-100k-1",
          "kernel-100k-start-2", "kernel-100k-2"]:
    d = load(n)
    aborts = {side: c for side, c in (d.get("tcp_aborts") or {}).items() if c}
    other = f"{d['flows_receiving']:,} receiving, {d['flows_silent']:,} silent, {d['flows_failed']} failed, {d['flows_corrupt']} corrupt, aborts {aborts or 'none'}"
    if "100k" in n:
        other += f", {d['shim_kib_per_flow']:.2f} + {d['maps_kib_per_flow']:.2f} KiB per flow (shim + maps)"
    print(f"| {n} | {d['shim_agent_cpu_pct']:.2f} | {d['flows_fallen_back']} | {d['bpf_ns_per_ack']:,.0f} | {d['urgent_p99_us']:,.0f} | "
          f"{d['urgent_answers']:,.0f} | {d['reports_untimed']} | {other} |")
print("\n## make bench (ccswitch bench overhead), final build: BPF ns per ACK\n")
print("| run | kernel:reno | kernel:cubic | native:ccsw_floor |")
print("|---|---|---|---|")
for n in ["overhead-1", "overhead-2"]:
    d = load(n)
    rows = {r["scheme"]: r for r in d["rows"]}
    cell = lambda s: f"{rows[s]['bpf_ns_per_ack']:,.0f}" if s in rows and rows[s].get("bpf_ns_per_ack") else "?"
    print(f"| {n} | {cell('kernel:reno')} | {cell('kernel:cubic')} | {cell('native:ccsw_floor')} |")
