"""One feature implementation: the features `ccswitch._native` computes from reports are the
ones the agent decides on. A real `ccswitch-agent` (--events, --operator-socket, a policy whose
only rule always hands over, so its first decision is logged with its features) is driven by a
fake CCP datapath with irregular reports (RTT samples missing, losses, partial segments, rates
coming and going, timeouts). Checked, bit for bit:

- after every report, the agent's live features (operator interface) against
  `_native.FeatureTracker` fed the same report;
- the features of the agent's `handover` event against `_native.decision_features` over the
  flow's `report` events from the same events file (the dataset's path), at the same report;
- that the `flow` event carries the flow's MSS, which the dataset needs.

Needs the Rust binaries (make build); fails rather than skips without them."""

import json
import random
import time

import pytest

from ccswitch import _native
from agent_process import Agent
from fake_datapath import FakeDatapath

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


def start_agent(tmp_path):
    policy = tmp_path / "parity.toml"
    policy.write_text(POLICY)
    return Agent(tmp_path, ["--policy", str(policy), "--events", str(tmp_path / "events.jsonl"), "--log-level", "debug"])


def read_events(agent):
    with open(agent.dir / "events.jsonl") as f:
        return [json.loads(line) for line in f]


def read_events_once_closed(agent, sids, timeout_s=10.0):
    """The events file once it holds the close line of every flow in `sids`. The agent handles
    a close after the test has sent it, and a flow's buffered lines reach the file with its
    close line: read at once, the last flow's reports could still be in the buffer."""
    deadline = time.monotonic() + timeout_s
    while True:
        events = read_events(agent)
        closed = {e.get("sid") for e in events if e.get("event") == "close"}
        if set(sids) <= closed or time.monotonic() > deadline:
            return events
        time.sleep(0.02)


def create_flow(dp, sid):
    """A flow to a destination of its own (10.SID.0.2), so that no flow's algorithm is
    chosen from what an earlier flow to the same destination ended on."""
    dp.create(sid, src="10.250.0.1", sport=8080, dst=f"10.{sid}.0.2", dport=40_000 + sid, mss=MSS_BYTES)


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
    a = start_agent(tmp_path)
    yield a
    a.stop()


def test_the_agents_features_are_the_native_modules_report_by_report_and_at_its_decision(agent):
    dp = FakeDatapath(agent.socket)
    flows = {sid: irregular_reports(seed=sid, n=45) for sid in (1, 2, 3)}
    compared = 0
    try:
        with agent.client() as c:
            for sid, reports in flows.items():
                create_flow(dp, sid)
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
        dp.close()
    assert compared == 3 * 45

    events = read_events_once_closed(agent, flows)
    for sid, sent in flows.items():
        mine = [e for e in events if e.get("sid") == sid]
        flow = [e for e in mine if e["event"] == "flow"]
        assert len(flow) == 1 and flow[0]["mss"] == MSS_BYTES, flow
        assert [e["reports"] for e in mine if e["event"] == "close"] == [len(sent)], f"flow {sid}'s close line"
        logged = [e for e in mine if e["event"] == "report"]
        assert len(logged) == len(sent)
        handovers = [e for e in mine if e["event"] == "handover"]
        assert [(s["from"], s["to"], s["kind"]) for s in handovers] == [("reno", "cubic", "spatial")], handovers

        replay = _native.decision_features(logged, flow[0]["mss"], WINDOW, SAMPLES, MIN_SAMPLES)
        assert replay["decided"]
        assert replay["features"] == handovers[0]["features"], f"flow {sid}"
        assert replay["features"]["samples"] == MIN_SAMPLES
        # The decision came with the report the native replay names: the agent logs the handover
        # while it handles that report, before the report's own event.
        at = replay["report_index"]
        assert replay["dp_us"] == sent[at]["now"] == logged[at]["dp_us"]
        order = [e["event"] for e in mine]
        report_positions = [i for i, kind in enumerate(order) if kind == "report"]
        assert report_positions[at - 1] < order.index("handover") < report_positions[at], order
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
