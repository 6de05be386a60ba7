"""Usage: table.py DIR. One row per run of run.sh (NAME.json, ccswitch bench scale --json)."""
import glob, json, os, sys

KEYS = ["flows_fallen_back", "bpf_ns_per_ack", "shim_agent_cpu_pct", "urgent_p99_us", "reports_per_s", "acks_per_s",
        "goodput_mbps", "flows_silent", "flows_corrupt", "shim_kib_per_flow", "maps_kib_per_flow"]
print("| run | " + " | ".join(KEYS) + " |")
print("|---" * (len(KEYS) + 1) + "|")
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    d = json.load(open(f))
    cells = [f"{d[k]:.1f}" if isinstance(d.get(k), float) else str(d.get(k)) for k in KEYS]
    print(f"| {os.path.basename(f)[:-5]} | " + " | ".join(cells) + " |")
