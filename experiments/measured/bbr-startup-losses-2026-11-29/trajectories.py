"""The server's socket of each transfer from an ss trace (run.sh's ss.txt: `ss -tinHa` of port
8080 every ~10 ms), beside the transfers run's transfers.jsonl, matched by the client's port:
per sample, ms since the flow's first, cwnd, unacked, retransmitted so far, lost now, pacing
and delivery rate (Mbit/s), smoothed RTT. Usage: python3 trajectories.py SS_TXT
TRANSFERS_JSONL [MAX_MS]"""
import glob
import json
import lzma
import os
import re
import sys


def field(line, name, default=0):
    m = re.search(rf"\b{name}:([0-9.]+)", line)
    return float(m.group(1)) if m else default


def rate(line, name):
    m = re.search(rf"\b{name} ([0-9.]+)bps", line)
    return float(m.group(1)) / 1e6 if m else 0.0


def bbr_model(line):
    """The kernel's BBR model in an info line, `bbr:(bw:...,mrtt:...[,pacing_gain:...,
    cwnd_gain:...])`: (bw in bit/s, min_rtt in ms, cwnd_gain or None before the gains show);
    None for a line without it."""
    m = re.search(r"bbr:\(bw:([0-9.]+)([KMG]?)bps,mrtt:([0-9.]+)(?:,pacing_gain:[0-9.]+,cwnd_gain:([0-9.]+))?", line)
    if not m:
        return None
    return float(m.group(1)) * {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}[m.group(2)], float(m.group(3)), m.group(4)


def flow_reports(flows_dir):
    """The agent's report lines of each flow log in FLOWS_DIR (`--events` flows/*.jsonl), by the
    flow's client port (the log's first line, its "flow" event)."""
    logs = {}
    for path in glob.glob(os.path.join(flows_dir, "*.jsonl")):
        rows = [json.loads(l) for l in open(path)]
        if rows and rows[0].get("event") == "flow":
            logs[rows[0]["dport"]] = [r for r in rows if r.get("event") == "report"]
    return logs


def socket_samples(ss_path):
    """(time, client port, info line) of each sample of a connected socket in the trace (ss.txt,
    or ss.txt.xz as committed): a socket's state line names its peer last, and its info line
    follows."""
    now, peer_port = None, None
    for line in (lzma.open(ss_path, "rt") if ss_path.endswith(".xz") else open(ss_path)):
        if line.startswith("T "):
            now = float(line.split()[1])
        elif not line[:1].isspace():
            port = line.split()[-1].rsplit(":", 1)[-1]
            peer_port = int(port) if port.isdigit() else None
        elif peer_port is not None and "cwnd:" in line and "bytes_sent" in line:
            yield now, peer_port, line


def batch_flows(flows_dir, runs_dir, client, side="candidate"):
    """For each repetition of an ab.sh batch, in order: (its run's name, SIDE-N; the transfer of
    CLIENT in RUNS_DIR/SIDE-N/transfers.jsonl; that flow's report lines in its log under
    FLOWS_DIR/SIDE-N/flows)."""
    for rep_dir in sorted(glob.glob(os.path.join(flows_dir, side + "-*")), key=lambda p: int(p.rsplit("-", 1)[1])):
        name = os.path.basename(rep_dir)
        t = next(t for t in map(json.loads, open(os.path.join(runs_dir, name, "transfers.jsonl"))) if t["client"] == client)
        yield name, t, flow_reports(os.path.join(rep_dir, "flows"))[t["client_port"]]


def ss_trace(out):
    """run.sh's ss trace in OUT: ss.txt as written, or ss.txt.xz as committed."""
    path = os.path.join(out, "ss.txt")
    return path if os.path.exists(path) else path + ".xz"


def client_socket_flows(transfers_path, ss_path, sample, client):
    """Each transfer on CLIENT in TRANSFERS_PATH that the ss trace sampled, in order of start:
    (transfer, its samples as sample(now, info line), a tuple whose first item is now, and the
    time of its first sample)."""
    samples = {}
    for now, port, line in socket_samples(ss_path):
        samples.setdefault(port, []).append(sample(now, line))
    for t in sorted(map(json.loads, open(transfers_path)), key=lambda r: r["started_at"]):
        flow = samples.get(t["client_port"])
        if t["client"] == client and flow:
            yield t, flow, flow[0][0]


def umts_socket_flows(transfers_path, ss_path, sample):
    """client_socket_flows of the UMTS client."""
    return client_socket_flows(transfers_path, ss_path, sample, "umts")

def drain_span(pacing_mbps):
    """BBR's drain in a flow's pacing rates (Mbit/s, in order): the index of the first below 2
    after one above 5 (startup's gain gave way to drain's, at 1/2.89 of the estimate) and of the
    first above 2 after it (drain over); None for either not seen."""
    fast_seen, start = False, None
    for i, mbps in enumerate(pacing_mbps):
        if start is None:
            fast_seen |= mbps > 5
            if fast_seen and mbps < 2:
                start = i
        elif mbps > 2:
            return start, i
    return start, None


def main():
    ss_path, transfers_path = sys.argv[1], sys.argv[2]
    max_ms = float(sys.argv[3]) if len(sys.argv) > 3 else 1500
    transfers = sorted((json.loads(l) for l in open(transfers_path)), key=lambda r: r["started_at"])
    flows = {}
    for now, port, line in socket_samples(ss_path):
        retr = re.search(r"retrans:\d+/(\d+)", line)
        flows.setdefault(port, []).append((now, line.split()[0], int(field(line, "cwnd")), int(field(line, "unacked")),
                                           int(retr.group(1)) if retr else 0, int(field(line, "lost")), rate(line, "pacing_rate"),
                                           rate(line, "delivery_rate"), field(line, "rtt")))
    for t in transfers:
        print(f"## {t['scheme']} rep {t['repetition']}: {t['tct_s']:.3f} s")
        flow = flows.get(t["client_port"])
        if not flow:
            print(f"# client port {t['client_port']}: not in the trace")
            continue
        print(f"{'ms':>6} {'cc':8} {'cwnd':>5} {'unack':>5} {'retr':>5} {'lost':>5} {'pace':>7} {'deliv':>7} {'rtt':>7}")
        t0 = flow[0][0]
        for s in flow:
            ms = 1000 * (s[0] - t0)
            if ms > max_ms:
                break
            print(f"{ms:6.0f} {s[1]:8} {s[2]:5d} {s[3]:5d} {s[4]:5d} {s[5]:5d} {s[6]:7.2f} {s[7]:7.2f} {s[8]:7.1f}")


if __name__ == "__main__":
    main()
