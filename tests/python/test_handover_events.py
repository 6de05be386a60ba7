"""The agent's flow events in experiment results: reading them while the agent writes, matching
flows to transfers, attaching handovers to rows, and the flow plots. Synthetic event files."""

import json
import os

import pytest

from ccswitch.analysis import plots
from ccswitch.experiments import events as flow_events
from ccswitch.experiments.events import EventCollector, EventStream
from ccswitch.experiments.rundir import RunDirectoryError

T0_US = 1_700_000_000_000_000
CLIENT = "198.18.0.1"


def flow_event(t_us, sid, dport, algorithm="cubic", datapath=1):
    return {"event": "flow", "t_us": t_us, "datapath": datapath, "sid": sid, "src": "198.18.0.2",
            "sport": 8080, "dst": CLIENT, "dport": dport, "algorithm": algorithm}


def report(t_us, sid, acked, cwnd=20_000, inflight=15_000, algorithm="cubic", datapath=1):
    return {"event": "report", "t_us": t_us, "datapath": datapath, "sid": sid, "algorithm": algorithm,
            "cwnd_bytes": cwnd, "pacing_rate_bps": None, "rtt_us": 30_000, "acked_bytes": acked,
            "lost_packets": 0, "bytes_in_flight": inflight, "delivery_rate_bps": acked * 8 * 20, "timeout": False}


def handover_event(t_us, sid, frm, to, cwnd=20_000, datapath=1):
    return {"event": "handover", "t_us": t_us, "datapath": datapath, "sid": sid, "from": frm, "to": to,
            "kind": "temporal", "reason": f"rule 2: elapsed_s < 20 -> {to}",
            "features": {"elapsed_s": (t_us - T0_US) / 1e6, "samples": 1}, "cwnd_bytes": cwnd,
            "pacing_rate_bps": None}


def close(t_us, sid, algorithm, datapath=1):
    return {"event": "close", "t_us": t_us, "datapath": datapath, "sid": sid, "algorithm": algorithm,
            "reports": 3, "handovers": 1}


def write_events(path, events, tail=""):
    with open(path, "w") as f:
        f.write("".join(json.dumps(e) + "\n" for e in events) + tail)


def three_flows():
    """sid 1: an earlier transfer; sid 2: a stray connection during the transfer; sid 3: the
    transfer (client port 40003), handed over from cubic to bbr 1 s after it started."""
    s = 1_000_000
    return [
        flow_event(T0_US - 20 * s, 1, 40001), report(T0_US - 19 * s, 1, 90_000), close(T0_US - 18 * s, 1, "cubic"),
        flow_event(T0_US + 100_000, 3, 40003),
        flow_event(T0_US + 150_000, 2, 40002), report(T0_US + 200_000, 2, 500),
        report(T0_US + 500_000, 3, 30_000),
        handover_event(T0_US + 1_100_000, 3, "cubic", "bbr"),
        report(T0_US + 1_200_000, 3, 40_000, algorithm="bbr"),
        close(T0_US + 2_000_000, 3, "bbr"),
    ]


def test_stream_reads_complete_lines_only(tmp_path):
    path = tmp_path / "agent-001.jsonl"
    events = three_flows()
    line = json.dumps(events[3])
    write_events(path, events[:3], tail=line[:20])
    st = EventStream(str(path))
    st.poll()
    assert list(st.flows) == [(1, 1)] and st.flows[(1, 1)].close is not None
    with open(path, "a") as f:
        f.write(line[20:] + "\n" + "not json\n" + json.dumps({"event": "flow", "sid": 9}) + "\n")
        f.write("".join(json.dumps(e) + "\n" for e in events[4:]))
    st.poll()
    assert st.bad_lines == 2
    assert sorted(st.flows) == [(1, 1), (1, 2), (1, 3)]
    f3 = st.flows[(1, 3)]
    assert f3.peer == f"{CLIENT}:40003" and f3.acked_bytes == 70_000
    assert f3.algorithms() == ["cubic", "bbr"]
    st.poll()  # nothing new: nothing changes
    assert len(st.flows[(1, 3)].events) == 5


def test_a_reused_sid_starts_a_new_flow():
    st = EventStream("unused")
    for e in [flow_event(T0_US, 5, 1), close(T0_US + 10, 5, "cubic"), flow_event(T0_US + 20, 5, 2)]:
        st.add(e)
    assert st.flows[(1, 5)].peer == f"{CLIENT}:2" and len(st.flows[(1, 5)].events) == 1


def test_match_by_address_then_time():
    st = EventStream("unused")
    for e in three_flows():
        st.add(e)
    flows = list(st.flows.values())
    t1 = T0_US + 3_000_000
    fl, how = flow_events.match_flow(flows, T0_US, t1, f"{CLIENT}:40003")
    assert (fl.sid, how) == (3, "address+time")
    # the address of the stray connection picks it, even though it acknowledged less
    fl, how = flow_events.match_flow(flows, T0_US, t1, f"{CLIENT}:40002")
    assert fl.sid == 2
    # unknown address: the flow of the window that acknowledged most
    fl, how = flow_events.match_flow(flows, T0_US, t1, None)
    assert (fl.sid, how) == (3, "time (largest of 2)")
    # an address nobody has: fall back to the window
    fl, how = flow_events.match_flow(flows, T0_US, t1, f"{CLIENT}:1")
    assert fl.sid == 3 and how.startswith("time")
    # a window without flows (the earlier transfer lies outside it)
    assert flow_events.match_flow(flows, T0_US + 5_000_000, T0_US + 6_000_000, None) == (None, "none")
    # a live flow re-announced to a restarted agent just before the transfer is not it
    for e in [flow_event(T0_US - 300_000, 4, 40004), report(T0_US + 100_000, 4, 10_000_000)]:
        st.add(e)
    fl, how = flow_events.match_flow(list(st.flows.values()), T0_US, t1, None)
    assert (fl.sid, how) == (3, "time (largest of 2)")


def row(scheme="kernel:policy:p.toml"):
    return {"client": "c", "scheme": scheme, "repetition": 1, "file_bytes": 2_000_000, "tct_s": 1.9,
            "sha256_ok": True, "error": None}


def test_collector_attaches_handovers_and_writes_the_slice(tmp_path):
    events_path = tmp_path / "events" / "agent-001.jsonl"
    events_path.parent.mkdir()
    write_events(events_path, three_flows())
    c = EventCollector(str(tmp_path))
    r = row()
    c.attach(4, r, str(events_path), T0_US / 1e6, T0_US / 1e6 + 3, f"{CLIENT}:40003", wait_close_s=0)
    c.close()
    assert r["algorithms"] == ["cubic", "bbr"]
    (sw,) = r["handover_events"]
    assert sw["t_s"] == pytest.approx(1.0) and (sw["from"], sw["to"]) == ("cubic", "bbr")
    assert sw["reason"].startswith("rule 2") and sw["features"]["samples"] == 1 and sw["kind"] == "temporal"
    assert r["flow"] == {"datapath": 1, "sid": 3, "peer": f"{CLIENT}:40003", "matched_by": "address+time",
                         "closed": True, "reports": 2}
    assert r["events"] == "flows/004-c-2000000-kernel_policy_p.toml-rep1.jsonl"
    sliced = flow_events.read_events(str(tmp_path / r["events"]))
    assert [e["event"] for e in sliced] == ["flow", "report", "handover", "report", "close"]
    assert {e["sid"] for e in sliced} == {3}
    logged = [json.loads(l) for l in (tmp_path / "handovers.jsonl").read_text().splitlines()]
    assert logged == [dict(sw, transfer=4, client="c", scheme="kernel:policy:p.toml", repetition=1,
                           file_bytes=2_000_000)]


def test_collector_waits_for_the_close_event(tmp_path):
    events_path = tmp_path / "agent-001.jsonl"
    events = three_flows()
    write_events(events_path, events[:-1])
    calls = []

    def sleep(s):  # the agent writes the close event while the collector waits
        calls.append(s)
        write_events(events_path, events)

    r = row()
    EventCollector(str(tmp_path)).attach(1, r, str(events_path), T0_US / 1e6, T0_US / 1e6 + 3,
                                         f"{CLIENT}:40003", wait_close_s=5, sleep=sleep)
    assert calls and r["flow"]["closed"] is True


def test_collector_notes_a_missing_flow(tmp_path):
    events_path = tmp_path / "agent-001.jsonl"
    write_events(events_path, three_flows())
    r = row()
    EventCollector(str(tmp_path)).attach(1, r, str(events_path), T0_US / 1e6 + 60, T0_US / 1e6 + 61, None,
                                         wait_close_s=0)
    assert r["handover_events"] is None and r["events"] is None
    assert r["events_note"] == "no flow of agent-001.jsonl started during the transfer"
    r = row()
    EventCollector(str(tmp_path)).attach(1, r, None, 0, 1, None, wait_close_s=0)
    assert r["events_note"] == "the agent wrote no events file"


def test_strict_reading_names_the_line(tmp_path):
    p = tmp_path / "slice.jsonl"
    write_events(p, three_flows()[:2], tail='{"event": "report", "t_us": 1, "datapath": 1}\n')
    with pytest.raises(RunDirectoryError, match=r"slice.jsonl:3: report event without an integer 'sid'"):
        flow_events.read_events(str(p))
    with pytest.raises(RunDirectoryError, match="events file not found"):
        flow_events.read_events(str(tmp_path / "absent.jsonl"))


def test_series_bins_acknowledged_bytes():
    fl = flow_events.flow_of([e for e in three_flows() if e["sid"] == 3])
    s = plots.Series.of(fl)
    assert s.t == pytest.approx([0.4, 1.1])
    starts, mbps = s.throughput_bins(0.25)
    assert starts == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    # 30 kB in the bin of 0.4 s, 40 kB in the bin of 1.1 s
    assert mbps == pytest.approx([0, 30_000 * 8 / 0.25 / 1e6, 0, 0, 40_000 * 8 / 0.25 / 1e6])
    assert s.handovers[0]["t"] == pytest.approx(1.0)


def test_plot_run_draws_the_policy_transfers(tmp_path):
    events_path = tmp_path / "agent-001.jsonl"
    write_events(events_path, three_flows())
    rows = []
    for i, (scheme, t) in enumerate([("kernel:policy:p.toml", 0), ("kernel:bbr", 30), ("native:cubic", 40)], 1):
        r = dict(row(scheme), transfer=i)
        EventCollector(str(tmp_path)).attach(i, r, str(events_path), T0_US / 1e6 + t, T0_US / 1e6 + t + 3,
                                             None, wait_close_s=0)
        rows.append(r)
    written = plots.plot_run(str(tmp_path), rows)
    assert [os.path.basename(p) for p in written] == ["001-c-2000000-kernel_policy_p.toml-rep1.png"]
    with open(written[0], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(RunDirectoryError, match="transfer 3 .* has no events"):
        plots.plot_run(str(tmp_path), rows, transfer=3)
    with pytest.raises(RunDirectoryError, match="no transfer number 7"):
        plots.plot_run(str(tmp_path), rows, transfer=7)


def test_events_of_earlier_agents_are_read_as_handovers(tmp_path):
    p = tmp_path / "old.jsonl"
    p.write_text(json.dumps({"event": "switch", "t_us": 1, "datapath": 1, "sid": 3, "from": "cubic", "to": "bbr"})
                 + "\n" + json.dumps({"event": "close", "t_us": 2, "datapath": 1, "sid": 3, "switches": 1}) + "\n")
    sw, close = flow_events.read_events(str(p))
    assert sw["event"] == "handover" and (close["handovers"], "switches" in close) == (1, False)
