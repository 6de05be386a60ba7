"""rundir.RunDirectory, the one reader of a run directory: which transfer file a run's rows
come from (a finished run's Parquet with the log's per-transfer fields, else the interrupted
run's log), its stored scenario in today's spellings, its summary and events, and one error
type naming the file at fault."""

import json

import pytest

from ccswitch.experiments import results
from ccswitch.experiments.rundir import RunDirectory, RunDirectoryError

SCENARIO = """
name = "old"
timeout_s = 30
schemes = ["ccswitch:cubic", "switch:bbr", "native:cubic"]
switch_server_cc = "reno"
[[clients]]
name = "c"
delay_ms = 20
link = { mbps = 12 }
file_bytes = 1000
"""


def row(n, scheme, tct=1.0, **extra):
    """A transfer row as an older runner logged it (scheme spelled ccswitch:/switch:)."""
    r = {"transfer": n, "unit": f"u{n}", "client": "c", "scheme": scheme, "repetition": n, "file_bytes": 1000,
         "tct_s": tct, "sha256_ok": True, "error": None, "started_at": f"2026-11-24T10:00:0{n}+00:00",
         "client_addr": f"10.0.0.2:{40000 + n}"}
    r.update(extra)
    return r


def write_log(path, rows, tail=""):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + tail)


def events(sid):
    return [{"event": "flow", "t_us": 1_000_000, "datapath": 1, "sid": sid, "algorithm": "cubic", "mss": 1448},
            {"event": "switch", "t_us": 2_000_000, "datapath": 1, "sid": sid, "from": "cubic", "to": "bbr"},
            {"event": "close", "t_us": 3_000_000, "datapath": 1, "sid": sid, "switches": 1}]


@pytest.fixture
def finished(tmp_path):
    """A finished run: scenario, the log with an event slice, and the Parquet of the same rows."""
    (tmp_path / "scenario.toml").write_text(SCENARIO)
    (tmp_path / "flows").mkdir()
    write_log(tmp_path / "flows" / "001.jsonl", events(7))
    logged = [row(1, "ccswitch:cubic", events="flows/001.jsonl"), row(2, "switch:bbr", 2.0),
              row(3, "native:cubic", 3.0)]
    write_log(tmp_path / "transfers.jsonl", logged)
    results.write_transfers_parquet(tmp_path / "transfers.parquet", [dict(r) for r in logged])
    results.write_json_atomic(tmp_path / "summary.json", {"run": {"scenario": "old"}, "rows": []})
    return tmp_path


def test_a_finished_run_is_read_from_its_parquet_with_the_logs_own_fields_joined(finished):
    run = RunDirectory(finished)
    assert (run.source, run.finished) == ("transfers.parquet", True)
    assert [r["scheme"] for r in run.rows] == ["kernel:cubic", "ovs:bbr", "native:cubic"]
    first = run.rows[0]
    # Parquet columns (the schema's, nulls included) and the fields only the log keeps
    assert first["throughput_mbps"] is None and first["handovers"] is None
    assert (first["transfer"], first["events"], first["client_addr"]) == (1, "flows/001.jsonl", "10.0.0.2:40001")
    assert run.summary["run"]["scenario"] == "old"
    assert run.rows is run.rows


def test_a_transfers_events_are_read_in_todays_names(finished):
    run = RunDirectory(finished)
    first, second = run.rows[:2]
    assert run.has_events(first) and not run.has_events(second)
    flow, handover, close = run.events_of(first)
    assert (handover["event"], close["handovers"]) == ("handover", 1)
    with pytest.raises(RunDirectoryError, match=r": transfer 2 \(ovs:bbr\) has no events \(not an agent scheme\)"):
        run.events_of(second)
    (finished / "flows" / "001.jsonl").write_text('{"event": "flow", "t_us": 1}\n')
    with pytest.raises(RunDirectoryError, match=r"flows/001.jsonl:1: flow event without an integer 'datapath'"):
        run.events_of(first)


def test_an_interrupted_run_is_read_from_its_log_alone(tmp_path):
    (tmp_path / "scenario.toml").write_text(SCENARIO)
    # the writer was killed in the middle of the third row
    write_log(tmp_path / "transfers.jsonl", [row(1, "ccswitch:cubic"), row(2, "switch:bbr")], tail='{"client": "c", "sch')
    run = RunDirectory(tmp_path)
    assert (run.source, run.finished) == ("transfers.jsonl", False)
    assert [(r["transfer"], r["scheme"]) for r in run.rows] == [(1, "kernel:cubic"), (2, "ovs:bbr")]
    with pytest.raises(RunDirectoryError, match="no summary.json \\(not a finished run directory\\)"):
        run.summary


def test_a_parquet_an_earlier_invocation_left_is_not_the_runs_when_the_log_has_moved_on(finished):
    """A run that ended on an error wrote its Parquet; resumed and cut off again, its log holds
    more transfers than that Parquet: the log is the run's."""
    rows = results.read_jsonl(finished / "transfers.jsonl")
    write_log(finished / "transfers.jsonl", rows + [row(4, "kernel:cubic", 4.0)])
    run = RunDirectory(finished)
    assert (run.source, run.finished) == ("transfers.jsonl", False)
    assert [r["transfer"] for r in run.rows] == [1, 2, 3, 4]
    # the same number of transfers but another one: still not the Parquet's run
    write_log(finished / "transfers.jsonl", rows[:2] + [row(4, "kernel:cubic", 4.0)])
    assert RunDirectory(finished).source == "transfers.jsonl"


def test_a_stored_copy_with_only_parquet_is_read(finished):
    (finished / "transfers.jsonl").unlink()
    run = RunDirectory(finished)
    assert (run.source, run.finished) == ("transfers.parquet", True)
    assert [r["scheme"] for r in run.rows] == ["kernel:cubic", "ovs:bbr", "native:cubic"]
    assert "transfer" not in run.rows[0] and run.rows[0]["unit"] == "u1"


def test_the_stored_scenario_is_read_in_todays_spellings(finished):
    sc = RunDirectory(finished).scenario
    assert [s.label for s in sc.schemes] == ["kernel:cubic", "ovs:bbr", "native:cubic"]
    assert sc.ovs_server_cc == "reno"


def test_what_is_not_a_run_directory_is_said_with_the_file_at_fault(tmp_path):
    with pytest.raises(RunDirectoryError, match="absent: not a directory"):
        RunDirectory(tmp_path / "absent")
    empty = RunDirectory(tmp_path)
    assert not empty.has_transfers
    with pytest.raises(RunDirectoryError, match=r"not a run directory \(no transfers.jsonl or transfers.parquet\)"):
        empty.rows
    with pytest.raises(RunDirectoryError, match=r"not a run directory \(no scenario.toml\)"):
        empty.scenario
    (tmp_path / "scenario.toml").write_text("name = \n")
    with pytest.raises(RunDirectoryError, match="scenario.toml: TOML syntax error"):
        RunDirectory(tmp_path).scenario
    (tmp_path / "transfers.parquet").write_bytes(b"not parquet")
    with pytest.raises(RunDirectoryError, match="transfers.parquet: cannot read: "):
        RunDirectory(tmp_path).rows
    (tmp_path / "transfers.parquet").unlink()
    write_log(tmp_path / "transfers.jsonl", [row(1, "kernel:cubic")], tail="garbage\n" + json.dumps(row(2, "kernel:cubic")) + "\n")
    with pytest.raises(RunDirectoryError, match="transfers.jsonl: row 2: not a JSON object"):
        RunDirectory(tmp_path).rows
    (tmp_path / "summary.json").write_text("{")
    with pytest.raises(RunDirectoryError, match="summary.json: not JSON"):
        RunDirectory(tmp_path).summary
