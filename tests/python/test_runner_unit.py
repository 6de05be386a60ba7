import pytest

from ccswitch.experiments import errors, progress, results, runner, tools
from ccswitch.experiments.scenario import loads_scenario

SC = """
name = "u"
schemes = ["native:reno"]
[[clients]]
name = "a"
delay_ms = 25
loss_downlink = 0.01
link = { mbps = 24 }
queue_packets = 100
file_bytes = 10
[[clients]]
name = "b"
link = { mbps = 24 }
file_bytes = 10
"""


def test_mahimahi_command():
    sc = loads_scenario(SC, check_files=False)
    a, b = sc.clients
    assert tools.mahimahi_command(a, "U", "D") == [
        "mm-delay", "25", "mm-loss", "downlink", "0.01", "mm-link", "U", "D",
        "--uplink-queue=droptail", "--uplink-queue-args=packets=100",
        "--downlink-queue=droptail", "--downlink-queue-args=packets=100"]
    assert tools.mahimahi_command(b, "U", "D") == ["mm-link", "U", "D"]


def test_parse_ss_cc():
    text = ("ESTAB 0 0 198.18.0.2:8080 198.18.0.1:40000\n"
            "\t cubic wscale:7,7 rto:204 rtt:3.1/1.5 mss:1448 cwnd:10\n")
    assert tools.parse_ss_cc(text) == "cubic"
    assert tools.parse_ss_cc("0 0 a:1 b:2\n\t ccswitch wscale:7,7 rto:201\n") == "ccswitch"
    assert tools.parse_ss_cc("") is None


# What a curl that timed out inside mahimahi leaves on stderr (recorded on this machine with
# `mm-delay 5 mm-link T T -- curl ... --max-time 1`, status and address changed to a timeout):
# curl's own line first, then mahimahi's "Died on" lines quoting whole command lines.
MM_CURL_TIMEOUT = (
    "curl: (28) Operation timed out after 1000 milliseconds with 52000 out of 4000000 bytes received\n"
    "Died on std::runtime_error: `curl -sS --noproxy * --max-time 1 -o /tmp/x -w CCSWITCH-CURL %{time_total} "
    "%{http_code}\\n http://198.18.0.2:8080/f-4000000.bin': process exited with failure status 28\n"
    "Died on std::runtime_error: `packetshell': process exited with failure status 1\n"
    "Died on std::runtime_error: `mm-link /tmp/t /tmp/t -- curl -sS --noproxy * --max-time 1 -o /tmp/x -w "
    "CCSWITCH-CURL %{time_total} %{http_code}\\n http://198.18.0.2:8080/f-4000000.bin': process exited with "
    "failure status 1\n"
)


def test_a_curl_failure_through_mahimahi_is_recorded_as_curls_own_message():
    assert tools.curl_error(MM_CURL_TIMEOUT) == (
        28, "curl: (28) Operation timed out after 1000 milliseconds with 52000 out of 4000000 bytes received")
    assert tools.transfer_error(1, MM_CURL_TIMEOUT) == tools.curl_error(MM_CURL_TIMEOUT)[1]
    assert tools.curl_error("Died on std::runtime_error: `packetshell': process exited\n") is None


def test_a_mahimahi_failure_without_curl_keeps_its_first_line_with_command_lines_shortened():
    stderr = ("Died on std::runtime_error: `mm-link /tmp/t /tmp/t -- curl -sS --noproxy * -o x "
              "http://a/b': process exited with failure status 1\nmore\n")
    assert tools.transfer_error(1, stderr) == ("exit 1: Died on std::runtime_error: `mm-link': process exited "
                                                "with failure status 1")
    assert tools.transfer_error(1, "") == "exit 1: no message"


def test_the_progress_line_says_ok_errors_and_python_exceptions():
    ok = {"error": None, "sha256_ok": True}
    assert progress.transfer_status(ok) == "ok"
    assert progress.transfer_status(dict(ok, on_report_errors=0)) == "ok"
    assert progress.transfer_status(dict(ok, on_report_errors=73)) == "ok (73 on_report errors)"
    assert progress.transfer_status(dict(ok, on_report_errors=1)) == "ok (1 on_report error)"
    assert progress.transfer_status(dict(ok, on_report_errors=0, python_timeouts=2, python_skipped=1,
                                         python_bad_values=0)) == "ok (2 python timeouts, 1 skipped python report)"
    assert progress.transfer_status({"error": "curl: (28) x", "sha256_ok": False}) == "ERROR curl: (28) x"
    assert progress.transfer_status({"error": None, "sha256_ok": False}) == "SHA-256 MISMATCH"


def test_rows_carry_the_path_and_agent_columns_before_the_transfer_runs():
    sc = loads_scenario(SC.replace('schemes = ["native:reno"]', 'schemes = ["native:reno", "kernel:py:m:C"]'),
                        check_files=False)
    a = sc.clients[0]
    native = runner.Runner.new_row(0, a, sc.schemes[0], 10)
    agent = runner.Runner.new_row(1, a, sc.schemes[1], 10)
    assert (native["rtt_ms"], native["loss_downlink"], native["downlink_mbps"], native["queue_packets"]) == (50, 0.01, 24.0, 100)
    assert native["path"] == "RTT 50 ms, 24 Mbit/s, loss 1% down, queue 100 pkts"
    assert "on_report_errors" not in native
    assert (agent["repetition"], agent["algorithms"], agent["on_report_errors"]) == (2, None, None)
    assert (agent["python_timeouts"], agent["python_skipped"], agent["python_bad_values"]) == (None, None, None)


# ------------------------------------------- the run loop with its network replaced by fakes

LOOP = """
name = "loop"
repetitions = 2
schemes = ["native:cubic", "kernel:py:m:Broken", "kernel:reno"]
[[clients]]
name = "c"
delay_ms = 10
link = { mbps = 24 }
file_bytes = 1000
"""


def fake_runner(tmp_path, monkeypatch, prepare, text=LOOP):
    """A Runner whose setup, scheme preparation and transfers are fakes (no root, no network):
    `prepare(scheme)` may raise; every transfer that runs succeeds in 1 s."""
    from ccswitch.experiments import runner as rmod

    sc = loads_scenario(text, check_files=False)
    r = runner.Runner(sc, str(tmp_path / "out"), quiet=True, schemes_checked=True)
    ran = []

    def setup():
        r.daemons = None
        r.collector = None
        r.current_cc = None

    def transfer(rep, client, scheme, size, number=None):
        ran.append((rep, scheme.label))
        row = r.new_row(rep, client, scheme, size)
        row.update(tct_s=1.0, sha256_ok=True, http_code=200, bytes=size, wall_s=1.5)
        return row

    monkeypatch.setattr(r, "setup", setup)
    monkeypatch.setattr(r, "prepare_scheme", prepare)
    monkeypatch.setattr(r, "transfer", transfer)
    monkeypatch.setattr(rmod, "log", lambda msg: None)
    return r, ran


def test_an_agent_that_cannot_start_fails_its_scheme_and_the_run_writes_every_result(tmp_path, monkeypatch):
    from ccswitch.topology.namespaces import AgentError

    def prepare(scheme):
        if scheme.label == "kernel:py:m:Broken":
            raise AgentError("ccswitch-agent exited with status 1 before its socket: cannot import m")

    r, ran = fake_runner(tmp_path, monkeypatch, prepare)
    rows = r.run()
    assert [s for _, s in ran] == ["native:cubic", "kernel:reno", "kernel:reno", "native:cubic"]
    broken = [x for x in rows if x["scheme"] == "kernel:py:m:Broken"]
    assert [x["error"] for x in broken] == [
        "ccswitch-agent exited with status 1 before its socket: cannot import m",
        "not run: kernel:py:m:Broken failed earlier: ccswitch-agent exited with status 1 before its socket: "
        "cannot import m"]
    assert [x["transfer"] for x in rows] == list(range(1, 7))
    out = tmp_path / "out"
    for name in ("transfers.parquet", "summary.json", "summary.txt", "tct.png", "transfers.jsonl"):
        assert (out / name).exists(), name
    line = next(l for l in (out / "summary.txt").read_text().splitlines() if "Broken" in l)
    assert line.endswith("all 2 failed: ccswitch-agent exited with status 1 before its socket: cannot import m")


def test_the_summary_gives_the_ratio_of_each_compared_pair(tmp_path, monkeypatch):
    import json

    text = LOOP.replace('"kernel:py:m:Broken", ', '"native:reno", ')
    r, _ = fake_runner(tmp_path, monkeypatch, lambda scheme: None, text)
    r.run()
    out = tmp_path / "out"
    doc = json.loads((out / "summary.json").read_text())
    # two pairs: the ratio, but no interval and no verdict (statistics.compare)
    assert doc["ratios"] == [{"client": "c", "file_bytes": 1000, "a": "kernel:reno", "b": "native:reno",
                              "n_pairs": 2, "ratio": 1.0, "lo": None, "hi": None,
                              "verdict": {"text": "n = 2: too few for an interval", "kind": "too few",
                                          "ratio": 1.0, "interval": None, "n": 2}}]
    lines = (out / "summary.txt").read_text().splitlines()
    i = lines.index(next(l for l in lines if l.startswith("ratio of mean TCT")))
    assert lines[i + 1].split() == ["client", "A", "/", "B", "ratio", "95%", "CI", "(bootstrap)", "n", "verdict"]
    assert lines[i + 3].split() == ["c", "kernel:reno", "/", "native:reno", "1.000", "-", "2", "too", "few", "pairs"]


def test_no_compared_pair_no_ratio_table(tmp_path, monkeypatch):
    import json

    r, _ = fake_runner(tmp_path, monkeypatch, lambda scheme: None)
    r.run()
    out = tmp_path / "out"
    assert "ratios" not in json.loads((out / "summary.json").read_text())
    assert "ratio of mean TCT" not in (out / "summary.txt").read_text()


def test_a_run_that_cannot_go_on_still_summarises_what_ran(tmp_path, monkeypatch):
    from ccswitch.topology.namespaces import TopologyError

    calls = []

    def prepare(scheme):
        calls.append(scheme.label)
        if len(calls) == 3:
            raise TopologyError("ccswitch-kernel died (status 1)")

    r, ran = fake_runner(tmp_path, monkeypatch, prepare)
    with pytest.raises(errors.RunError, match=r"preparing kernel:reno: ccswitch-kernel died"):
        r.run()
    assert len(ran) == 2
    out = tmp_path / "out"
    assert len(results.read_transfers_parquet(out / "transfers.parquet")) == 2
    assert "native:cubic" in (out / "summary.txt").read_text()


def test_a_slow_transfer_says_how_far_it_got_instead_of_sitting_silent(tmp_path, monkeypatch):
    import subprocess
    import time

    sc = loads_scenario(LOOP, check_files=False)
    r = runner.Runner(sc, str(tmp_path / "out"))
    said = []
    monkeypatch.setattr(r, "_say", said.append)
    monkeypatch.setattr(runner, "PROGRESS_EVERY_S", 0.2)
    out_file = tmp_path / "dl.bin"
    out_file.write_bytes(b"x" * 1_500_000)
    # stands in for the mahimahi+curl stack: a process that takes a while
    r.current = subprocess.Popen(["sleep", "0.9"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = r._communicate("c native:cubic rep 1", str(out_file), 4_000_000, time.monotonic())
    assert (stdout, stderr, r.current.returncode) == ("", "", 0)
    assert 2 <= len(said) <= 5, said
    assert all(s.startswith("    ... c native:cubic rep 1: ") and s.endswith("s, 1.5 of 4.0 MB") for s in said), said


def test_the_shims_run_real_time_unless_told_otherwise_and_bad_priorities_are_refused(monkeypatch):
    from ccswitch.topology import daemons
    from ccswitch.topology.namespaces import TopologyError

    monkeypatch.delenv("CCSWITCH_SHIM_REALTIME_PRIORITY", raising=False)
    assert daemons.shim_realtime_args() == ["--realtime-priority", "10"]
    monkeypatch.setenv("CCSWITCH_SHIM_REALTIME_PRIORITY", "0")
    assert daemons.shim_realtime_args() == ["--realtime-priority", "0"]
    for bad in ("100", "-1", "fifo"):
        monkeypatch.setenv("CCSWITCH_SHIM_REALTIME_PRIORITY", bad)
        with pytest.raises(TopologyError, match="CCSWITCH_SHIM_REALTIME_PRIORITY"):
            daemons.shim_realtime_args()
