"""Usage: applied.py RUN_OUT. For each BBR transfer on the UMTS client of run.sh's RUN_OUT (a
folder with ss.txt.xz beside transfers.jsonl and flows/), after the trace's outage (past 16 s
of the flow): when the server socket's window (ss) first exceeded 12 segments again, and for
ccswitch's transfers when the agent set a window above 12 (its flow log) and when the next
ACK reached the datapath after it (the next report whose window is the agent's)."""
import os, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bbr-startup-losses-2026-11-29"))
from trajectories import field, flow_reports, ss_trace, umts_socket_flows  # noqa: E402

MSS = 1448
out = sys.argv[1]
logs = flow_reports(os.path.join(out, "flows"))
sample = lambda now, line: (now, field(line, "cwnd"), field(line, "unacked"))
for t, flow, t0 in umts_socket_flows(os.path.join(out, "transfers.jsonl"), ss_trace(out), sample):
    port = t["client_port"]
    socket = next((now - t0 for now, cwnd, _ in flow if now - t0 > 16 and cwnd > 12), None)
    agent = ""
    if port in logs:
        reports = logs[port]
        # Both clocks are the wall clock: reports' t_us and the sampler's `date`, so times here
        # count from the socket's first ss sample.
        at = lambda r: r["t_us"] / 1e6 - t0
        after = [r for r in reports if at(r) > 16]
        set_at = next((at(r) for r in after if r["cwnd_bytes"] > 12 * MSS), None)
        next_ack = next((at(r) for r in after if set_at is not None and at(r) > set_at + 0.001), None)
        agent = f"; the agent set it at {set_at:6.3f} s, the next report (ACK) at {next_ack:6.3f} s" if set_at and next_ack else ""
    rose = f"socket's window above 12 at {socket:6.3f} s" if socket is not None else "done before the outage"
    print(f"{t['scheme']:11s} rep {t['repetition']} {t['tct_s']:6.2f} s: {rose}{agent}")
