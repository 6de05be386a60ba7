"""The destination memory's analysis (analysis/destination_memory.py) on synthetic runs whose
figures are known: units of three downloads each on a fresh agent, under a policy with the
memory on (later downloads start on the remembered bbr and take 1.2 s instead of 2 s) and off."""

import datetime as dt
import json
import os

import pytest

from ccswitch.analysis import destination_memory as dm
from ccswitch.analysis.after_run import RunAnalyses
from ccswitch.experiments import runner
from ccswitch.experiments.scenario import loads_scenario

ON = "kernel:policy:mystique:memory.min_score=0.5"
OFF = "kernel:policy:mystique:memory.enabled=false"
DEFAULT = "kernel:policy:mystique"
T0 = dt.datetime(2026, 11, 26, tzinfo=dt.timezone.utc)
REPS, DOWNLOADS = 6, 3

SCENARIO = f"""
name = "memory"
destination_memory = true
schemes = ["{ON}", "{OFF}"]
timeout_s = 60
[[clients]]
name = "lossy"
delay_ms = 50
loss_downlink = 0.01
link = {{ mbps = 24 }}
file_bytes = 2_000_000
flows = [{{ start_s = 0 }}, {{ start_s = 4 }}, {{ start_s = 8 }}]
"""


def flow_events(sid, port, t_us, start, algorithm, memory, handover_to=None):
    """One flow's events: created (where it started), maybe handed over, closed."""
    base = {"datapath": 1, "sid": sid}
    out = [dict(base, event="flow", t_us=t_us, src="198.18.0.2", sport=8080, dst="198.18.0.1", dport=port,
                algorithm=algorithm, start=start, start_reason="...", memory=memory)]
    if handover_to:
        out.append(dict(base, event="handover", t_us=t_us + 800_000, kind="spatial", to=handover_to,
                        reason="rule", features={}, cwnd_bytes=1, pacing_rate_bps=None, **{"from": algorithm}))
    out.append(dict(base, event="close", t_us=t_us + 1_500_000, algorithm=handover_to or algorithm,
                    reports=10, handovers=int(bool(handover_to))))
    return out


def synthetic_run(tmp_path):
    """Units alternating on, off; each on a fresh agent (its own events file). With the memory
    on, the first download starts on cubic with nothing remembered and the later ones on the
    remembered bbr; with it off every download starts on cubic. Either way each flow is handed
    over to bbr. Download times: 2 s on cubic first (+1 ms per repetition), 1.2 s on memory."""
    (tmp_path / "scenario.toml").write_text(SCENARIO)
    os.makedirs(tmp_path / "events")
    rows, port, unit = [], 40000, 0
    for rep in range(1, REPS + 1):
        for scheme in (ON, OFF):
            unit += 1
            started = T0 + dt.timedelta(seconds=30 * unit)
            events, flows = [], []
            for i in range(DOWNLOADS):
                port += 1
                t_us = int((started.timestamp() + 1 + 4 * i) * 1e6)
                remembered = scheme == ON and i > 0
                memory = None if scheme == OFF else {"prefix": "198.18.0.0/24", "score": float(i),
                                                     "algorithm": "bbr" if i else None}
                if remembered:
                    events += flow_events(i + 1, port, t_us, "memory", "bbr", memory)
                else:
                    events += flow_events(i + 1, port, t_us, "initial", "cubic", memory, handover_to="bbr")
                tct = 1.2 + rep / 1000 if remembered else 2.0 + rep / 1000
                flows.append({"flow": i, "role": "test", "scheme": scheme, "tct_s": tct, "sha256_ok": True,
                              "error": None, "client_port": port})
            with open(tmp_path / "events" / f"agent-{unit:03d}.jsonl", "w") as f:
                f.write("".join(json.dumps(e) + "\n" for e in events))
            rows.append({"transfer": unit, "client": "lossy", "scheme": scheme, "repetition": rep,
                         "file_bytes": 2_000_000, "tct_s": flows[0]["tct_s"], "sha256_ok": True, "error": None,
                         "started_at": started.isoformat(timespec="milliseconds"), "wall_s": 12.0,
                         "flows": flows})
    return rows


def test_memory_pairs_match_on_and_off_schemes_of_the_same_policy():
    labels = [ON, OFF, DEFAULT, "kernel:bbr", "ovs:policy:mystique:memory.enabled=false",
              "kernel:policy:mystique:rtt_threshold_ms=80"]
    assert dm.memory_pairs(labels) == [(ON, OFF), (DEFAULT, OFF)]
    assert dm.memory_pairs([ON, DEFAULT]) == [], "nothing to compare without an off scheme"


def test_a_download_is_matched_to_its_flow_by_port_within_its_unit(tmp_path):
    rows = synthetic_run(tmp_path)
    res, _ = dm.analyze(str(tmp_path), rows, [ON, OFF])
    downloads = res["downloads"]
    assert len(downloads) == REPS * 2 * DOWNLOADS
    assert all(d["start"] is not None for d in downloads)
    first_on = next(d for d in downloads if d["scheme"] == ON and d["flow"] == 1)
    assert (first_on["start"], first_on["start_algorithm"], first_on["remembered"], first_on["ended_on"]) == \
        ("memory", "bbr", "bbr", "bbr")
    # the same port outside the unit's window matches nothing
    moved = [dict(rows[0], started_at=(T0 + dt.timedelta(days=1)).isoformat())]
    (alone,) = [d for d in dm.analyze(str(tmp_path), moved, [ON, OFF])[0]["downloads"] if d["flow"] == 0]
    assert alone["start"] is None


def test_starts_on_memory_are_counted_and_later_downloads_compared(tmp_path):
    rows = synthetic_run(tmp_path)
    res, text = dm.analyze(str(tmp_path), rows, [ON, OFF])
    on, off = res["schemes"]
    assert (on["scheme"], off["scheme"]) == (ON, OFF)
    assert on["first"]["starts"] == {"initial": REPS}, "nothing remembered at a unit's start"
    assert on["later"]["starts"] == {"memory": REPS * (DOWNLOADS - 1)}
    assert on["later"]["from_memory"] == {"bbr": REPS * (DOWNLOADS - 1)}
    assert off["later"]["starts"] == {"initial": REPS * (DOWNLOADS - 1)}
    assert on["ended_on"] == off["ended_on"] == {"bbr": REPS * DOWNLOADS}
    assert on["later"]["tct_median_s"] == pytest.approx(1.2035)
    assert off["later"]["tct_median_s"] == pytest.approx(2.0035)
    assert on["first"]["n"] == REPS and on["later"]["n"] == REPS * (DOWNLOADS - 1)
    (pair,) = res["pairs"]
    assert (pair["on"], pair["off"]) == (ON, OFF)
    assert pair["later"]["kind"] == "better" and pair["later"]["n"] == REPS * (DOWNLOADS - 1)
    assert pair["later"]["ratio"] == pytest.approx(1.2035 / 2.0035)
    assert pair["first"]["kind"] == "no difference" and pair["first"]["n"] == REPS
    assert "later: on memory" in text and f"{REPS * (DOWNLOADS - 1)}/{REPS * (DOWNLOADS - 1)} (bbr" in text
    assert "memory on against off" in text and "better (ratio 0.60" in text


def test_failed_downloads_leave_their_pairs_out(tmp_path):
    rows = synthetic_run(tmp_path)
    rows[0]["flows"][1] = dict(rows[0]["flows"][1], error="timeout", tct_s=None)
    res, _ = dm.analyze(str(tmp_path), rows, [ON, OFF])
    (pair,) = res["pairs"]
    assert pair["later"]["n"] == REPS * (DOWNLOADS - 1) - 1
    assert res["schemes"][0]["later"]["n"] == REPS * (DOWNLOADS - 1) - 1


def test_the_run_summary_carries_the_memory_analysis_when_the_scenario_keeps_the_memory(tmp_path):
    rows = synthetic_run(tmp_path)
    sc = loads_scenario(SCENARIO, check_files=False)
    r = runner.Runner(sc, str(tmp_path), quiet=True)
    r.rows = rows
    doc = {}
    text = RunAnalyses().summary_parts(r, doc)
    assert text.startswith("\n\ndestination memory:")
    assert doc["destination_memory"]["pairs"][0]["later"]["kind"] == "better"
    sc_off = loads_scenario(SCENARIO.replace("destination_memory = true", ""), check_files=False)
    r = runner.Runner(sc_off, str(tmp_path), quiet=True)
    r.rows, doc = rows, {}
    assert RunAnalyses().summary_parts(r, doc) == "" and "destination_memory" not in doc
