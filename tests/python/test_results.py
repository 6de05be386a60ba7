import json
import os

import pytest

from ccswitch.experiments import compat, results


def sample_rows():
    return [
        {"client": "c", "scheme": "native:cubic", "repetition": 1, "file_bytes": 1000, "tct_s": 0.5, "ttfb_s": 0.1,
         "connect_s": 0.05, "bytes": 1000, "http_code": 200, "sha256_ok": True, "cc_observed": "cubic",
         "started_at": "2024-01-01T00:00:00.000+00:00", "wall_s": 0.7, "error": None},
        {"client": "c", "scheme": "kernel:reno", "repetition": 1, "file_bytes": 1000, "tct_s": None, "ttfb_s": None,
         "connect_s": None, "bytes": None, "http_code": None, "sha256_ok": False, "cc_observed": None,
         "started_at": "2024-01-01T00:00:01.000+00:00", "wall_s": 150.0, "error": "timeout"},
    ]


def test_parquet_roundtrip(tmp_path):
    p = tmp_path / "transfers.parquet"
    results.write_transfers_parquet(p, sample_rows())
    back = results.read_transfers_parquet(p)
    assert [{k: r[k] for k in sample_rows()[0]} for r in back] == sample_rows()
    # columns a row does not carry are null
    assert all(r["algorithms"] is None and r["on_report_errors"] is None for r in back)
    assert sorted(os.listdir(tmp_path)) == ["transfers.parquet"]


def agent_row(**kw):
    """A row as the runner writes it for an agent scheme handed over once."""
    row = dict(sample_rows()[0], scheme="kernel:policy:mystique", curl_exit=None,
               path="RTT 50 ms, 24 Mbit/s, loss 1% down, queue 100 pkts", rtt_ms=50, delay_ms=25,
               loss_downlink=0.01, loss_uplink=0.0, downlink_mbps=24.0, uplink_mbps=24.0,
               downlink_trace=None, uplink_trace=None, queue_packets=100,
               algorithms=["cubic", "hybla"], on_report_errors=0,
               handover_events=[{"t_s": 0.5, "from": "cubic", "to": "hybla", "kind": "spatial", "reason": "rule 1",
                          "features": {"loss_rate": 0.0, "rtt_ms": 50.0}, "cwnd_bytes": 14480,
                          "pacing_rate_bps": None}])
    row.update(kw)
    return row


def test_parquet_carries_the_path_the_algorithms_and_the_handovers(tmp_path):
    p = tmp_path / "transfers.parquet"
    trace = "/usr/share/mahimahi/traces/TMobile-LTE-short.down"
    rows = [agent_row(), agent_row(downlink_mbps=None, uplink_mbps=None, downlink_trace=trace, uplink_trace=trace,
                                   queue_packets=None, algorithms=["Raises"], handover_events=[], on_report_errors=73)]
    results.write_transfers_parquet(p, rows)
    a, b = results.read_transfers_parquet(p)
    assert (a["rtt_ms"], a["loss_downlink"], a["downlink_mbps"], a["queue_packets"]) == (50, 0.01, 24.0, 100)
    assert a["path"] == "RTT 50 ms, 24 Mbit/s, loss 1% down, queue 100 pkts"
    assert a["algorithms"] == ["cubic", "hybla"] and a["handovers"] == 1
    (sw,) = a["handover_events"]
    assert (sw["from"], sw["to"], sw["kind"], sw["t_s"]) == ("cubic", "hybla", "spatial", 0.5)
    assert json.loads(sw["features"]) == {"loss_rate": 0.0, "rtt_ms": 50.0}
    assert (b["downlink_trace"], b["downlink_mbps"], b["queue_packets"]) == (trace, None, None)
    assert (b["handovers"], b["handover_events"], b["on_report_errors"]) == (0, [], 73)


def test_parquet_columns_are_the_documented_ones(tmp_path):
    import pyarrow.parquet as pq

    p = tmp_path / "t.parquet"
    results.write_transfers_parquet(p, [])
    names = pq.read_schema(p).names
    for required in ("client", "scheme", "repetition", "file_bytes", "tct_s", "ttfb_s", "bytes",
                     "sha256_ok", "started_at", "error"):
        assert required in names


def test_failed_write_leaves_nothing(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    p = tmp_path / "transfers.parquet"

    def half_write(table, where):
        with open(where, "wb") as f:
            f.write(b"PAR1 half")
        raise KeyboardInterrupt  # an interrupted write

    monkeypatch.setattr(pq, "write_table", half_write)
    with pytest.raises(KeyboardInterrupt):
        results.write_transfers_parquet(p, sample_rows())
    assert os.listdir(tmp_path) == []


def test_failed_write_keeps_previous_file(tmp_path):
    p = tmp_path / "summary.json"
    results.write_json_atomic(p, {"a": 1})
    with pytest.raises(ValueError):
        results.write_json_atomic(p, {"a": float("nan")})  # not valid JSON: refused
    assert json.loads(p.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["summary.json"]


def test_atomic_path_renames_only_on_success(tmp_path):
    p = tmp_path / "x.txt"
    with pytest.raises(RuntimeError):
        with results.atomic_path(p) as tmp:
            open(tmp, "w").write("partial")
            raise RuntimeError("boom")
    assert not p.exists() and os.listdir(tmp_path) == []
    with results.atomic_path(p) as tmp:
        open(tmp, "w").write("done")
    assert p.read_text() == "done"


def test_jsonl_log(tmp_path):
    p = tmp_path / "t.jsonl"
    log = results.JsonlLog(p)
    for r in sample_rows():
        log.append(r)
    log.close()
    assert [json.loads(l) for l in p.read_text().splitlines()] == sample_rows()


def test_plot(tmp_path):
    p = tmp_path / "tct.png"
    rows = sample_rows() + [dict(sample_rows()[0], tct_s=0.6, repetition=2)]
    shown = results.plot_tct(p, rows, ["c"], ["native:cubic", "kernel:reno"], title="t",
                             paths={"c": "RTT 50 ms, 24 Mbit/s, unbounded queue"})
    assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    (panel,) = shown
    assert panel["title"] == "c\nRTT 50 ms, 24 Mbit/s, unbounded queue", "the panel names the path"
    assert panel["marks"] == [(2, "1 failed")], "the failed kernel:reno transfer is marked under its scheme"


def test_a_panel_whose_transfers_all_failed_is_marked_with_aligned_ticks(tmp_path):
    p = tmp_path / "tct.png"
    failed = [dict(sample_rows()[1], client=c, scheme=s, repetition=k)
              for c in ("a", "b") for s in ("native:cubic", "kernel:reno", "kernel:py:m:C") for k in (1, 2)]
    ok = [dict(sample_rows()[0], client="b", scheme="native:cubic", repetition=3)]
    shown = results.plot_tct(p, failed + ok, ["a", "b"], ["native:cubic", "kernel:reno", "kernel:py:m:C"])
    a, b = shown
    assert a["ticks"] == [(1, "native:cubic"), (2, "kernel:reno"), (3, "kernel:py:m:C")]
    assert a["xlim"] == (0.5, 3.5), "every tick inside the panel, one per scheme"
    assert a["marks"] == [(1, "2 failed"), (2, "2 failed"), (3, "2 failed")]
    assert b["marks"] == [(1, "2 failed"), (2, "2 failed"), (3, "2 failed")]
    assert b["ticks"] == a["ticks"] and b["xlim"] == a["xlim"]


def test_rows_of_earlier_versions_are_read_in_todays_names():
    old = {"scheme": "switch:bbr", "switches": [{"t_s": 1.0}], "switch_stats": "switch/001.json",
           "switch_log": "logs/switch-001.log", "switch_exit": 0}
    row = compat.upgrade_row(dict(old))
    assert row == {"scheme": "ovs:bbr", "handover_events": [{"t_s": 1.0}], "ovs_stats": "switch/001.json",
                   "ovs_log": "logs/switch-001.log", "ovs_exit": 0}
    assert compat.upgrade_row({"scheme": "ccswitch:py:m:C"})["scheme"] == "kernel:py:m:C"
    assert compat.upgrade_row({"scheme": "native:cubic"})["scheme"] == "native:cubic"
