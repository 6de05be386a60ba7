"""Prints one row per run of this folder: shim + agent CPU, ACKs and reports, urgent answers,
the server's retransmissions and timeouts, the delay shell's drops."""
import glob
import json
import os
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
print("| run | queue | shim+agent % | ACKs/s | reports/s | urgent/s | goodput Mbit/s | server segs/s | retrans/s | RTOs/s | shell drops/s to clients / to server | machine busy % |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
def order(f):
    arm, rate, round_ = os.path.basename(f)[:-5].rsplit("-", 2)
    return arm, float(rate), int(round_)


for f in sorted(glob.glob(os.path.join(folder, "*.json")), key=order):
    d = json.load(open(f))
    t = d["server_tcp_per_s"]
    shell = d.get("delay_shell_drops_per_s") or {}
    print(f"| {os.path.basename(f)[:-5]} | {d.get('delay_queue_packets') or 500} | {d['shim_agent_cpu_pct']:.2f} | {d['acks_per_s']:,.0f} | "
          f"{d['reports_per_s']:,.0f} | {d['urgent_answers'] / d['window_s']:,.0f} | {d['goodput_mbps']:.1f} | {t['OutSegs']:,.0f} | "
          f"{t['RetransSegs']:,.0f} | {t['TCPTimeouts']:,.0f} | {shell.get('to_clients', 0):,.0f} / {shell.get('to_server', 0):,.0f} | "
          f"{d['machine_cpu_busy_pct']:.0f} |")
