"""One markdown row per run of run.sh, ab.sh or rates.sh, with the figures issue 21 targets.

Usage: python3 summary.py FOLDER...
"""
import json
import pathlib
import sys


def row(label, path):
    d = json.loads(path.read_text())
    drops = d.get("delay_shell_drops_per_s") or {}
    cells = [label,
             f"{d['shim_cpu_pct']:.1f}", f"{d['shim_agent_cpu_pct']:.1f}", f"{d['bpf_ns_per_ack']:,.0f}",
             f"{d['urgent_p99_us']:,.0f}" if d.get("urgent_answers") else "-",
             f"{d['goodput_mbps']:,.0f}", f"{drops.get('to_clients', 0):,.0f}" if drops else "-",
             f"{d['machine_cpu_busy_pct']:.0f}", str(d["flows_fallen_back"]), str(d["flows_corrupt"]),
             str(d["flows_silent"]), str(d.get("reports_untimed", "-"))]
    return "| " + " | ".join(cells) + " |"


print("| run | shim % | shim + agent % | BPF ns/ACK | urgent p99 µs | goodput Mbit/s | shell drops/s "
      "| machine busy % | fallen back | corrupt | silent | untimed |")
print("|" + "---|" * 12)
for folder in sys.argv[1:]:
    for p in sorted(pathlib.Path(folder).glob("*.json")):
        print(row(p.stem if folder == "." else f"{folder}/{p.stem}", p))
