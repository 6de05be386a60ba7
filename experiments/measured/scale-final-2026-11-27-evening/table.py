"""The evening's final kernel runs against issue 21's targets, as a table (table.md);
kernel-100k-before-2 ran the stop's start."""
import json
from pathlib import Path

here = Path(__file__).resolve().parent
print("| run | shim + agent % | fallen back | BPF ns/ACK | urgent p99 µs | urgent answers | untimed | other |")
print("|---|---|---|---|---|---|---|---|")
for n in ["kernel-10k-clean-1", "kernel-10k-clean-2", "kernel-10k-loss1-1", "kernel-10k-loss1-2", "kernel-100k-1", "kernel-100k-before-2", "kernel-100k-3"]:
    d = json.loads((here / f"{n}.json").read_text())
    aborts = {side: c for side, c in (d.get("tcp_aborts") or {}).items() if c}
    other = (f"{d['flows_receiving']:,} receiving, {d['flows_silent']:,} silent, {d['flows_failed']} failed, "
             f"{d['flows_corrupt']} corrupt, aborts {aborts or 'none'}, machine {d['machine_cpu_busy_pct']:.0f}% busy")
    if "100k" in n:
        other += f", {d['shim_kib_per_flow']:.2f} + {d['maps_kib_per_flow']:.2f} KiB per flow (shim + maps)"
    print(f"| {n} | {d['shim_agent_cpu_pct']:.2f} | {d['flows_fallen_back']} | {d['bpf_ns_per_ack']:,.0f} | {d['urgent_p99_us']:,.0f} | "
          f"{d['urgent_answers']:,.0f} | {d['reports_untimed']} | {other} |")
