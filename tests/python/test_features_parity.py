"""One feature implementation: the features `ccswitch._native` computes from reports are the
ones the agent decides on. A real `ccswitch-agent` (--events, --control-socket, a policy whose
only rule always switches, so its first decision is logged with its features) is driven by a
fake CCP datapath with irregular reports (RTT samples missing, losses, partial segments, rates
coming and going, timeouts). Checked, bit for bit:

- after every report, the agent's live features (control interface) against
  `_native.FeatureTracker` fed the same report;
- the features of the agent's `switch` event against `_native.decision_features` over the
  flow's `report` events from the same events file (the dataset's path), at the same report;
- that the `flow` event carries the flow's MSS, which the dataset needs.

Needs the Rust binaries (make build); fails rather than skips without them."""

import json
import os
import random
import socket
import struct
import subprocess
import time

import pytest

from ccswitch import _native
from ccswitch.control import ControlClient
from ccswitch.experiments import runner
from ccswitch.experiments.topology import python_agent_env

START_TIMEOUT_S = 10.0
ANSWER_TIMEOUT_S = 5.0
# CCP wire protocol (datapaths/ccp/src/wire.rs): header type u16, len u16, sid u32.
CREATE, MEASURE, INSTALL_EXPR, UPDATE_FIELDS, CHANGE_PROG, READY = 0, 1, 2, 3, 4, 5
HEADER = struct.Struct("<HHI")
# The agent's standard program reports these registers, in declaration order.
REPORT_FIELDS = ["acked", "lost", "timeout", "ecn", "rtt", "minrtt", "inflight", "rate", "now"]
MSS_BYTES = 1_388
WINDOW, SAMPLES, MIN_SAMPLES = "first", 20, 8

POLICY = f"""
name = "parity"
initial = "reno"
[window]
kind = "{WINDOW}"
samples = {SAMPLES}
[decide]
min_samples = {MIN_SAMPLES}
[[rule]]
use = "cubic"
"""


def agent_binary():
    path = os.path.join(runner.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")
    return path


class Agent:
    def __init__(self, tmp_path):
        self.socket = str(tmp_path / "agent.sock")
        self.control = str(tmp_path / "control.sock")
        self.events = str(tmp_path / "events.jsonl")
        self.log_path = str(tmp_path / "agent.log")
        policy = tmp_path / "parity.toml"
        policy.write_text(POLICY)
        with open(self.log_path, "w") as log:
            self.proc = subprocess.Popen(
                [agent_binary(), "--socket", self.socket, "--control-socket", self.control,
                 "--policy", str(policy), "--events", self.events, "--log-level", "debug"],
                stdout=log, stderr=subprocess.STDOUT, env=python_agent_env(dict(os.environ)),
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while not os.path.exists(self.control):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                with open(self.log_path) as f:
                    pytest.fail(f"the agent did not start:\n{f.read()}")
            time.sleep(0.02)

    def read_events(self):
        with open(self.events) as f:
            return [json.loads(line) for line in f]

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, 9)
        self.proc.wait()


class Datapath:
    """Announces itself, creates flows and sends reports, waiting for each answer."""

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
        self.send(READY, 0, struct.pack("<I", 7))
        msg_type, _, body = self.recv()
        assert msg_type == INSTALL_EXPR, msg_type
        self.uid = struct.unpack_from("<I", body)[0]

    def send(self, msg_type, sid, body):
        self.s.sendall(HEADER.pack(msg_type, HEADER.size + len(body), sid) + body)

    def recv(self):
        while len(self.buf) < HEADER.size or len(self.buf) < HEADER.unpack_from(self.buf)[1]:
            chunk = self.s.recv(65536)
            assert chunk, "the agent closed the datapath connection"
            self.buf += chunk
        msg_type, length, sid = HEADER.unpack_from(self.buf)
        body, self.buf = self.buf[HEADER.size:length], self.buf[length:]
        return msg_type, sid, body

    def answer_for(self, sid):
        while True:
            msg_type, got_sid, _ = self.recv()
            if got_sid == sid and msg_type in (UPDATE_FIELDS, CHANGE_PROG):
                return msg_type

    def create(self, sid, mss):
        """A flow to a destination of its own (10.SID.0.2), so that no flow's algorithm is
        chosen from what an earlier flow to the same destination ended on."""
        ip = lambda a: struct.unpack(">I", socket.inet_aton(a))[0]
        body = struct.pack("<6I", 10 * mss, mss, ip("10.250.0.1"), 8080, ip(f"10.{sid}.0.2"), 40_000 + sid) + bytes(64)
        self.send(CREATE, sid, body)
        self.answer_for(sid)

    def report(self, sid, values):
        fields = [values.get(name, 0) for name in REPORT_FIELDS]
        self.send(MEASURE, sid, struct.pack(f"<II{len(fields)}Q", self.uid, len(fields), *fields))
        self.answer_for(sid)

    def close_flow(self, sid):
        self.send(MEASURE, sid, struct.pack("<II", 0, 0))


def irregular_reports(seed, n):
    """Datapath report registers: RTT samples missing, losses, partial segments, rates that
    come and go, the odd timeout."""
    rng = random.Random(seed)
    now = 3_000_000 + rng.randrange(1_000_000)
    out = []
    for _ in range(n):
        now += rng.randrange(500, 90_000)
        rtt = 0 if rng.random() < 0.2 else rng.randrange(8_000, 400_000)
        out.append(dict(
            acked=rng.randrange(0, 60) * MSS_BYTES + rng.choice([0, rng.randrange(1, MSS_BYTES)]),
            lost=rng.randrange(1, 6) if rng.random() < 0.15 else 0,
            timeout=1 if rng.random() < 0.02 else 0,
            rtt=rtt, minrtt=rtt, inflight=rng.randrange(0, 80) * MSS_BYTES,
            rate=0 if rng.random() < 0.3 else rng.randrange(1, 50_000_000),
            now=now,
        ))
    return out


def as_event_report(values):
    """A report as the native module reads it: the keys of an agent `report` event."""
    return {"rtt_us": values["rtt"], "acked_bytes": values["acked"], "lost_packets": values["lost"],
            "delivery_rate_bps": values["rate"] * 8, "timeout": bool(values["timeout"]), "dp_us": values["now"]}


@pytest.fixture
def agent(tmp_path):
    a = Agent(tmp_path)
    yield a
    a.stop()


def test_the_agents_features_are_the_native_modules_report_by_report_and_at_its_decision(agent):
    dp = Datapath(agent.socket)
    flows = {sid: irregular_reports(seed=sid, n=45) for sid in (1, 2, 3)}
    compared = 0
    try:
        with ControlClient(agent.control, timeout=ANSWER_TIMEOUT_S) as c:
            for sid, reports in flows.items():
                dp.create(sid, MSS_BYTES)
                tracker = _native.FeatureTracker(WINDOW, SAMPLES)
                for values in reports:
                    dp.report(sid, values)
                    tracker.observe(as_event_report(values), MSS_BYTES)
                    live = [f for f in c.list_flows() if f["sid"] == sid]
                    assert len(live) == 1, live
                    assert live[0]["features"] == tracker.features(), f"flow {sid}, after {values}"
                    compared += 1
                dp.close_flow(sid)
    finally:
        dp.s.close()
    assert compared == 3 * 45

    events = agent.read_events()
    for sid, sent in flows.items():
        mine = [e for e in events if e.get("sid") == sid]
        flow = [e for e in mine if e["event"] == "flow"]
        assert len(flow) == 1 and flow[0]["mss"] == MSS_BYTES, flow
        logged = [e for e in mine if e["event"] == "report"]
        assert len(logged) == len(sent)
        switches = [e for e in mine if e["event"] == "switch"]
        assert [(s["from"], s["to"], s["kind"]) for s in switches] == [("reno", "cubic", "spatial")], switches

        replay = _native.decision_features(logged, flow[0]["mss"], WINDOW, SAMPLES, MIN_SAMPLES)
        assert replay["decided"]
        assert replay["features"] == switches[0]["features"], f"flow {sid}"
        assert replay["features"]["samples"] == MIN_SAMPLES
        # The decision came with the report the native replay names: the agent logs the switch
        # while it handles that report, before the report's own event.
        at = replay["report_index"]
        assert replay["dp_us"] == sent[at]["now"] == logged[at]["dp_us"]
        order = [e["event"] for e in mine]
        report_positions = [i for i, kind in enumerate(order) if kind == "report"]
        assert report_positions[at - 1] < order.index("switch") < report_positions[at], order
        # The events file holds what the datapath sent: the same replay from the raw reports.
        assert _native.decision_features([as_event_report(v) for v in sent], MSS_BYTES, WINDOW, SAMPLES, MIN_SAMPLES) == replay


def test_a_flow_that_ends_before_the_decision_gives_its_last_features():
    reports = [as_event_report(v) for v in irregular_reports(seed=9, n=4)]
    tracker = _native.FeatureTracker(WINDOW, SAMPLES)
    for r in reports:
        tracker.observe(r, MSS_BYTES)
    d = _native.decision_features(reports, MSS_BYTES, WINDOW, SAMPLES, MIN_SAMPLES)
    assert (d["decided"], d["report_index"], d["dp_us"]) == (False, None, None)
    assert d["features"] == tracker.features() and not tracker.window_full()
    assert list(d["features"]) == _native.FEATURE_NAMES


def test_bad_reports_and_windows_are_refused_with_what_is_wrong():
    with pytest.raises(KeyError, match=r'reports\[1\] has no "dp_us"'):
        _native.decision_features([as_event_report(irregular_reports(1, 1)[0]), {"rtt_us": 1}], MSS_BYTES, "first", 5, 5)
    with pytest.raises(ValueError, match='window: kind = "rolling"'):
        _native.FeatureTracker("rolling", 5)
    with pytest.raises(ValueError, match="min_samples = 6: must be between 1 and samples"):
        _native.decision_features([], MSS_BYTES, "sliding", 5, 6)
    with pytest.raises(ValueError, match=r'report "rtt_us" = -1: not a whole number'):
        _native.FeatureTracker("first", 5).observe({**as_event_report(irregular_reports(1, 1)[0]), "rtt_us": -1}, MSS_BYTES)
