"""A live handover, for real: one 2 MB transfer over mahimahi (30 ms RTT, 1% loss, 8 Mbit/s)
under `kernel:policy:FILE`, a tiny policy that runs Cubic for the flow's first second and
BBR after it. The row must carry the cubic -> bbr handover with its reason and features, the
run must have its handovers.jsonl and a flow plot. Needs root, mahimahi and the Rust binaries;
fails rather than skips without them."""

import json
import os


from ccswitch.analysis.after_run import RunAnalyses
from ccswitch.experiments import events as flow_events
from ccswitch.experiments import runner, scenario
from live import require_machine_and_binaries

POLICY = """
name = "cubic-then-bbr"
description = "cubic for the first second, bbr after it"
initial = "cubic"
default = "bbr"
[window]
kind = "sliding"
samples = 1
[decide]
spatial = true
temporal = true
min_samples = 1
[hysteresis]
min_dwell_ms = 0
agreeing = 1
[[rule]]
when = "elapsed_s < 1"
use = "cubic"
"""

SCENARIO = """
name = "handover-live"
schemes = ["kernel:policy:policies/cubic-then-bbr.toml"]
timeout_s = 60
agent_settle_s = 0.5
plots = ["flows"]
[[clients]]
name = "c30ms-loss1"
delay_ms = 15
loss_downlink = 0.01
link = { mbps = 8 }
queue_packets = 40
file_bytes = 2_000_000
"""


def test_a_policy_hands_a_live_flow_over(tmp_path):
    require_machine_and_binaries()
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "cubic-then-bbr.toml").write_text(POLICY)
    path = tmp_path / "scenario.toml"
    path.write_text(SCENARIO)
    sc = scenario.load_scenario(str(path))
    out = tmp_path / "out"
    r = runner.Runner(sc, str(out), quiet=True, analysis=RunAnalyses())
    (row,) = r.run()

    assert row["error"] is None and row["sha256_ok"], row
    assert row["tct_s"] > 1.0, "the transfer outlasts the policy's first second"
    assert row["flow"]["matched_by"] == "address+time", row["flow"]
    assert row["algorithms"] == ["cubic", "bbr"], row
    (sw,) = row["handover_events"]
    assert (sw["from"], sw["to"]) == ("cubic", "bbr")
    assert sw["reason"] and sw["kind"] in ("spatial", "temporal", "policy"), sw
    assert sw["features"]["elapsed_s"] >= 1.0 and sw["features"]["samples"] >= 1, sw
    # the flow's clock starts at its first report, ours at its creation: close, and before 2 s
    assert 1.0 <= sw["t_s"] < 2.0, sw

    events = flow_events.read_events(str(out / row["events"]))
    assert {(e["datapath"], e["sid"]) for e in events} == {(row["flow"]["datapath"], row["flow"]["sid"])}
    reports = [e for e in events if e["event"] == "report"]
    assert {e["algorithm"] for e in reports} == {"cubic", "bbr"}
    assert sum(e["acked_bytes"] for e in reports) >= 1_900_000, "the reports saw the file acknowledged"

    logged = [json.loads(l) for l in (out / "handovers.jsonl").read_text().splitlines()]
    assert [(s["transfer"], s["from"], s["to"]) for s in logged] == [(1, "cubic", "bbr")]
    png = out / (os.path.splitext(row["events"])[0] + ".png")
    assert png.stat().st_size > 10_000
    # transfers.jsonl carries the same row
    (saved,) = [json.loads(l) for l in (out / "transfers.jsonl").read_text().splitlines()]
    assert saved["handover_events"] == row["handover_events"]
