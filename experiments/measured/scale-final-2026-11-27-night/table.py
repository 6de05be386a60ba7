"""The night's final scale runs against issue 21's targets, as tables (table.md)."""
import json
import statistics
from pathlib import Path

here = Path(__file__).resolve().parent
load = lambda n: json.loads((here / f"{n}.json").read_text())


def spread(xs, nd=2):
    return f"{statistics.median(xs):,.{nd}f} [{min(xs):,.{nd}f}, {max(xs):,.{nd}f}]"


print("Through the 50-ms delay shell, 10k flows (median [min, max]):\n")
print("| arm | rate | runs | shim + agent % | µs per report | reports/s | ACKs/s | goodput Mbit/s | BPF ns/ACK | urgent answers | urgent p99 µs | fallen back | shell drops/s to clients | machine busy % |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for arm, rate, names in (("base `04e97bb`", 300, [f"delay-base-{i}" for i in range(1, 6)]),
                         ("final `82b098e`", 300, [f"delay-final-{i}" for i in range(1, 6)]),
                         ("final `82b098e`", 400, [f"delay400-final-{i}" for i in (1, 2)]),
                         ("head `3fbab3b`", 400, [f"delay400-head-{i}" for i in (1, 2, 3)])):
    ds = [load(n) for n in names]
    col = lambda k: [d[k] for d in ds]
    per = [d["shim_agent_cpu_pct"] * 1e4 / d["reports_per_s"] for d in ds]
    shell_drops = ", ".join(format(d["delay_shell_drops_per_s"]["to_clients"], ",.0f") for d in ds)
    print(f"| {arm} | {rate} | {len(ds)} | {spread(col('shim_agent_cpu_pct'))} | {spread(per)} | {spread(col('reports_per_s'), 0)} | "
          f"{spread(col('acks_per_s'), 0)} | {spread(col('goodput_mbps'), 1)} | {spread(col('bpf_ns_per_ack'), 0)} | "
          f"{', '.join(f'{v:.0f}' for v in col('urgent_answers'))} | {', '.join(f'{v:,.0f}' for v in col('urgent_p99_us'))} | "
          f"{sum(col('flows_fallen_back'))} | {shell_drops} | "
          f"{spread(col('machine_cpu_busy_pct'), 0)} |")

print("\nEvery delay run, in order:\n")
print("| run | shim + agent % | reports/s | µs per report |")
print("|---|---|---|---|")
for i in range(1, 6):
    for arm in ("base", "final"):
        d = load(f"delay-{arm}-{i}")
        print(f"| delay-{arm}-{i} | {d['shim_agent_cpu_pct']:.2f} | {d['reports_per_s']:,.0f} | {d['shim_agent_cpu_pct'] * 1e4 / d['reports_per_s']:.2f} |")

print("\novs datapath, 10k × 100 kbit/s, alternated:\n")
print("| run | shim % | agent % | fallen back | corrupt | ingress / egress ns per packet | goodput Mbit/s | machine busy % |")
print("|---|---|---|---|---|---|---|---|")
for i in (1, 2, 3):
    for arm in ("base", "final"):
        d = load(f"ovs-{arm}-{i}")
        print(f"| ovs-{arm}-{i} | {d['shim_cpu_pct']:.1f} | {d['agent_cpu_pct']:.1f} | {d['flows_fallen_back']} | {d['flows_corrupt']} | "
              f"{d['bpf_ns_per_packet_ingress']:,.0f} / {d['bpf_ns_per_packet_egress']:,.0f} | {d['goodput_mbps']:.1f} | {d['machine_cpu_busy_pct']:.0f} |")

print("\nKernel datapath without a delay shell, final build:\n")
print("| run | shim + agent % | fallen back | BPF ns/ACK | urgent p99 µs | urgent answers | untimed | other |")
print("|---|---|---|---|---|---|---|---|")
for n in ["kernel-10k-clean-1", "kernel-10k-clean-2", "kernel-10k-loss1-1", "kernel-10k-loss1-2", "kernel-100k-1", "kernel-100k-2"]:
    d = load(n)
    aborts = {side: c for side, c in (d.get("tcp_aborts") or {}).items() if c}
    other = (f"{d['flows_receiving']:,} receiving, {d['flows_silent']:,} silent, {d['flows_failed']} failed, "
             f"{d['flows_closed_early']} closed early, {d['flows_corrupt']} corrupt, aborts {aborts or 'none'}, "
             f"machine {d['machine_cpu_busy_pct']:.0f}% busy")
    if "100k" in n:
        other += f", {d['shim_kib_per_flow']:.2f} + {d['maps_kib_per_flow']:.2f} KiB per flow (shim + maps)"
    print(f"| {n} | {d['shim_agent_cpu_pct']:.2f} | {d['flows_fallen_back']} | {d['bpf_ns_per_ack']:,.0f} | {d['urgent_p99_us']:,.0f} | "
          f"{d['urgent_answers']:,.0f} | {d['reports_untimed']:.0f} | {other} |")
