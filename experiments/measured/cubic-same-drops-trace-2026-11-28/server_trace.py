"""The server's side of OUT/trace.txt (perf script -F time,event,trace of tcp:tcp_probe and
tcp:tcp_cong_state_set, run.sh), per client port: [(time s, "state", cong_state)] and
[(time s, "ack", (snd_cwnd, snd_una, srtt µs, ssthresh, snd_nxt))], in order; and
OUT/run/transfers.jsonl by client port."""
import collections
import json
import re

SERVER_PORT = 8080
LINE = re.compile(r"^\s*([\d.]+):\s+tcp:(\w+):\s+(.*)$")


def read(out):
    flows = collections.defaultdict(list)
    for line in open(out / "trace.txt"):
        m = LINE.match(line)
        if not m:
            continue
        t, kind, rest = float(m.group(1)), m.group(2), m.group(3)
        f = dict(kv.split("=", 1) for kv in rest.split() if "=" in kv)
        if kind == "tcp_cong_state_set" and int(f["sport"]) == SERVER_PORT:
            flows[int(f["dport"])].append((t, "state", int(f["cong_state"])))
        elif kind == "tcp_probe" and f["src"].endswith(f":{SERVER_PORT}"):
            flows[int(f["dest"].rsplit(":", 1)[1])].append(
                (t, "ack", (int(f["snd_cwnd"]), int(f["snd_una"], 16), int(f["srtt"]), int(f["ssthresh"]),
                            int(f["snd_nxt"], 16))))
    transfers = {}
    for line in open(out / "run" / "transfers.jsonl"):
        d = json.loads(line)
        transfers[d["client_port"]] = d
    return flows, transfers
