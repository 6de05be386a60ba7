"""The grid report: best algorithm per cell, censored timeouts, table and heat map."""

import json
import os

import pytest

from ccswitch.analysis import grid
from ccswitch.experiments import results
from ccswitch.experiments.rundir import RunDirectoryError
from ccswitch.experiments.scenario import loads_scenario

SCENARIO = """
name = "g"
timeout_s = 60
schemes = ["native:cubic", "kernel:bbr", "kernel:hybla"]
[[clients]]
name = "rtt50-loss0"
delay_ms = 25
link = { mbps = 24 }
file_bytes = 100
[[clients]]
name = "rtt300-loss1"
delay_ms = 150
loss_downlink = 0.01
link = { mbps = 24 }
file_bytes = 100
"""


def row(client, scheme, tct, error=None, sha=True):
    return {"client": client, "scheme": scheme, "repetition": 1, "file_bytes": 100, "tct_s": tct,
            "ttfb_s": None, "connect_s": None, "bytes": 100, "http_code": 200, "sha256_ok": sha,
            "cc_observed": None, "started_at": "", "wall_s": None, "error": error}


ROWS = [
    row("rtt50-loss0", "native:cubic", 1.0), row("rtt50-loss0", "native:cubic", 1.2),
    row("rtt50-loss0", "kernel:bbr", 1.5), row("rtt50-loss0", "kernel:hybla", 0.9),
    row("rtt50-loss0", "kernel:hybla", 0.8),
    # cubic times out twice: counted as 60 s, not dropped (which would make it look fast)
    row("rtt300-loss1", "native:cubic", 5.0),
    row("rtt300-loss1", "native:cubic", None, error="curl timeout after 60 s: x"),
    row("rtt300-loss1", "native:cubic", None, error="timeout: no result after 70 s"),
    # what runs record now: curl's own message, its exit status, no TCT
    dict(row("rtt300-loss1", "native:cubic", None,
             error="curl: (28) Operation timed out after 60000 milliseconds with 1 out of 100 bytes received"),
         curl_exit=28),
    row("rtt300-loss1", "kernel:bbr", 8.0),
    row("rtt300-loss1", "kernel:hybla", 7.0, sha=False),  # corrupt: never counts
    row("rtt300-loss1", "kernel:hybla", None, error="HTTP 500"),  # not a timeout: excluded
]


def test_cells_pick_the_fastest_median_and_censor_timeouts():
    sc = loads_scenario(SCENARIO, check_files=False)
    cells = {c.client: c for c in grid.cells(sc, ROWS)}
    clean, lossy = cells["rtt50-loss0"], cells["rtt300-loss1"]
    assert (clean.rtt_ms, clean.loss_pct, lossy.rtt_ms, lossy.loss_pct) == (50, 0, 300, 1)
    assert clean.best == "kernel:hybla" and clean.medians["kernel:hybla"][0] == pytest.approx(0.85)
    assert clean.margin() == pytest.approx((1.1 - 0.85) / 1.1)
    assert lossy.medians["native:cubic"] == (60.0, 3, 4)
    assert lossy.best == "kernel:bbr"
    assert "kernel:hybla" not in lossy.medians


def test_report_writes_table_json_and_heat_map(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "scenario.toml").write_text(SCENARIO)
    with open(run / "transfers.jsonl", "w") as f:
        for r in ROWS:
            f.write(json.dumps(r) + "\n")
    out = grid.report(str(run))
    assert "**0.85**" in out["table"] and "≥60.00" in out["table"]
    summary = json.loads((run / "grid.json").read_text())
    assert [c["best"] for c in summary["cells"]] == ["kernel:hybla", "kernel:bbr"]
    assert (run / "grid.png").stat().st_size > 5000
    results.write_transfers_parquet(run / "transfers.parquet", ROWS)
    assert grid.report(str(run))["summary"] == summary


def test_not_a_run_directory(tmp_path):
    with pytest.raises(RunDirectoryError, match="not a run directory \\(no scenario.toml\\)"):
        grid.report(str(tmp_path))


def test_the_best_of_a_cell_is_claimed_faster_than_the_runner_up_only_beyond_the_noise():
    sc = loads_scenario(SCENARIO, check_files=False)
    rows = []
    for rep in range(1, 7):
        w = 1 + 0.03 * (rep % 3)
        rows += [dict(row("rtt50-loss0", "kernel:hybla", 1.0 * w), repetition=rep),
                 dict(row("rtt50-loss0", "kernel:bbr", 1.3 * w), repetition=rep),
                 # close to hybla, with an outlier: no difference
                 dict(row("rtt300-loss1", "kernel:hybla", 2.0 * w), repetition=rep),
                 dict(row("rtt300-loss1", "kernel:bbr", 2.0 * w * [0.95, 4.5, 1.05, 0.97, 1.04, 1.02][rep - 1]),
                      repetition=rep)]
    clean, lossy = grid.cells(sc, rows)
    assert clean.runner_up_verdict().kind == "better" and clean.runner_up_verdict().n == 6
    assert lossy.best == "kernel:hybla" and lossy.runner_up_verdict().kind == "no difference"
    table = grid.markdown([clean, lossy], [s.label for s in sc.schemes])
    assert table.splitlines()[2].endswith("| hybla | 23 % | better |")
    assert table.splitlines()[3].endswith("| no difference |")
    few = grid.cells(sc, ROWS)[0]
    assert few.runner_up_verdict().text.startswith("n = 1: too few")
    assert "too few pairs" in grid.markdown([few], [s.label for s in sc.schemes])
