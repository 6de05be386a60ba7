"""The measurements for real: probe, competing flows, a web workload and a path schedule on
mahimahi paths, with the physical checks every figure must pass. Root, mahimahi, nginx and the
Rust binaries (probe, agent, kernel datapath, schedule element) are needed; these tests fail,
not skip, when the machine cannot run them (CI runs as root with scripts/setup.sh applied)."""

import os

import numpy as np
import pytest

from ccswitch.experiments import linklog, measurements, runner
from ccswitch.experiments.scenario import loads_scenario

from test_integration import require_machine


def run(tmp_path, text, **kw):
    require_machine()
    path = tmp_path / "sc.toml"
    path.write_text(text)
    sc = loads_scenario(text, source=str(path))
    r = runner.Runner(sc, str(tmp_path / "out"), quiet=True, **kw)
    rows = r.run()
    for row in rows:
        assert row["error"] is None and row["sha256_ok"], row
    return r, rows


DEEP = """
name = "deep"
schemes = ["native:cubic", "kernel:vegas"]
timeout_s = 60
[[clients]]
name = "deep-20ms"
delay_ms = 10
link = { mbps = 12 }
# BDP at 12 Mbit/s and 20 ms RTT: 20 packets; 4 BDP
queue_packets = 80
file_bytes = 3_000_000
"""


def test_a_lone_flow_passes_the_physical_checks_and_agrees_with_mahimahis_link_log(tmp_path):
    r, rows = run(tmp_path, DEEP, link_logs=True)
    by = {row["scheme"]: row for row in rows}
    for row in rows:
        # no flow faster than the link, no delay below the propagation delay
        assert row["throughput_mbps"] <= 12 * 1.02 and row["link_utilisation"] <= 1.02
        # mm-delay releases on whole milliseconds: a packet may take up to 1 ms less than asked
        assert row["delay_p50_ms"] >= 10 and row["min_rtt_ms"] >= 2 * 10 - 2
        assert row["delay_samples"] > 1500
        # every dropped segment was sent again: the kernel counted it
        assert row["retrans_segs"] >= row["path_drops"]
    # on a clean path with a 4-BDP drop-tail queue, Cubic fills the queue and Vegas does not
    assert by["native:cubic"]["delay_p95_ms"] >= 1.5 * by["kernel:vegas"]["delay_p95_ms"]
    cubic = by["native:cubic"]
    log = linklog.read_link_log(os.path.join(r.out_dir, cubic["link_log"]))
    probe = measurements.read_probe(os.path.join(r.out_dir, cubic["probe"]))
    # the link drops what the probe saw sent and never received (a handful of non-data packets aside)
    assert abs(log.dropped - cubic["path_drops"]) <= 3
    # the probe's one-way delay is propagation + the link log's queueing delay (+ mm-link's own ~1 ms)
    probe_queue_ms = cubic["delay_p50_ms"] - 10
    assert abs(probe_queue_ms - float(np.median(log.queue_delays_ms))) <= 2.0
    assert probe is not None


COMPETITION = """
name = "compete"
schemes = ["kernel:cubic"]
timeout_s = 60
[[clients]]
name = "shared"
delay_ms = 10
link = { mbps = 12 }
queue_packets = 40
file_bytes = 3_000_000
flows = [{ scheme = "native:cubic", start_s = 0 }, { start_s = 1 }]
"""


def test_competing_flows_each_get_their_own_figures_and_a_fairness_index(tmp_path):
    r, (row,) = run(tmp_path, COMPETITION)
    flows = row["flows"]
    assert [(f["role"], f["scheme"]) for f in flows] == [("competitor", "native:cubic"), ("test", "kernel:cubic")]
    for f in flows:
        assert f["sha256_ok"] and f["delay_p50_ms"] >= 10 and f["throughput_mbps"] <= 12 * 1.02
    # two flows sharing 12 Mbit/s: together no more than the link over the shared interval
    assert 0.5 <= row["jain"] <= 1.0 and row["shared_s"] > 0.5
    assert os.path.exists(os.path.join(r.out_dir, row["throughput_bins"]))


WORKLOAD = """
name = "web"
schemes = ["native:cubic"]
timeout_s = 60
[[clients]]
name = "web-30"
delay_ms = 10
link = { mbps = 12 }
queue_packets = 40
workload = { kind = "poisson", load = 0.3, duration_s = 4, sizes = "pareto", seed = 3 }
"""


def test_a_web_workload_reports_every_request_and_fct_by_size(tmp_path):
    r, (row,) = run(tmp_path, WORKLOAD)
    w = row["workload"]
    assert w["requests"] >= 5 and w["completed"] == w["requests"] and w["failed"] == 0
    lines = open(os.path.join(r.out_dir, w["requests_file"])).read().splitlines()
    assert len(lines) == w["requests"]
    assert w["n_lt100k"] >= 1 and w["slowdown_lt100k_p50"] >= 1.0


SCHEDULE = """
name = "sched"
schemes = ["native:cubic"]
timeout_s = 60
[[clients]]
name = "route-change"
link = { mbps = 12 }
# 10 packets drain in 10 ms at 12 Mbit/s: the queue adds at most that to the path's delay
queue_packets = 10
file_bytes = 4_000_000
schedule = [{ at_s = 0, delay_ms = 5 }, { at_s = 1.5, delay_ms = 40 }]
"""


def test_a_route_change_shows_in_the_flows_one_way_delay(tmp_path):
    r, (row,) = run(tmp_path, SCHEDULE)
    probe = measurements.read_probe(os.path.join(r.out_dir, row["probe"]))
    phases = row["phases"]
    assert [p["at_s"] for p in phases] == [0.0, 1.5]
    assert 5 <= phases[0]["delay_p50_ms"] < 5 + 10 + 2
    assert 40 <= phases[1]["delay_p50_ms"] < 40 + 10 + 2
    stats = __import__("json").load(open(os.path.join(r.out_dir, row["schedule_stats"])))
    assert stats[0]["server_ip"] and stats[0]["rule_packets"] > 1000
    assert probe is not None
