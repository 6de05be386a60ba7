"""`ccswitch-schedule` on a live path: accuracy of the delay it applies, and its loss rate.

    client netns ──veth── root namespace (FORWARD → NFQUEUE → ccswitch-schedule) ──veth── server netns
    probe.py: UDP probes every 2 ms, stamps            schedule: 0 s: 10 ms; 2 s: 60 ms,      echo.py: echoes with
    send/receive on CLOCK_MONOTONIC, then              2% loss downlink                        its own stamps; on
    counts a 50,000-packet stream from the server                                              request, a stream

Every namespace shares the host's CLOCK_MONOTONIC, so each probe yields two one-way delays
(client send → server receive: uplink; server send → client receive: downlink), each compared
with the step in force when it crossed the element. Run as root under the experiment lock:
    flock /tmp/ccswitch-experiment.lock .venv/bin/python -m pytest tests/python/test_schedule_element.py -q -s
"""

import json
import os
import subprocess
import sys
import time

import pytest

from ccswitch.topology.namespaces import Processes, ServerNamespace, SysctlGuard, Teardown, TopologyError, run
from ccswitch.topology.schedule import ScheduleElement, default_binary, queues_in_rules

PORT = 9740
PROBE_INTERVAL_S = 0.002
PROBE_SECONDS = 4.0
STREAM_PACKETS = 50_000
STREAM_PPS = 20_000
STEPS = [{"at_s": 0, "delay_ms": 10, "loss_downlink": 0, "loss_uplink": 0},
         {"at_s": 2, "delay_ms": 60, "loss_downlink": 0.02, "loss_uplink": 0}]
#: Samples this close to the step change are left out (the element's time 0 follows our
#: SIGUSR1 by the signal's delivery, well under this).
BOUNDARY_GUARD_S = 0.02

ECHO = r"""
import gc, socket, struct, sys, time
gc.disable()  # no collector pauses in the stamps
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.bind(("0.0.0.0", int(sys.argv[1])))
print("listening", flush=True)
while True:
    data, peer = sock.recvfrom(2048)
    rx = time.monotonic_ns()
    if data.startswith(b"stream"):
        _, n, pps = data.split()
        n, pps = int(n), int(pps)
        start = time.monotonic()
        for seq in range(n):
            # paced in bursts of 20 so that the receiver's socket buffer never overflows
            if seq % 20 == 0:
                while time.monotonic() < start + seq / pps:
                    pass
            sock.sendto(struct.pack("!Q", seq) + b"s" * 56, peer)
        continue
    sock.sendto(data[:16] + struct.pack("!QQ", rx, time.monotonic_ns()), peer)
"""

PROBE = r"""
import gc, json, select, socket, struct, sys, time
gc.disable()  # no collector pauses in the stamps
server, port, interval, seconds, n_stream, pps = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
sock.setsockopt(socket.SOL_SOCKET, 33, 32 << 20)  # SO_RCVBUFFORCE (root; not in the socket module)
sock.setblocking(False)
probes = {}  # seq -> [client tx, server rx, server tx, client rx]
def drain():
    while True:
        try:
            data = sock.recv(2048)
        except BlockingIOError:
            return
        rx = time.monotonic_ns()
        seq, tx = struct.unpack("!QQ", data[:16])
        srx, stx = struct.unpack("!QQ", data[16:32])
        probes[seq] = [tx, srx, stx, rx]
start = time.monotonic()
seq = 0
while True:
    now = time.monotonic()
    due = start + seq * interval
    if now >= due:
        if now - start >= seconds:
            break
        sock.sendto(struct.pack("!QQ", seq, time.monotonic_ns()), (server, port))
        seq += 1
        continue
    if select.select([sock], [], [], due - now)[0]:
        drain()
deadline = time.monotonic() + 0.5  # the last echoes are 2 x 60 ms away
while time.monotonic() < deadline:
    if select.select([sock], [], [], 0.05)[0]:
        drain()
sent = seq
# the loss stream, server -> client
sock.sendto(b"stream %d %d" % (n_stream, pps), (server, port))
got = set()
idle_deadline = time.monotonic() + 2.0
while time.monotonic() < idle_deadline:
    if select.select([sock], [], [], 0.05)[0]:
        while True:
            try:
                data = sock.recv(2048)
            except BlockingIOError:
                break
            if len(data) == 64:
                got.add(struct.unpack("!Q", data[:8])[0])
                idle_deadline = time.monotonic() + 0.5
print(json.dumps({"probes_sent": sent, "probes": probes, "stream_sent": n_stream, "stream_received": len(got)}))
"""


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


def require_root_and_binary():
    if os.geteuid() != 0:
        pytest.fail("needs root (network namespaces, iptables, NFQUEUE)")
    if not os.access(default_binary(), os.X_OK):
        pytest.fail(f"{default_binary()} not built: cargo build --release -p ccswitch-schedule")


def forwarded_namespaces(teardown):
    """A server and a client namespace, forwarded through the root namespace (where the
    element's rules sit), each removed by `teardown`."""
    SysctlGuard(teardown).set("net.ipv4.ip_forward", "1")
    tag = str(os.getpid())
    server = ServerNamespace(teardown, tag=f"ss{tag}")
    server.create()
    client = ServerNamespace(teardown, tag=f"sc{tag}")
    client.create()
    return server, client


def test_a_bad_schedule_is_refused_naming_the_step_and_the_key(tmp_path):
    require_root_and_binary()
    teardown = Teardown()
    procs = Processes(teardown)
    element = ScheduleElement(teardown, procs, server_ip="198.18.255.254", work_dir=str(tmp_path),
                              steps=[{"at_s": 0, "delay_ms": 10}, {"at_s": 1, "delay_ms": 10, "loss_downlink": 1.5}])
    try:
        with pytest.raises(TopologyError, match=r"step 1: key \"loss_downlink\""):
            element.start()
    finally:
        assert teardown.run() == []
    assert f"--queue-num {element.queue} " not in run(["iptables", "-S"]).stdout + " "


def test_delay_follows_the_schedule_within_a_millisecond_and_downlink_loss_is_two_percent(tmp_path):
    require_root_and_binary()
    teardown = Teardown()
    procs = Processes(teardown)
    try:
        server, client = forwarded_namespaces(teardown)
        (tmp_path / "echo.py").write_text(ECHO)
        (tmp_path / "probe.py").write_text(PROBE)
        echo_log = str(tmp_path / "echo.log")
        procs.start_and_wait("echo", server.exec_cmd([sys.executable, str(tmp_path / "echo.py"), str(PORT)]), echo_log,
                             lambda: "listening" in open(echo_log).read(), timeout_s=10, waiting_for="the echo server")

        element = ScheduleElement(teardown, procs, server_ip=server.server_ip, steps=STEPS, work_dir=str(tmp_path))
        element.start()
        t0 = time.monotonic_ns()  # just after the SIGUSR1 that starts the element's clock
        cp = subprocess.run(client.exec_cmd([sys.executable, str(tmp_path / "probe.py"), server.server_ip, str(PORT),
                                             str(PROBE_INTERVAL_S), str(PROBE_SECONDS), str(STREAM_PACKETS),
                                             str(STREAM_PPS)]),
                            capture_output=True, text=True, timeout=60)
        assert cp.returncode == 0, cp.stderr
        result = json.loads(cp.stdout)
        queue = element.queue
        stats = element.stop()
        assert f"--queue-num {queue} " not in run(["iptables", "-S"]).stdout + " ", "rules left behind"
    finally:
        problems = teardown.run()
    assert problems == []
    assert queue not in queues_in_rules()

    # One-way delays per phase, each classified by when it crossed the element.
    change_ns = t0 + int(STEPS[1]["at_s"] * 1e9)
    guard_ns = int(BOUNDARY_GUARD_S * 1e9)
    errors = {}  # (phase, direction) -> [measured - asked, ms]
    for tx, srx, stx, rx in result["probes"].values():
        for direction, crossed, one_way in (("uplink", tx, srx - tx), ("downlink", stx, rx - stx)):
            if abs(crossed - change_ns) < guard_ns:
                continue
            phase = 0 if crossed < change_ns else 1
            errors.setdefault((phase, direction), []).append(one_way / 1e6 - STEPS[phase]["delay_ms"])
    print()
    worst, summary = [], {}
    for (phase, direction), errs in sorted(errors.items()):
        abs_errs = [abs(e) for e in errs]
        summary[(phase, direction)] = (len(errs), percentile(errs, 50), percentile(abs_errs, 90))
        print(f"phase {phase} ({STEPS[phase]['delay_ms']} ms) {direction}: {len(errs)} probes, "
              f"mean error {sum(errs) / len(errs):+.3f} ms, median error {percentile(errs, 50):+.3f} ms, "
              f"p90 |error| {percentile(abs_errs, 90):.3f} ms, p99 |error| {percentile(abs_errs, 99):.3f} ms, "
              f"max {max(abs_errs):.3f} ms")
        worst += abs_errs
    print(f"accuracy over all phases and directions: p99 |error| {percentile(worst, 99):.3f} ms, max {max(worst):.3f} ms")
    for i, step in enumerate(stats["steps"]):
        for d in ("downlink", "uplink"):
            h = step[d]["hold_ms"]
            print(f"element step {i} {d}: {step[d]['packets_seen']} packets, {step[d]['dropped']} dropped, "
                  f"hold mean {h['mean']:.3f} min {h['min']:.3f} max {h['max']:.3f} ms")
    print(f"element cost: {stats['user_cpu_us_per_packet']:.2f} us user CPU per packet, "
          f"{stats['cpu_us_per_packet']:.2f} us user+system, over {stats['packets']} packets")
    for (phase, direction), (n, median, p90) in summary.items():
        assert n > 300, f"too few probes crossed in phase {phase} {direction}"
        # The delay applied per phase is the one asked, to a millisecond, for nine probes in ten.
        # The last tenth and the mean carry this shared VM's stalls (the probes stamp in Python):
        # CI once saw one probe in a hundred 12 ms late while the element's own holds stayed
        # exact, so they are printed, not bounded. A wrong step or a backlog moves the median.
        assert abs(median) <= 1.0 and p90 <= 2.0, f"phase {phase} {direction}: median {median:+.3f}, p90 |error| {p90:.3f} ms"
        # The element never releases early: a negative error beyond stamping noise is a bug.
        assert min(errors[(phase, direction)]) > -0.5
    # The element's own clock: every packet of a step held at least the step's delay, some held
    # exactly that, and the mean over the step's packets (the stream's too) within a millisecond.
    for step, asked in zip(stats["steps"], STEPS):
        for d in ("downlink", "uplink"):
            h = step[d]["hold_ms"]
            assert asked["delay_ms"] <= h["min"] < asked["delay_ms"] + 1.0, (d, asked, h)
            assert h["mean"] - asked["delay_ms"] <= 1.0, (d, asked, h)

    # Loss: the stream crosses the element in phase 1, downlink only.
    lost = result["stream_sent"] - result["stream_received"]
    rate = lost / result["stream_sent"]
    print(f"downlink loss: {lost} of {result['stream_sent']} stream packets = {rate:.4%} (asked 2%)")
    assert abs(rate - 0.02) <= 0.1 * 0.02, f"downlink loss {rate:.4%} not within 10% of 2%"
    # The element's own count agrees with what went missing (probe echoes included), and
    # nothing was lost on the uplink, which has no loss.
    echoes_missing = result["probes_sent"] - len(result["probes"])
    dropped_down = sum(s["downlink"]["dropped"] for s in stats["steps"])
    assert dropped_down == lost + echoes_missing
    assert sum(s["uplink"]["dropped"] for s in stats["steps"]) == 0
    assert stats["steps"][0]["downlink"]["dropped"] == 0
    # Every packet the rules queued reached the element (no bypass, no fail-open).
    assert stats["rule_packets"] == stats["packets"]


SENDER = r"""
import socket, sys
cc, port, n = sys.argv[1].encode(), int(sys.argv[2]), int(sys.argv[3])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("0.0.0.0", port))
srv.listen(1)
print("listening", flush=True)
conn, _ = srv.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc)
conn.sendall(bytes(n))
conn.close()
"""

RECEIVER = r"""
import socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
got = 0
while True:
    data = s.recv(1 << 16)
    if not data:
        break
    got += len(data)
print(got)
"""

SEGMENT_LOSS = 0.02
SEGMENT_BYTES = 3_000_000


def test_per_segment_draws_lose_the_same_first_sends_for_two_congestion_controls(tmp_path):
    """A real TCP transfer crosses the element twice with one seed, once with Reno and once
    with Cubic: per-segment draws drop the same first sends of the same bytes (however the two
    order and retransmit them), about 2% of them, and nothing that carries no data."""
    require_root_and_binary()
    teardown = Teardown()
    procs = Processes(teardown)
    steps = [{"at_s": 0, "delay_ms": 5, "loss_downlink": SEGMENT_LOSS, "loss_uplink": 0}]
    stats_of = {}
    try:
        server, client = forwarded_namespaces(teardown)
        (tmp_path / "sender.py").write_text(SENDER)
        (tmp_path / "receiver.py").write_text(RECEIVER)
        for k, cc in enumerate(("reno", "cubic")):
            port = PORT + 1 + k
            log = str(tmp_path / f"sender-{cc}.log")
            procs.start_and_wait(f"sender {cc}", server.exec_cmd([sys.executable, str(tmp_path / "sender.py"), cc,
                                                                  str(port), str(SEGMENT_BYTES)]),
                                 log, lambda: "listening" in open(log).read(), timeout_s=10, waiting_for="the sender")
            element = ScheduleElement(teardown, procs, server_ip=server.server_ip, steps=steps,
                                      work_dir=str(tmp_path / cc), seed=7, loss_draws="segment", name=cc)
            os.makedirs(tmp_path / cc)
            element.start()
            cp = subprocess.run(client.exec_cmd([sys.executable, str(tmp_path / "receiver.py"), server.server_ip,
                                                 str(port)]), capture_output=True, text=True, timeout=90)
            assert cp.returncode == 0, cp.stderr
            assert int(cp.stdout) == SEGMENT_BYTES
            stats_of[cc] = element.stop()
    finally:
        problems = teardown.run()
    assert problems == []

    down = {cc: st["steps"][0]["downlink"] for cc, st in stats_of.items()}
    up = {cc: st["steps"][0]["uplink"] for cc, st in stats_of.items()}
    for cc in down:
        print(f"{cc}: {down[cc]['packets_seen']} downlink packets, {down[cc]['dropped']} dropped "
              f"({down[cc]['first_sends_dropped']} first sends), {down[cc]['not_drawn']} without data; "
              f"uplink {up[cc]['packets_seen']} packets, {up[cc]['dropped']} dropped")
        assert stats_of[cc]["loss_draws"] == "segment"
        assert up[cc]["dropped"] == 0 and up[cc]["not_drawn"] == up[cc]["packets_seen"], "ACKs are never drawn"
    segments = SEGMENT_BYTES / 1448
    first = down["reno"]["first_sends_dropped"]
    # 2% of ~2,072 segments is ~41 (sd ~6.4): 15..75 is > 4 sd either side.
    assert 15 <= first <= 75, f"{first} first sends of ~{segments:.0f} segments dropped"
    assert down["cubic"]["first_sends_dropped"] == first, "the two congestion controls lost different first sends"
