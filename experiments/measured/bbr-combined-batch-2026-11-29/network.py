"""Usage, in the project's environment (numpy): .venv/bin/python network.py RUNS_DIR [CELL]
(CELL: the probe's transfer number, default 000004, the UMTS client). From the packet probe
of each run SIDE-N (RUNS_DIR/SIDE-N/probe/CELL.*; the UMTS ones are in
umts-probe-flows.tar.xz), per side; or, when RUNS_DIR is one run (its
transfers.jsonl), of its UMTS transfers, per scheme; medians over the repetitions of:
- the bytes delivered to the client by each time (from the flow's first packet sent);
- the packets in the network (sent, not yet received) at each time, counting only packets
  that arrived.
Times suit the UMTS trace: its outage runs from about 9.5 to 18 s."""
import collections, glob, json, os, statistics as st, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))
import numpy as np  # noqa: E402
from ccswitch.experiments.measurements import FLAG_MATCHED, read_probe  # noqa: E402

DELIVERED_AT = (4, 8, 9, 16, 18, 18.5, 19, 19.5, 20)
IN_NETWORK_AT = (6, 8, 9.5, 15.5, 17.5)

runs, cell = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "000004"
if os.path.exists(os.path.join(runs, "transfers.jsonl")):
    rows = [json.loads(line) for line in open(os.path.join(runs, "transfers.jsonl"))]
    probes = [(r["scheme"], os.path.join(runs, r["probe"])) for r in rows if r["client"] == "umts"]
else:
    probes = [(os.path.basename(d).rsplit("-", 1)[0], os.path.join(d, "probe", cell))
              for d in sorted(glob.glob(os.path.join(runs, "*-*")))]
delivered, in_network = collections.defaultdict(list), collections.defaultdict(list)
for side, prefix in probes:
    if not os.path.exists(prefix + ".packets.bin"):
        continue
    probe = read_probe(prefix)
    flow = max(probe.flows, key=lambda f: probe.flows[f]["bytes_sent"])
    pk = probe.of_flow(flow)
    pk = pk[(pk["flags"] & FLAG_MATCHED) != 0]
    received = pk["t_ns"].astype(np.int64)
    sent = received - pk["owd_us"].astype(np.int64) * 1000
    t0 = sent.min()
    order = np.argsort(received)
    cum_bytes, arrivals = np.cumsum(pk["bytes"][order].astype(np.int64)), received[order]
    delivered[side].append([int(cum_bytes[np.searchsorted(arrivals, t0 + int(t * 1e9), "right") - 1])
                            if arrivals[0] <= t0 + int(t * 1e9) else 0 for t in DELIVERED_AT])
    in_network[side].append([int(((sent <= t0 + int(t * 1e9)) & (received > t0 + int(t * 1e9))).sum()) for t in IN_NETWORK_AT])
for side in sorted(delivered):
    rows = delivered[side]
    print(f"{side:9s} n={len(rows)} delivered, MB (median): " +
          " ".join(f"{t:g}s {st.median(r[i] for r in rows) / 1e6:.3f}" for i, t in enumerate(DELIVERED_AT)))
for side in sorted(in_network):
    rows = in_network[side]
    print(f"{side:9s} n={len(rows)} packets in the network (median): " +
          " ".join(f"{t:g}s {st.median(r[i] for r in rows):.0f}" for i, t in enumerate(IN_NETWORK_AT)))
