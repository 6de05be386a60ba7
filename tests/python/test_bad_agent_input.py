"""Malformed CCP messages from the agent side reach the real shim mid-run (through a proxy
that injects them before the agent's first message): the shim rejects each with a logged
error, keeps running, and the flow that follows is still driven by the agent and arrives
intact. Needs root, mahimahi and the Rust binaries."""

import os
import socket
import struct
import threading

from fake_datapath import INSTALL_EXPR, UPDATE_FIELDS, frame
from live import set_up_runner

SCENARIO = """
name = "bad-agent-input"
repetitions = 1
schemes = ["kernel:reno"]
timeout_s = 60
agent_settle_s = 0.5
[[clients]]
name = "wan-40ms"
delay_ms = 20
link = { mbps = 24 }
queue_packets = 200
file_bytes = 3_000_000
"""

def malformed_frames():
    unknown_type = frame(42, 0, b"")
    # 300 instructions: beyond libccp's limit of 256
    too_long_program = frame(INSTALL_EXPR, 0, struct.pack("<III", 77, 0, 300) + bytes(300 * 16))
    # one update announced, five of its thirteen bytes present
    short_update = frame(UPDATE_FIELDS, 1, struct.pack("<I", 1) + bytes(5))
    # a well-formed program whose expression points past its single instruction
    expr = struct.pack("<IIII", 5, 1, 0, 1)
    instr = bytes([0]) + struct.pack("<BI", 4, 0) + struct.pack("<BI", 1, 1) + struct.pack("<BI", 1, 1)
    dangling_program = frame(INSTALL_EXPR, 0, struct.pack("<III", 78, 1, 1) + expr + instr)
    return [unknown_type, too_long_program, short_update, dangling_program]


class InjectingProxy(threading.Thread):
    """Accepts the shim, connects it to the agent, and puts `inject` in front of the first
    bytes the agent sends (a frame boundary), forwarding everything else untouched."""

    def __init__(self, listen_path, agent_path, inject):
        super().__init__(daemon=True)
        self.agent_path, self.inject = agent_path, inject
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(listen_path)
        self.server.listen(4)
        self.injected = threading.Event()

    def run(self):
        try:
            shim, _ = self.server.accept()
        except OSError:
            return
        agent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        agent.connect(self.agent_path)
        threading.Thread(target=self.pump, args=(shim, agent, b""), daemon=True).start()
        self.pump(agent, shim, b"".join(self.inject))

    def pump(self, src, dst, prefix):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if prefix:
                    data, prefix = prefix + data, b""
                    self.injected.set()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.server.close()


def test_shim_rejects_malformed_agent_messages_and_keeps_serving(tmp_path):
    proxies = []

    def interpose_proxy(r):
        r.daemons.shim_socket = os.path.join(r.work, "proxy.sock")
        proxies.append(InjectingProxy(r.daemons.shim_socket, r.daemons.socket, malformed_frames()))
        proxies[0].start()

    try:
        with set_up_runner(tmp_path, SCENARIO, before_scheme=interpose_proxy) as r:
            client, scheme = r.sc.clients[0], r.sc.schemes[0]
            row = r.transfer(0, client, scheme, client.file_sizes[0])
            assert proxies[0].injected.is_set()
            assert row["error"] is None and row["sha256_ok"], row
            assert r.daemons.shim.poll() is None, "the shim survived"
            with open(os.path.join(r.log_dir, "kernel-shim.log")) as f:
                log = f.read()
            assert log.count("rejected a malformed message from the agent") == 3, log
            assert "rejected a program" in log and "program=78" in log, log
            agent_log_name = next(n for n in os.listdir(r.log_dir) if n.startswith("agent-"))
            with open(os.path.join(r.log_dir, agent_log_name)) as f:
                assert "flow created" in f.read(), "the agent still drove the flow"
    finally:
        for p in proxies:
            p.close()
