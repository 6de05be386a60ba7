"""Metrics from the probe's and the workload's files (measurements.py), their summaries
(statistics.summarize / summary_sections) and their Parquet columns, on synthetic files whose
figures are known by construction."""

import json

import numpy as np
import pytest

from ccswitch.experiments import measurements as m
from ccswitch.experiments import results
from ccswitch.experiments import statistics as stats

T0 = 5_000_000_000  # an arbitrary CLOCK_MONOTONIC origin (ns)
MSS = 1448


def flow_entry(flow, client_port, *, sent, received, tcp_info=True, **kw):
    info = {"state": 7, "total_retrans": 4, "bytes_retrans": 4 * MSS, "srtt_us": 23_500, "min_rtt_us": 20_250,
            "data_segs_out": sent, "bytes_acked": received * MSS, "delivered": received} if tcp_info else None
    return dict({"flow": flow, "server_ip": "198.18.0.2", "server_port": 8080, "client_port": client_port,
                 "segments_sent": sent, "bytes_sent": sent * MSS, "segments_received": received,
                 "bytes_received": received * MSS, "unmatched": 0, "first_sent_ns": T0, "last_received_ns": T0,
                 "tcp_info": info}, **kw)


def write_probe(tmp_path, records, flows, number=1):
    """Write probe/NNNNNN.packets.bin and .flows.json; `records`: (t_ns, owd_us, flow, bytes, flags)."""
    prefix = tmp_path / "probe" / f"{number:06d}"
    prefix.parent.mkdir(exist_ok=True)
    np.array(records, dtype=m.PACKET_DTYPE).tofile(str(prefix) + ".packets.bin")
    doc = {"version": 1, "clock": "CLOCK_MONOTONIC", "started_ns": T0, "stopped_ns": T0 + 10**10,
           "ring_records": len(records), "ring_dropped": 0, "flows": flows}
    (tmp_path / "probe" / f"{number:06d}.flows.json").write_text(json.dumps(doc))
    return str(prefix)


def test_the_packet_record_is_the_contracts_24_bytes_little_endian(tmp_path):
    prefix = write_probe(tmp_path, [(T0 + 1, 20_000, 3, 1448, 1)], [flow_entry(3, 40000, sent=1, received=1)])
    raw = open(prefix + ".packets.bin", "rb").read()
    assert len(raw) == 24
    assert raw[:8] == (T0 + 1).to_bytes(8, "little") and raw[8:12] == (20_000).to_bytes(4, "little")
    assert raw[12:16] == (3).to_bytes(4, "little") and raw[20:24] == (1).to_bytes(4, "little")


def test_delay_percentiles_count_only_matched_packets_and_are_numpys_linear_ones(tmp_path):
    # 1000 matched packets with one-way delays 20.000, 20.001, ..., 20.999 ms, and 50 unmatched
    # ones whose (meaningless) owd field is huge: they must not move the percentiles.
    matched = [(T0 + i * 10_000, 20_000 + i, 0, MSS, 1) for i in range(1000)]
    unmatched = [(T0 + i * 10_000 + 5, 4_000_000, 0, MSS, 0) for i in range(50)]
    prefix = write_probe(tmp_path, matched + unmatched, [flow_entry(0, 41000, sent=1060, received=1050)])
    probe = m.read_probe(prefix)
    got = m.flow_metrics(probe, 0)
    expected = np.percentile((20_000 + np.arange(1000)) / 1000.0, [50, 95, 99])
    assert got["delay_samples"] == 1000
    assert (got["delay_p50_ms"], got["delay_p95_ms"], got["delay_p99_ms"]) == pytest.approx(tuple(expected))
    assert got["delay_p50_ms"] == pytest.approx(20.4995)
    # the path dropped what was sent and never arrived
    assert got["path_drops"] == 10
    assert (got["retrans_segs"], got["retrans_bytes"]) == (4, 4 * MSS)
    assert (got["srtt_ms"], got["min_rtt_ms"]) == (23.5, 20.25)
    assert set(got) | {"throughput_mbps"} == set(m.FLOW_METRICS)


def test_a_flow_without_tcp_info_or_matches_has_null_figures_and_drops_never_go_negative(tmp_path):
    prefix = write_probe(tmp_path, [(T0, 0, 1, MSS, 0)],
                         [flow_entry(1, 42000, sent=3, received=5, tcp_info=False)])
    got = m.flow_metrics(m.read_probe(prefix), 1)
    assert got["delay_samples"] == 0 and got["delay_p50_ms"] is None and got["delay_p99_ms"] is None
    assert got["retrans_segs"] is None and got["srtt_ms"] is None and got["min_rtt_ms"] is None
    assert got["path_drops"] == 0


def test_bad_probe_files_are_named_in_the_error(tmp_path):
    prefix = write_probe(tmp_path, [(T0, 0, 1, MSS, 0)], [flow_entry(1, 42000, sent=1, received=1)])
    with pytest.raises(KeyError, match="no flow 7"):
        m.flow_metrics(m.read_probe(prefix), 7)
    with open(prefix + ".packets.bin", "ab") as f:
        f.write(b"\0" * 5)
    with pytest.raises(ValueError, match=r"000001\.packets\.bin: 29 bytes"):
        m.read_probe(prefix)
    other = write_probe(tmp_path, [], [], number=2)
    doc = json.loads(open(other + ".flows.json").read())
    doc["version"] = 2
    open(other + ".flows.json", "w").write(json.dumps(doc))
    with pytest.raises(ValueError, match="version 2"):
        m.read_probe(other)


def test_flows_are_matched_to_the_units_flows_by_client_port(tmp_path):
    prefix = write_probe(tmp_path, [], [flow_entry(0, 50001, sent=1, received=1),
                                        flow_entry(1, 50002, sent=1, received=1),
                                        # the same port again, fewer bytes: not taken
                                        flow_entry(2, 50001, sent=1, received=0)])
    probe = m.read_probe(prefix)
    assert m.match_flows(probe, {0: 50002, 1: 50001, 2: 59999, 3: None}) == {0: 1, 1: 0}


def constant_rate_records(flow, mbps, start_s, end_s, pkt=1250):
    """Packets of `pkt` bytes at a constant rate, arrival times from start_s to end_s (relative to T0)."""
    gap_ns = int(pkt * 8 / (mbps * 1e6) * 1e9)
    return [(T0 + int(start_s * 1e9) + i * gap_ns, 10_000, flow, pkt, 1)
            for i in range(int((end_s - start_s) * 1e9) // gap_ns)]


def test_throughput_bins_give_each_flows_rate_per_100_ms_and_the_csv_round_trips(tmp_path):
    # flow 0 at 8 Mbit/s for 1 s, flow 1 at 2 Mbit/s from 0.5 s to 1.5 s
    records = constant_rate_records(0, 8, 0.0, 1.0) + constant_rate_records(1, 2, 0.5, 1.5)
    prefix = write_probe(tmp_path, records, [flow_entry(0, 1, sent=800, received=800),
                                             flow_entry(1, 2, sent=200, received=200),
                                             flow_entry(2, 3, sent=0, received=0)])
    probe = m.read_probe(prefix)
    bins = m.throughput_bins(probe, T0)
    assert {len(b) for b in bins.values()} == {15}
    assert bins[0][:10] == pytest.approx([8.0] * 10) and not bins[0][10:].any()
    assert not bins[1][:5].any() and bins[1][5:] == pytest.approx([2.0] * 10)
    assert not bins[2].any()  # a flow that delivered nothing has empty bins
    # packets before t0 are not binned
    later = m.throughput_bins(probe, T0 + 10**9)
    assert len(later[1]) == 5 and later[1] == pytest.approx([2.0] * 5) and not later[0].any()

    csv = prefix + ".throughput.csv"
    m.write_throughput_csv(csv, {10: bins[0], 11: bins[1]})  # keyed by the unit's flow numbers
    lines = open(csv).read().splitlines()
    assert lines[0] == "flow,t_s,mbps" and lines[1] == "10,0,8" and lines[16] == "11,0,0"
    assert lines[2].split(",")[1] == "0.1" and len(lines) == 1 + 2 * 15
    back = m.read_throughput_csv(csv)
    assert back[10] == pytest.approx(bins[0]) and back[11] == pytest.approx(bins[1])


def test_jains_index_of_known_rates():
    assert m.jain_index([3.0, 3.0]) == 1.0
    assert m.jain_index([6.0, 2.0]) == pytest.approx(64 / 80)
    assert m.jain_index([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)
    for bad in ([], [0.0, 0.0], [1.0, -1.0]):
        with pytest.raises(ValueError):
            m.jain_index(bad)


def test_jain_is_taken_over_the_interval_where_both_flows_are_active(tmp_path):
    # flow 0: 9 Mbit/s alone for 1 s, then 6 Mbit/s for 2 s while flow 1 runs at 2 Mbit/s,
    # then 9 Mbit/s alone again: over the shared 2 s, Jain = (6+2)^2 / (2 * (36+4)) = 0.8.
    records = (constant_rate_records(0, 9, 0.0, 1.0) + constant_rate_records(0, 6, 1.0, 3.0)
               + constant_rate_records(0, 9, 3.0, 4.0) + constant_rate_records(1, 2, 1.0, 3.0))
    prefix = write_probe(tmp_path, records, [flow_entry(0, 1, sent=1, received=1),
                                             flow_entry(1, 2, sent=1, received=1)])
    probe = m.read_probe(prefix)
    start, end = m.shared_interval(probe, [0, 1])
    assert (start - T0 / 1e9, end - T0 / 1e9) == (pytest.approx(1.0, abs=1e-3), pytest.approx(3.0, abs=0.01))
    assert m.shared_interval(m.throughput_bins(probe, T0), [0, 1]) == (pytest.approx(1.0), pytest.approx(3.0))
    jain, shared_s = m.jain_over_shared(probe, [0, 1])
    assert jain == pytest.approx(0.8, abs=1e-3) and shared_s == pytest.approx(2.0)
    # equal rates: 1.0
    equal = write_probe(tmp_path, constant_rate_records(0, 5, 0.0, 2.0) + constant_rate_records(1, 5, 0.0, 2.0),
                        [flow_entry(0, 1, sent=1, received=1), flow_entry(1, 2, sent=1, received=1)], number=2)
    jain, shared_s = m.jain_over_shared(m.read_probe(equal), [0, 1])
    assert jain == pytest.approx(1.0) and shared_s == pytest.approx(2.0)
    # a lone flow, and flows that never overlap, have no index
    assert m.jain_over_shared(probe, [0]) == (None, 0.0)
    apart = write_probe(tmp_path, constant_rate_records(0, 5, 0.0, 1.0) + constant_rate_records(1, 5, 2.0, 3.0),
                        [flow_entry(0, 1, sent=1, received=1), flow_entry(1, 2, sent=1, received=1)], number=3)
    assert m.jain_over_shared(m.read_probe(apart), [0, 1]) == (None, 0.0)
    assert m.shared_interval(m.read_probe(apart), [0, 1]) is None


def request(i, size, fct, ideal=0.05, ok=True):
    return {"i": i, "t_s": i * 0.1, "size": size, "fct_s": fct if ok else None, "ttfb_s": 0.02,
            "ideal_s": ideal, "slowdown": fct / ideal if ok and ideal else None, "ok": ok,
            "error": None if ok else "curl: (28) timed out", "client_port": 40000 + i}


def test_workload_buckets_split_at_100k_and_1m_and_use_linear_percentiles():
    reqs = ([request(i, 99_999, 0.1 * (i + 1)) for i in range(5)]             # lt100k: fct 0.1..0.5
            + [request(10, 100_000, 1.0, ideal=0.5), request(11, 1_000_000, 3.0, ideal=0.5)]  # 100k-1m
            + [request(12, 50_000, 9.9, ok=False)])                            # failed: not counted
    got = m.workload_metrics(reqs)
    assert got["n_lt100k"] == 5 and got["n_100k-1m"] == 2 and got["n_gt1m"] == 0
    assert got["fct_lt100k_p50_s"] == pytest.approx(0.3)
    assert got["fct_lt100k_p99_s"] == pytest.approx(0.4 + 0.96 * 0.1)  # numpy's linear interpolation
    assert got["slowdown_lt100k_p50"] == pytest.approx(6.0)
    assert got["fct_100k-1m_p50_s"] == pytest.approx(2.0) and got["slowdown_100k-1m_p99"] == pytest.approx(5.96)
    assert all(got[f"{k}"] is None for k in ("fct_gt1m_p50_s", "fct_gt1m_p99_s", "slowdown_gt1m_p50", "slowdown_gt1m_p99"))
    assert m.size_bucket(1_000_001) == "gt1m"
    # trace links have no ideal FCT: FCT figures, no slowdown
    traced = m.workload_metrics([request(0, 2_000_000, 4.0, ideal=None)])
    assert traced["fct_gt1m_p50_s"] == 4.0 and traced["slowdown_gt1m_p50"] is None and traced["n_gt1m"] == 1
    assert m.ideal_fct_s(1_500_000, 0.05, 12) == pytest.approx(0.1 + 1.0)
    with pytest.raises(ValueError, match="link rate"):
        m.ideal_fct_s(1, 0.05, 0)


def test_harm_is_ware_et_als_relative_loss_clipped_at_zero():
    assert m.harm(10.0, 6.0, higher_is_better=True) == pytest.approx(0.4)   # throughput fell 10 -> 6
    assert m.harm(10.0, 12.0, higher_is_better=True) == 0.0                 # more throughput: no harm
    assert m.harm(20.0, 80.0, higher_is_better=False) == pytest.approx(0.75)  # delay 20 -> 80 ms
    assert m.harm(20.0, 15.0, higher_is_better=False) == 0.0
    with pytest.raises(ValueError):
        m.harm(0.0, 1.0, higher_is_better=True)


def test_paired_harm_gives_an_interval_only_from_five_pairs():
    three = m.paired_harm([10, 10, 10], [6, 5, 8], higher_is_better=True)
    assert three["harm"] == pytest.approx(0.4) and three["n_pairs"] == 3
    assert three["ci95"] is None and three["reason"] == "n = 3: too few for an interval"
    six = m.paired_harm([10, 10, 10, 10, 10, 10], [6, 5, 8, 7, 6, 5], higher_is_better=True)
    assert six["harm"] == pytest.approx(0.4) and six["reason"] is None
    lo, hi = six["ci95"]
    assert 0.2 <= lo <= 0.4 <= hi <= 0.5
    assert m.paired_harm([10] * 6, [5] * 6, True)["ci95"] == [0.5, 0.5]
    assert m.paired_harm([], [], True) == {"harm": None, "ci95": None, "n_pairs": 0, "reason": "no pairs"}
    with pytest.raises(ValueError, match="equally many"):
        m.paired_harm([1, 2], [1], True)


def old_row(scheme, tct, rep=1):
    return {"client": "a", "scheme": scheme, "repetition": rep, "file_bytes": 1000, "tct_s": tct, "sha256_ok": True,
            "error": None}


def test_summary_of_rows_without_the_new_columns_is_unchanged():
    rows = [old_row("native:cubic", 1.0), old_row("native:cubic", 3.0, rep=2)]
    s = stats.summarize(rows)[0]
    assert (s["n"], s["tct_median_s"], s["tct_mean_s"]) == (2, 2.0, 2.0)
    assert all(s[f"{k}_median"] is None and s[f"{k}_ci95"] is None for k in stats.SUMMARY_METRICS)
    text = stats.format_table([s])
    assert "throughput and delay" not in text and len(text.splitlines()) == 3
    assert stats.summary_sections(rows) == ({}, "")


def test_summary_gives_each_metric_a_median_and_a_t_interval():
    rows = []
    for rep, (tput, d95) in enumerate([(10.0, 30.0), (12.0, 34.0), (11.0, 32.0)], start=1):
        rows.append(dict(old_row("native:cubic", 2.0, rep), throughput_mbps=tput, delay_p95_ms=d95, path_drops=rep,
                         delay_p50_ms=20.0))
    rows.append(dict(old_row("native:cubic", None, 4), error="curl: (28)", throughput_mbps=1.0))  # not counted
    s = stats.summarize(rows)[0]
    _, lo, hi = stats.mean_ci95([10.0, 12.0, 11.0])
    assert s["throughput_mbps_median"] == 11.0 and s["throughput_mbps_ci95"] == [pytest.approx(lo), pytest.approx(hi)]
    assert s["delay_p95_ms_median"] == 32.0 and s["path_drops_median"] == 2.0
    assert s["delay_p50_ms_ci95"] == [20.0, 20.0] and s["jain_median"] is None
    table = stats.format_table([s]).split("\n\n")
    assert len(table) == 2 and table[1].startswith("throughput and delay")
    line = table[1].splitlines()[-1]
    assert f"11.00 [{lo:.2f}, {hi:.2f}]" in line and "32.0 [" in line and line.split()[:3] == ["a", "native:cubic", "3"]
    one = stats.summarize(rows[:1])[0]
    assert one["throughput_mbps_median"] == 10.0 and one["throughput_mbps_ci95"] is None


def competition_unit(scheme, rep, comp_tput, test_tput, comp_delay=40.0, jain=0.9):
    flows = [{"flow": 0, "scheme": "native:cubic", "role": "competitor", "start_s": 0, "throughput_mbps": comp_tput,
              "delay_p95_ms": comp_delay},
             {"flow": 1, "scheme": scheme, "role": "test", "start_s": 1, "throughput_mbps": test_tput,
              "delay_p95_ms": 30.0}]
    return dict(old_row(scheme, 3.0, rep), client="shared", flows=flows, jain=jain, shared_s=2.0,
                throughput_mbps=test_tput)


def test_competition_rows_pair_each_scheme_with_the_competitors_own_by_repetition():
    rows = []
    for rep in range(1, 7):
        rows.append(competition_unit("native:cubic", rep, 6.0, 6.0))
        # kernel:bbr takes more than its share: cubic falls to 4 of its 6 Mbit/s, its delay doubles
        rows.append(competition_unit("kernel:bbr", rep, 4.0, 8.0, comp_delay=80.0, jain=0.8))
        if rep <= 3:
            rows.append(competition_unit("kernel:vegas", rep, 9.0, 3.0))
    rows.append(old_row("native:cubic", 1.0))  # a lone flow of another cell: not a competition
    comp = {r["scheme"]: r for r in stats.competition_rows(rows)}
    assert list(comp) == ["native:cubic", "kernel:bbr", "kernel:vegas"]
    bbr = comp["kernel:bbr"]
    assert bbr["n"] == 6 and bbr["jain_median"] == pytest.approx(0.8) and bbr["jain_ci95"] == [pytest.approx(0.8)] * 2
    assert [(f["role"], f["throughput_mbps_median"]) for f in bbr["flows"]] == [("competitor", 4.0), ("test", 8.0)]
    (h,) = bbr["harm"]
    assert h["competitor"] == "native:cubic" and h["flow"] == 0
    assert h["throughput"]["harm"] == pytest.approx(1 / 3) and h["throughput"]["ci95"] == [pytest.approx(1 / 3)] * 2
    assert h["delay_p95"]["harm"] == pytest.approx(0.5) and h["delay_p95"]["n_pairs"] == 6
    vegas = comp["kernel:vegas"]["harm"][0]
    assert vegas["throughput"]["harm"] == 0.0 and vegas["throughput"]["reason"] == "n = 3: too few for an interval"
    assert comp["native:cubic"]["harm"][0]["reason"] == "the reference itself"
    doc, text = stats.summary_sections(rows)
    assert list(doc) == ["competition"] and doc["competition"][1]["scheme"] == "kernel:bbr"
    assert "0.333 [0.333, 0.333]" in text and "n = 3: too few for an interval" in text
    assert "the reference itself" in text
    # without a unit running the competitor's scheme under test there is no reference
    alone = stats.competition_rows([r for r in rows if r["scheme"] == "kernel:bbr"])
    assert alone[0]["harm"][0]["reason"] == "no unit with native:cubic under test"


def workload_unit(scheme, rep, p50, n_small=8):
    w = {"kind": "poisson", "load": 0.3, "duration_s": 4, "requests": n_small + 1, "completed": n_small,
         "failed": 1, "requests_file": f"workload/{rep:06d}.jsonl"}
    w.update({"fct_lt100k_p50_s": p50, "fct_lt100k_p99_s": 2 * p50, "slowdown_lt100k_p50": 3.0,
              "slowdown_lt100k_p99": 9.0, "n_lt100k": n_small})
    for b in ("100k-1m", "gt1m"):
        w.update({f"fct_{b}_p50_s": None, f"fct_{b}_p99_s": None, f"slowdown_{b}_p50": None,
                  f"slowdown_{b}_p99": None, f"n_{b}": 0})
    return dict(old_row(scheme, 4.0, rep), client="web", workload=w)


def test_workload_rows_take_the_median_over_repetitions_per_bucket():
    rows = [workload_unit("native:cubic", 1, 0.1), workload_unit("native:cubic", 2, 0.3),
            workload_unit("native:cubic", 3, 0.2)]
    (w,) = stats.workload_rows(rows)
    assert (w["units"], w["requests"], w["completed"], w["failed"]) == (3, 27, 24, 3)
    small = w["buckets"]["lt100k"]
    assert (small["n"], small["units"], small["fct_p50_s"], small["fct_p99_s"]) == (24, 3, 0.2, 0.4)
    assert w["buckets"]["gt1m"] == {"n": 0, "units": 0, "fct_p50_s": None, "fct_p99_s": None,
                                    "slowdown_p50": None, "slowdown_p99": None}
    doc, text = stats.summary_sections(rows)
    assert list(doc) == ["workload"] and "lt100k" in text and "0.200" in text


def test_parquet_round_trip_of_new_and_old_rows(tmp_path):
    new = competition_unit("kernel:bbr", 1, 4.0, 8.0)
    new.update(delay_p50_ms=21.5, delay_samples=1234, retrans_segs=7, retrans_bytes=7 * MSS, srtt_ms=30.1,
               min_rtt_ms=20.2, path_drops=5, probe="probe/000001", throughput_bins="probe/000001.throughput.csv",
               link_utilisation=0.66, ovs_retrans=None, workload=workload_unit("x", 1, 0.1)["workload"])
    old = old_row("native:cubic", 1.5)
    path = tmp_path / "transfers.parquet"
    results.write_transfers_parquet(path, [new, old])
    back_new, back_old = results.read_transfers_parquet(path)
    for k in ("delay_p50_ms", "delay_samples", "retrans_segs", "path_drops", "probe", "throughput_bins", "jain",
              "shared_s", "flows", "workload", "link_utilisation"):
        assert back_new[k] == new[k], k
    assert back_old["tct_s"] == 1.5 and all(back_old[k] is None for k in ("flows", "workload", "throughput_mbps",
                                                                          "delay_p95_ms", "jain", "probe"))
    # the summary of what was read back equals the summary of what was written
    assert stats.summary_sections([back_new]) == stats.summary_sections([new])
    assert set(results.JSON_COLUMNS) == {"flows", "workload"}


def test_the_phase_table_names_the_best_scheme_of_each_phase_by_power():
    from ccswitch.experiments import statistics as st

    def unit(scheme, rep, before, after):
        return {"client": "c", "scheme": scheme, "repetition": rep, "file_bytes": 1, "error": None, "sha256_ok": True,
                "tct_s": 1.0, "phases": [{"at_s": 0.0, "throughput_mbps": before[0], "delay_p95_ms": before[1]},
                                         {"at_s": 5.0, "throughput_mbps": after[0], "delay_p95_ms": after[1]}]}
    rows = []
    for rep in range(1, 7):
        rows.append(unit("kernel:vegas", rep, (22 + 0.1 * rep, 21), (1.0 + 0.01 * rep, 25)))
        rows.append(unit("kernel:bbr", rep, (23 + 0.1 * rep, 40), (20 + 0.1 * rep, 45)))
    phases = st.phase_rows(rows)
    assert [(p["phase"], p["best"]) for p in phases] == [(0, "kernel:vegas"), (1, "kernel:bbr")]
    assert all(p["best_vs_runner_up"]["kind"] == "better" for p in phases)
    text = st.format_phases(phases)
    assert "phase 0: best kernel:vegas" in text and "phase 1: best kernel:bbr" in text
    # three repetitions are too few for a verdict
    few = st.phase_rows([r for r in rows if r["repetition"] <= 3])
    assert few[0]["best_vs_runner_up"]["kind"] == "too few"


def test_figures_the_path_cannot_produce_are_named():
    from ccswitch.experiments.measurements import physical_problems

    assert physical_problems({"throughput_mbps": 12.1, "delay_p50_ms": 20.2}, link_mbps=12, one_way_ms=20) == []
    got = physical_problems({"throughput_mbps": 12.5, "delay_p50_ms": 18.0}, link_mbps=12, one_way_ms=20)
    assert len(got) == 2 and "above the link" in got[0] and "below the one-way" in got[1]
    # trace links have no rate to check against
    assert physical_problems({"throughput_mbps": 99.0}, link_mbps=None, one_way_ms=0) == []
