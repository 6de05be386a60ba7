"""A fake CCP datapath for the tests that drive a real `ccswitch-agent` over its datapath
socket, and the constants of the CCP wire protocol it speaks."""

import socket
import struct
import time

from ccswitch import _native

START_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 5.0

# CCP wire protocol (protocol/src/wire.rs): header type u16, len u16, sid u32.
CREATE, MEASURE, INSTALL_EXPR, UPDATE_FIELDS, CHANGE_PROG, READY = (
    _native.CCP_MESSAGE_TYPES[name] for name in ("CREATE", "MEASURE", "INSTALL_EXPR", "UPDATE_FIELDS", "CHANGE_PROG", "READY"))
HEADER = struct.Struct("<HHI")
# The registers the standard program reports, in MEASURE order (protocol/src/standard.rs).
REPORT_FIELDS = list(_native.STANDARD_REPORT_FIELDS)

# What a flow is unless a test says otherwise.
MSS_BYTES = 1448
RTT_US = 50_000
SERVER, SERVER_PORT = "192.168.7.2", 8080
CLIENT, CLIENT_PORT = "10.20.0.9", 40_000


def frame(msg_type, sid, body):
    return HEADER.pack(msg_type, HEADER.size + len(body), sid) + body


def ip(addr):
    return struct.unpack(">I", socket.inet_aton(addr))[0]


class FakeDatapath:
    """A datapath that announces itself, creates flows and sends reports, waiting for the
    agent's answer to each so that the agent's state is settled when the test looks."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(ANSWER_TIMEOUT_S)
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                self.s.connect(path)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                assert time.monotonic() < deadline, f"the agent did not listen on {path}"
                time.sleep(0.02)
        self.buf = b""
        self.uid = None
        self.now_us = 1_000_000
        self.send(READY, 0, struct.pack("<I", 7))
        msg_type, _, body = self.recv()
        assert msg_type == INSTALL_EXPR, msg_type
        self.uid = struct.unpack_from("<I", body)[0]

    def send(self, msg_type, sid, body):
        self.s.sendall(frame(msg_type, sid, body))

    def recv(self):
        while len(self.buf) < HEADER.size or len(self.buf) < HEADER.unpack_from(self.buf)[1]:
            chunk = self.s.recv(65536)
            assert chunk, "the agent closed the datapath connection"
            self.buf += chunk
        msg_type, length, sid = HEADER.unpack_from(self.buf)
        body, self.buf = self.buf[HEADER.size:length], self.buf[length:]
        return msg_type, sid, body

    def answer_for(self, sid):
        """The agent's window update or program change for `sid` (skipping installs)."""
        while True:
            msg_type, got_sid, _ = self.recv()
            if got_sid == sid and msg_type in (UPDATE_FIELDS, CHANGE_PROG):
                return msg_type

    def create(self, sid, src=SERVER, sport=SERVER_PORT, dst=CLIENT, dport=CLIENT_PORT, mss=MSS_BYTES):
        body = struct.pack("<6I", 10 * mss, mss, ip(src), sport, ip(dst), dport) + bytes(64)
        self.send(CREATE, sid, body)
        assert self.answer_for(sid) == CHANGE_PROG

    def report(self, sid, values=None):
        """A report of `values` (registers by name, 0 where missing); by default one RTT
        later than the last default report, ten segments acknowledged and none lost."""
        if values is None:
            self.now_us += RTT_US
            values = dict(acked=10 * MSS_BYTES, rtt=RTT_US, minrtt=RTT_US, inflight=10 * MSS_BYTES,
                          rate=2_000_000, now=self.now_us)
        fields = [values.get(name, 0) for name in REPORT_FIELDS]
        self.send(MEASURE, sid, struct.pack(f"<II{len(fields)}Q", self.uid, len(fields), *fields))
        self.answer_for(sid)

    def close_flow(self, sid):
        self.send(MEASURE, sid, struct.pack("<II", 0, 0))

    def close(self):
        self.s.close()
