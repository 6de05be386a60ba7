"""Temporal training rows: one per phase of a step path, features from the initial flow's last
reports before the phase ends, each candidate's phase figures as its costs."""

import json
import os

import pytest

from ccswitch.experiments import sweep_store
from ccswitch.learner import objectives, temporal

SPEC = """
name = "t"
seed = 1
paths = 1
candidates = ["bbr", "vegas"]
initial = "bbr"
[sizes]
fixed = [4_000_000]
[[mix]]
name = "step"
weight = 1
kind = "constant"
rtt_ms = 40
mbps = 10
queue_packets = 100
"""

SCHEDULE = [{"at_s": 0.0, "delay_ms": 0.0, "loss_downlink": 0.0, "loss_uplink": 0.0},
            {"at_s": 2.0, "delay_ms": 0.0, "loss_downlink": 0.02, "loss_uplink": 0.0}]


def reports(n, step_index):
    """n reports 40 ms apart; RTT 40 ms before `step_index`, 90 ms from it on."""
    out = []
    for i in range(n):
        out.append({"t_us": 1_000_000 + 40_000 * i, "dp_us": 40_000 * i, "rtt_us": 40_000 if i < step_index else 90_000,
                    "acked_bytes": 14480, "lost_packets": 0, "delivery_rate_bps": 8_000_000, "timeout": False,
                    "cwnd_bytes": 50_000, "bytes_in_flight": 40_000, "pacing_rate_bps": 10_000_000})
    return out


def write_cell(store, candidate, phases, flow=None):
    doc = {"format": "ccswitch-sweep-cell", "version": 1, "sweep": "t", "key": candidate, "path_id": "p1",
           "path": {"delay_ms": 20, "loss_downlink": 0, "loss_uplink": 0, "downlink_mbps": 10, "uplink_mbps": 10,
                    "downlink_trace": None, "uplink_trace": None, "queue_packets": 100, "schedule": SCHEDULE},
           "datapath": "kernel", "candidate": candidate, "scheme": "kernel:" + candidate, "file_bytes": 4_000_000,
           "rep": 1, "mean_mbps": 10.0, "component": "step",
           "row": {"tct_s": 4.0, "error": None, "connect_s": 0.0, "phases": phases}}
    if flow is not None:
        doc["flow"] = flow
    sweep_store.write_gz_json_atomic(os.path.join(store, "cells", "p1", candidate + ".json.gz"), doc)


def test_each_phase_is_a_row_with_that_phases_features_and_figures(tmp_path):
    store = str(tmp_path)
    (tmp_path / "spec.toml").write_text(SPEC)
    reps = reports(100, step_index=50)  # reports at 0..3.96 s; the step at 2.0 s is report 50
    write_cell(store, "bbr", [{"throughput_mbps": 9.0, "delay_p95_ms": 60.0}, {"throughput_mbps": 6.0, "delay_p95_ms": 70.0}],
               flow={"flow": {"t_us": 1_000_000, "mss": 1448}, "reports": sweep_store.compact_reports(reps)})
    write_cell(store, "vegas", [{"throughput_mbps": 8.0, "delay_p95_ms": 25.0}, {"throughput_mbps": 1.5, "delay_p95_ms": 30.0}])
    rows = temporal.phase_rows(store, samples=10)
    assert [r["phase"] for r in rows] == [0, 1]
    before, after = rows
    # the features are the last 10 reports' before each phase ends: RTT 40 ms, then 90 ms
    assert before["f_min_rtt_ms"] == pytest.approx(40.0) and after["f_min_rtt_ms"] == pytest.approx(90.0)
    assert before["tct_bbr"] == pytest.approx(1 / 9.0) and after["tct_vegas"] == pytest.approx(1 / 1.5)
    assert after["loss_downlink"] == pytest.approx(0.02) and after["phase_at_s"] == 2.0
    # every phase row is a decision (the notebook trains and judges only decided rows)
    assert before["decision_at_s"] == pytest.approx(1.96) and after["decision_at_s"] == pytest.approx(3.96)
    # power picks vegas before the step (25/8 < 60/9) and bbr after it (70/6 < 30/1.5)
    cost = objectives.cost_matrix({k: [r[k] for r in rows] for k in rows[0]}, ["bbr", "vegas"], "power")
    assert list(cost.argmin(axis=1)) == [1, 0]


def test_a_phase_the_stored_reports_do_not_reach_gives_no_row(tmp_path):
    store = str(tmp_path)
    (tmp_path / "spec.toml").write_text(SPEC)
    reps = reports(40, step_index=40)  # 0..1.56 s: nothing after the step at 2 s
    write_cell(store, "bbr", [{"throughput_mbps": 9.0, "delay_p95_ms": 60.0}, {"throughput_mbps": 6.0, "delay_p95_ms": 70.0}],
               flow={"flow": {"t_us": 1_000_000, "mss": 1448}, "reports": sweep_store.compact_reports(reps)})
    write_cell(store, "vegas", [{"throughput_mbps": 8.0, "delay_p95_ms": 25.0}, {"throughput_mbps": 1.5, "delay_p95_ms": 30.0}])
    assert [r["phase"] for r in temporal.phase_rows(store, samples=10)] == [0]


def test_a_step_paths_transfer_rows_give_way_to_its_phase_rows(tmp_path):
    from ccswitch.learner import dataset

    store = str(tmp_path)
    (tmp_path / "spec.toml").write_text(SPEC)
    write_cell(store, "bbr", [{"throughput_mbps": 9.0, "delay_p95_ms": 60.0}, {"throughput_mbps": 6.0, "delay_p95_ms": 70.0}],
               flow={"flow": {"t_us": 1_000_000, "mss": 1448},
                     "reports": sweep_store.compact_reports(reports(100, step_index=50))})
    write_cell(store, "vegas", [{"throughput_mbps": 8.0, "delay_p95_ms": 25.0}, {"throughput_mbps": 1.5, "delay_p95_ms": 30.0}])
    static = [{"path_id": "p1", "tct_bbr": 4.0}, {"path_id": "other", "tct_bbr": 1.0}]
    rows = dataset.with_phase_rows(static, [store], samples=10)
    assert [(r["path_id"], r.get("phase")) for r in rows] == [("other", None), ("p1", 0), ("p1", 1)]
    assert rows[1]["n_bbr"] == 1 and rows[1]["has_schedule"] and rows[1]["rep"] == 1
