"""A run whose schemes misbehave at run time still ends with a complete, legible result.

One short live run (root, mahimahi, nginx, the Rust binaries; it FAILS rather than skips
without them) with four schemes, two repetitions, one 400 kB file:
- `kernel:py:algs:Raises`, whose on_report raises on every report: its transfers complete
  (the window is kept) but must not look like plain successes: each row, the progress line
  and the summary count the exceptions, and the agent log stops quoting them after five;
- `kernel:py:algs:Dies`, which passes the pre-run check (it imports and instantiates fine)
  and kills its own agent (SIGKILL) at the first report: the transfer is failed with the
  agent's exit, the scheme's later transfer is not run but recorded as failed, and the other
  schemes carry on; summary, Parquet and plot are written and the exit status is 3;
- `native:cubic` and `kernel:reno` as the healthy schemes around them.
"""

import json
import os
import re
import subprocess
import sys

import pytest

from ccswitch.experiments import results
from live import require_machine_and_binaries
from test_integration import PYTHONPATH

ALGS = '''
import os, signal
from ccswitch.authoring import Algorithm

class Raises(Algorithm):
    def on_report(self, flow):
        raise RuntimeError("deliberately broken algorithm")

class Dies(Algorithm):
    def on_report(self, flow):
        os.kill(os.getpid(), signal.SIGKILL)  # the agent's process: a crash at run time
'''

SCENARIO = """
name = "failures"
repetitions = 2
schemes = ["native:cubic", "kernel:py:algs:Raises", "kernel:py:algs:Dies", "kernel:reno"]
timeout_s = 30
agent_settle_s = 0.5
[[clients]]
name = "clean-40ms"
delay_ms = 20
link = { mbps = 24 }
queue_packets = 100
file_bytes = 400_000
"""

RAISES, DIES = "kernel:py:algs:Raises", "kernel:py:algs:Dies"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    require_machine_and_binaries()
    d = tmp_path_factory.mktemp("failures")
    (d / "algs.py").write_text(ALGS)
    (d / "scenario.toml").write_text(SCENARIO)
    out = d / "out"
    env = dict(os.environ, PYTHONPATH=PYTHONPATH + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cp = subprocess.run([sys.executable, "-m", "ccswitch", "run", str(d / "scenario.toml"), "--out", str(out)],
                        capture_output=True, text=True, env=env, timeout=300)
    with open(out / "transfers.jsonl") as f:
        rows = [json.loads(line) for line in f]
    return cp, out, rows


def test_the_run_completes_with_status_3_and_every_result_file(run):
    cp, out, rows = run
    assert cp.returncode == 3, cp.stderr[-3000:]
    for name in ("transfers.parquet", "summary.json", "summary.txt", "tct.png"):
        assert (out / name).exists(), f"{name} missing; stderr:\n{cp.stderr[-3000:]}"
    assert len(rows) == 8 and [r["transfer"] for r in rows] == list(range(1, 9))
    assert len(results.read_transfers_parquet(out / "transfers.parquet")) == 8


def test_an_agent_that_dies_fails_its_scheme_and_the_others_carry_on(run):
    cp, out, rows = run
    dies = [r for r in rows if r["scheme"] == DIES]
    assert len(dies) == 2
    first, second = sorted(dies, key=lambda r: r["transfer"])
    assert first["error"].startswith("ccswitch-agent exited with killed by SIGKILL"), first
    # no TCT for the scheme, though the datapath's fallback still delivered every byte intact
    assert first["tct_s"] is None and first["sha256_ok"] is True
    assert second["error"].startswith(f"not run: {DIES} failed earlier: ccswitch-agent exited with killed by SIGKILL")
    assert second["wall_s"] is None, "the second transfer was not attempted"
    # the error line is printed once, when it happens
    assert cp.stderr.count(f"{DIES} failed: ccswitch-agent exited with killed by SIGKILL") == 1, cp.stderr[-3000:]
    # the healthy schemes ran both repetitions, including after the death
    for scheme in ("native:cubic", "kernel:reno"):
        ok = [r for r in rows if r["scheme"] == scheme]
        assert len(ok) == 2 and all(r["error"] is None and r["sha256_ok"] for r in ok), ok
    later_reno = [r for r in rows if r["scheme"] == "kernel:reno" and r["transfer"] > first["transfer"]]
    assert later_reno and later_reno[0]["cc_observed"], "the kernel datapath served a new agent after the death"
    summary = json.loads((out / "summary.json").read_text())
    cell = next(r for r in summary["rows"] if r["scheme"] == DIES)
    assert (cell["n"], cell["errors"], cell["attempts"]) == (0, 2, 2)
    assert cell["status"].startswith("all 2 failed: ccswitch-agent exited with killed by SIGKILL"), cell
    text = (out / "summary.txt").read_text()
    line = next(l for l in text.splitlines() if DIES in l)
    assert "all 2 failed: ccswitch-agent exited with killed by SIGKILL" in line, text


def test_a_python_algorithm_that_always_raises_is_counted_everywhere(run):
    cp, out, rows = run
    raises = [r for r in rows if r["scheme"] == RAISES]
    assert len(raises) == 2
    for r in raises:
        assert r["error"] is None and r["sha256_ok"], r  # the flow completes with its window kept
        assert r["flow"] and r["flow"]["reports"] > 0, r
        # every report raised and every raise is counted, but for reports the agent's guard
        # answered without the callback (one that overran its time budget on a loaded machine,
        # and its suspension), counted too
        unguarded = (r["python_timeouts"] or 0) + (r["python_skipped"] or 0)
        assert r["on_report_errors"] > 0 and r["on_report_errors"] + unguarded == r["flow"]["reports"], r
        assert re.search(rf"{re.escape(RAISES)} rep {r['repetition']}: [0-9.]+ s ok "
                         rf"\({r['on_report_errors']} on_report errors?[,)]", cp.stderr), cp.stderr[-3000:]
    total = sum(r["on_report_errors"] for r in raises)
    summary = json.loads((out / "summary.json").read_text())
    cell = next(r for r in summary["rows"] if r["scheme"] == RAISES)
    assert cell["on_report_errors"] == total and cell["status"].startswith(f"ok ({total} on_report errors")
    assert f"ok ({total} on_report errors" in (out / "summary.txt").read_text()
    assert [r["on_report_errors"] for r in results.read_transfers_parquet(out / "transfers.parquet")
            if r["scheme"] == RAISES] == [r["on_report_errors"] for r in raises]
    healthy = [r for r in rows if r["scheme"] == "kernel:reno"]
    assert all(r["on_report_errors"] == 0 for r in healthy)


def test_the_agent_log_quotes_the_first_five_tracebacks_then_says_it_stops(run):
    cp, out, rows = run
    logs = sorted(n for n in os.listdir(out / "logs") if n.endswith("-py:algs:Raises.log"))
    assert len(logs) == 2, os.listdir(out / "logs")
    for name in logs:
        text = (out / "logs" / name).read_text()
        flows = len(re.findall(r"flow created .*algorithm=\"?Raises", text))
        assert flows >= 1, text[-2000:]
        quoted = text.count("RuntimeError: deliberately broken algorithm")
        suppressed = text.count("further on_report errors of this flow suppressed")
        # the transfer's flow raised on each of its 10+ reports: five tracebacks, then the notice
        assert 1 <= suppressed <= flows, text[-3000:]
        assert 5 <= quoted <= 5 * flows, text[-3000:]


TIMES_OUT = """
name = "times-out"
schemes = ["native:cubic"]
timeout_s = 0.5
[[clients]]
name = "far"
delay_ms = 150
link = { mbps = 24 }
file_bytes = 1_000_000
"""


def test_a_curl_timeout_through_mahimahi_is_recorded_as_curls_message_without_a_tct(tmp_path):
    """300 ms RTT: the handshake and the request alone outlast curl's 0.5 s --max-time."""
    from live import set_up_runner

    with set_up_runner(tmp_path, TIMES_OUT) as r:
        sc = r.sc
        row = r.transfer(0, sc.clients[0], sc.schemes[0], 1_000_000)
    assert row["error"].startswith("curl: (28) Operation timed out after"), row["error"]
    assert "Died on" not in row["error"] and "mm-link" not in row["error"]
    assert row["curl_exit"] == 28
    assert row["tct_s"] is None and row["sha256_ok"] is False
    assert row["path"] == "RTT 300 ms, 24 Mbit/s, unbounded queue" and row["rtt_ms"] == 300
