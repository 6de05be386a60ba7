"""One line per run of shim-fifo.sh or after.sh, then each arm's medians.

Usage: python3 table.py FOLDER
"""
import json
import pathlib
import statistics
import sys

FIELDS = ["urgent_p99_us", "urgent_read_p99_us", "urgent_queued_p99_us", "urgent_agent_p99_us", "urgent_answers",
          "shim_cpu_pct", "shim_agent_cpu_pct", "bpf_ns_per_ack", "acks_per_s", "reports_per_s", "goodput_mbps",
          "machine_cpu_busy_pct", "flows_fallen_back", "reports_untimed", "bpf_ns_per_packet_egress", "flows_corrupt"]


def main(folder):
    runs = sorted(pathlib.Path(folder).glob("*.json"), key=lambda p: (p.stem.rsplit("-", 1)[1], p.stem))
    arms = {}
    print("run".ljust(12) + "".join(f.replace("_pct", "%").replace("urgent_", "u_")[:14].rjust(15) for f in FIELDS))
    for p in runs:
        d = json.loads(p.read_text())
        arm = p.stem.rsplit("-", 1)[0]
        arms.setdefault(arm, []).append(d)
        print(p.stem.ljust(12) + "".join(f"{d.get(f) if d.get(f) is not None else float('nan'):15.1f}" for f in FIELDS))
    print()
    for arm, ds in arms.items():
        def med(f):
            values = [d[f] for d in ds if d.get(f) is not None]
            return statistics.median(values) if values else float("nan")
        print(f"{arm:12}" + "".join(f"{med(f):15.1f}" for f in FIELDS) + f"   ({len(ds)} runs, median)")


if __name__ == "__main__":
    main(sys.argv[1])
