"""`ccswitch-probe` on a real path: a server namespace, a client behind `mm-delay 20`, one 2 MB
transfer. The probe must see every data segment at both ends, measure the one-way delay that
mm-delay adds, and keep the server socket's TCP_INFO exactly as `ss -tin` shows it.

Needs root, mahimahi (user mmuser) and the built probe (`cargo build --release -p
ccswitch-probe`); it fails, not skips, without them. It creates a network namespace and attaches
BPF programs: run it under the machine-wide lock,
`flock /tmp/ccswitch-experiment.lock .venv/bin/python -m pytest tests/python/test_probe.py`.
"""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

from ccswitch.topology.namespaces import ServerNamespace, Teardown

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(REPO, "target", "release", "ccswitch-probe")
MM_USER = "mmuser"
DELAY_MS = 20
FILE_BYTES = 2_000_000
PORT = 8080
RECORD = np.dtype([("t_ns", "<u8"), ("owd_us", "<u4"), ("flow", "<u4"), ("bytes", "<u4"), ("flags", "<u4")])

# A one-connection HTTP server that answers one GET with FILE_BYTES bytes, then waits in
# CLOSE_WAIT (the client has closed) until told to close, so that `ss` can read the socket.
SERVER = r"""
import socket, sys
ip, port, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((ip, port))
s.listen(1)
print("listening", flush=True)
c, _ = s.accept()
req = b""
while b"\r\n\r\n" not in req:
    chunk = c.recv(4096)
    if not chunk:
        sys.exit("client closed before its request")
    req += chunk
header = ("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: application/octet-stream\r\n\r\n" % size).encode()
c.sendall(header + bytes(size))
print("header %d" % len(header), flush=True)
while c.recv(65536):
    pass
print("close_wait", flush=True)
sys.stdin.readline()
c.close()
"""


def require_machine():
    problems = []
    if os.geteuid() != 0:
        problems.append("not root")
    for tool in ("mm-delay", "curl", "runuser", "ip", "ss"):
        if shutil.which(tool) is None:
            problems.append(f"{tool} missing")
    if subprocess.run(["id", MM_USER], capture_output=True).returncode != 0:
        problems.append(f"user {MM_USER} missing")
    if not os.access(PROBE, os.X_OK):
        problems.append(f"{PROBE} not built (cargo build --release -p ccswitch-probe)")
    if problems:
        pytest.fail("the probe's live test needs: " + ", ".join(problems))


def read_line(proc, timeout_s, what):
    """One line of `proc`'s stdout within `timeout_s`, else fail naming `what` (the pipe is
    unbuffered, so a second line is never read ahead where select cannot see it)."""
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    if not ready:
        pytest.fail(f"no {what} within {timeout_s} s")
    line = proc.stdout.readline()
    if not line:
        err = proc.stderr.read() if proc.stderr else ""
        pytest.fail(f"{what}: the process exited ({proc.poll()}): {err.strip()}")
    return line.decode().strip()


def stop_group(proc):
    """SIGKILL the process group `proc` leads (it was started in a session of its own)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)


def ss_figures(ns, port):
    """The `ss -tin` figures of the server's CLOSE_WAIT socket on `port`."""
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-tinH", "state", "close-wait", "sport", f"= :{port}"],
                         capture_output=True, text=True, check=True).stdout
    text = " ".join(out.split())
    def num(name, default=None):
        m = re.search(rf"\b{name}:([0-9.]+)", text)
        if m is None:
            if default is None:
                pytest.fail(f"ss -tin shows no {name}: {text}")
            return default
        return float(m.group(1))
    retrans = re.search(r"\bretrans:\d+/(\d+)", text)
    peer = re.search(rf":{port}\s+\S+:(\d+)", text)
    assert peer, text
    return {
        "client_port": int(peer.group(1)),
        "srtt_ms": float(re.search(r"\brtt:([0-9.]+)/", text).group(1)),
        "min_rtt_ms": num("minrtt"),
        "data_segs_out": int(num("data_segs_out")),
        "bytes_acked": int(num("bytes_acked")),
        "delivered": int(num("delivered")),
        "bytes_retrans": int(num("bytes_retrans", 0)),
        "total_retrans": int(retrans.group(1)) if retrans else 0,
    }


def test_the_probe_measures_mm_delays_one_way_delay_every_segment_and_the_servers_tcp_info():
    require_machine()
    td = Teardown()
    work = tempfile.mkdtemp(prefix="ccsw-probe-")
    td.push("remove the work directory", lambda: shutil.rmtree(work, ignore_errors=True))
    os.chmod(work, 0o777)  # the client runs as mmuser and writes its PID and curl's figures here
    try:
        ns = ServerNamespace(td, tag=f"pr{os.getpid()}")
        ns.create()
        server = subprocess.Popen(ns.exec_cmd([sys.executable, "-c", SERVER, ns.server_ip, str(PORT), str(FILE_BYTES)]),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True, bufsize=0)
        td.push("stop the server", lambda: stop_group(server))
        assert read_line(server, 10, "server listening") == "listening"

        go = os.path.join(work, "go")
        client_sh = (f"echo $$ > {work}/pid; while [ ! -e {go} ]; do sleep 0.02; done; "
                     f"curl -sS -o /dev/null -w '%{{size_download}} %{{size_header}}' "
                     f"http://{ns.server_ip}:{PORT}/file > {work}/curl.out; touch {work}/done; "
                     # Stay until the test has read the server socket: leaving deletes the client
                     # namespace, whose sockets then reset the server's.
                     f"while [ ! -e {work}/leave ]; do sleep 0.02; done")
        client = subprocess.Popen(["runuser", "-u", MM_USER, "--", "mm-delay", str(DELAY_MS), "sh", "-c", client_sh],
                                  stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        td.push("stop the client", lambda: stop_group(client))
        pid_file = os.path.join(work, "pid")
        deadline = time.monotonic() + 10
        while not (os.path.exists(pid_file) and open(pid_file).read().strip()):
            assert client.poll() is None, f"mm-delay exited: {client.stderr.read().decode()}"
            assert time.monotonic() < deadline, "the client shell did not start within 10 s"
            time.sleep(0.02)
        receiver_pid = int(open(pid_file).read())

        prefix = os.path.join(work, "000001")
        probe = subprocess.Popen([PROBE, "--server-ip", ns.server_ip, "--ports", str(PORT),
                                  "--sender", f"{ns.name}:{ns.veth_srv}", "--receiver-pid", str(receiver_pid),
                                  "--packets", prefix + ".packets.bin", "--flows", prefix + ".flows.json", "--bpf-stats"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True, bufsize=0)
        td.push("stop the probe", lambda: stop_group(probe))
        assert read_line(probe, 20, "ready from the probe") == "ready"

        t_go = time.monotonic_ns()
        open(go, "w").close()
        deadline = time.monotonic() + 60
        while not os.path.exists(os.path.join(work, "done")):
            assert client.poll() is None, f"mm-delay exited: {client.stderr.read().decode()}"
            assert time.monotonic() < deadline, "the transfer did not end within 60 s"
            time.sleep(0.02)
        size_download, size_header = map(int, open(os.path.join(work, "curl.out")).read().split())
        assert size_download == FILE_BYTES
        header_bytes = int(read_line(server, 10, "the server's header size").split()[1])
        assert header_bytes == size_header
        assert read_line(server, 10, "the server's CLOSE_WAIT") == "close_wait"
        ss = ss_figures(ns.name, PORT)

        probe.send_signal(signal.SIGTERM)
        assert probe.wait(timeout=15) == 0, probe.stderr.read().decode()
        t_end = time.monotonic_ns()
        open(os.path.join(work, "leave"), "w").close()
        assert client.wait(timeout=10) == 0, client.stderr.read().decode()
        server.stdin.write(b"\n")

        meta = json.load(open(prefix + ".flows.json"))
        records = np.fromfile(prefix + ".packets.bin", dtype=RECORD)
        (flow,) = meta["flows"]
        matched = records[(records["flags"] & 1) == 1]
        owd_ms = matched["owd_us"] / 1000.0
        progs = {p["name"]: p for p in meta["programs"]}
        # Figures first, so that a failure below still shows them.
        print(f"\nprobe: {len(records)} records, {len(matched)} matched, one-way delay ms "
              f"p50 {np.median(owd_ms):.3f} p95 {np.percentile(owd_ms, 95):.3f} min {owd_ms.min():.3f} "
              f"max {owd_ms.max():.3f}; flow {json.dumps({k: v for k, v in flow.items() if k != 'tcp_info'})}")
        print(f"tcp_info {flow['tcp_info']}; ss -tin {ss}")
        for name, p in sorted(progs.items()):
            per_run = p["run_time_ns"] / p["run_cnt"] if p["run_cnt"] else float("nan")
            print(f"BPF cost {name}: {p['run_cnt']} runs, {per_run:.0f} ns per run")
        if progs["probe_egress"]["run_cnt"]:
            print(f"BPF cost probe_egress per data segment sent: "
                  f"{progs['probe_egress']['run_time_ns'] / flow['segments_sent']:.0f} ns")

        assert meta["version"] == 1 and meta["clock"] == "CLOCK_MONOTONIC"
        assert meta["ring_dropped"] == 0 and meta["ring_records"] == len(records)
        assert (flow["server_ip"], flow["server_port"], flow["client_port"]) == (ns.server_ip, PORT, ss["client_port"])
        # every data segment sent arrived (mm-delay neither drops nor reorders), and nothing else
        sent = FILE_BYTES + header_bytes
        assert flow["bytes_sent"] >= sent and abs(flow["bytes_received"] - sent) <= 3 * 1448
        assert 0 <= flow["segments_sent"] - flow["segments_received"] <= 3
        assert flow["unmatched"] <= 3 and len(matched) >= len(records) - 3
        assert len(records) == flow["segments_received"] and int(records["bytes"].sum()) == flow["bytes_received"]
        assert set(records["flow"]) == {flow["flow"]}
        # the records are in Python's monotonic clock, inside the transfer
        assert t_go <= records["t_ns"].min() and records["t_ns"].max() <= t_end
        assert meta["started_ns"] <= t_go and meta["stopped_ns"] <= t_end
        assert flow["first_sent_ns"] >= t_go and flow["last_received_ns"] == records["t_ns"].max()
        # mm-delay adds DELAY_MS each way; an idle path adds little on top. mm-delay stamps a
        # packet's arrival in whole milliseconds and releases it DELAY_MS later, so a packet can
        # take up to 1 ms less (measured over runs: min 19.1 ms, median 19.997-20.15 ms for 20 ms).
        assert DELAY_MS - 0.5 <= np.median(owd_ms) <= DELAY_MS + 3
        assert owd_ms.min() >= DELAY_MS - 1
        # the server socket's counters, as the kernel keeps them and ss shows them
        info = flow["tcp_info"]
        assert info is not None and info["state"] == "CLOSE_WAIT"
        assert info["min_rtt_us"] >= 2 * (DELAY_MS - 1) * 1000  # the same millisecond rounding, both ways
        assert (info["data_segs_out"], info["bytes_acked"], info["delivered"], info["total_retrans"],
                info["bytes_retrans"]) == (ss["data_segs_out"], ss["bytes_acked"], ss["delivered"],
                                           ss["total_retrans"], ss["bytes_retrans"])
        assert abs(info["srtt_us"] / 1000 - ss["srtt_ms"]) <= 0.002
        assert abs(info["min_rtt_us"] / 1000 - ss["min_rtt_ms"]) <= 0.002
        # every data segment the kernel sent went through the egress program (and only those)
        assert info["data_segs_out"] == flow["segments_sent"]
    finally:
        problems = td.run()
    assert not problems, problems
    assert not os.path.exists(f"/run/netns/{ns.name}")


def probe_links():
    """Names of the programs of every BPF link on the host whose program is one of the probe's
    (bpftool 7.1 does not show TCX attachments under `net show`, but lists their links)."""
    links = json.loads(subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True, check=True).stdout)
    progs = json.loads(subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout)
    names = {p["id"]: p.get("name", "") for p in progs}
    return sorted(names.get(link["prog_id"], "") for link in links if names.get(link["prog_id"], "").startswith("probe_"))


def wait_in_namespace(pid, ns_name, timeout_s=10):
    """Until `ip netns exec` has entered the namespace: before that the PID is in the root
    namespace, and a probe given it would attach ingress to every root-namespace device."""
    want = os.stat(f"/run/netns/{ns_name}").st_ino
    deadline = time.monotonic() + timeout_s
    while os.stat(f"/proc/{pid}/ns/net").st_ino != want:
        assert time.monotonic() < deadline, f"pid {pid} did not enter {ns_name} within {timeout_s} s"
        time.sleep(0.01)


def test_a_probe_that_cannot_attach_everywhere_says_where_exits_1_and_leaves_nothing_attached():
    require_machine()
    td = Teardown()
    work = tempfile.mkdtemp(prefix="ccsw-probe-")
    td.push("remove the work directory", lambda: shutil.rmtree(work, ignore_errors=True))
    try:
        ns = ServerNamespace(td, tag=f"pq{os.getpid()}")
        ns.create()
        sleeper = subprocess.Popen(ns.exec_cmd(["sleep", "30"]), start_new_session=True)
        td.push("stop the sleeper", lambda: stop_group(sleeper))
        wait_in_namespace(sleeper.pid, ns.name)
        common = ["--server-ip", ns.server_ip, "--ports", "8080,8081", "--packets", f"{work}/p.bin", "--flows", f"{work}/f.json"]
        # While it runs, its programs are attached (so the checks that they are gone can fail).
        probe = subprocess.Popen([PROBE, *common, "--sender", f"{ns.name}:{ns.veth_srv}", "--receiver-pid", str(sleeper.pid)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True, bufsize=0)
        td.push("stop the probe", lambda: stop_group(probe))
        assert read_line(probe, 20, "ready from the probe") == "ready"
        # egress on the server's device, ingress on the receiver's (its veth end), the tracepoint
        assert probe_links() == ["probe_egress", "probe_ingress", "probe_set_state"]
        probe.stdin.close()  # end of input stops it too
        assert probe.wait(timeout=15) == 0, probe.stderr.read().decode()
        assert probe_links() == []
        # The first sender attaches, the second has no such device: all of it is undone.
        cp = subprocess.run([PROBE, *common, "--sender", f"{ns.name}:{ns.veth_srv}", "--sender", f"{ns.name}:nosuchdev",
                             "--receiver-pid", str(sleeper.pid)], capture_output=True, text=True, timeout=30)
        assert cp.returncode == 1 and cp.stdout == ""
        assert len(cp.stderr.strip().splitlines()) == 1
        assert f"cannot attach egress on nosuchdev in {ns.name}" in cp.stderr
        assert probe_links() == []
        cp = subprocess.run([PROBE, *common, "--sender", f"{ns.name}:{ns.veth_srv}", "--receiver-pid", "999999999"],
                            capture_output=True, text=True, timeout=30)
        assert cp.returncode == 1 and "no namespace for pid 999999999" in cp.stderr
    finally:
        problems = td.run()
    assert not problems, problems
