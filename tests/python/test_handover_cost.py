"""What a handover costs per ordered pair (analysis/handover.py, "cost"): the formula on
figures worked out by hand, the probe window on packets laid out by hand, and a synthetic run
directory through `ccswitch analyze RUN --handover-cost OUT.json`."""

import json

import numpy as np
import pytest

from ccswitch import cli
from ccswitch.analysis import handover
from ccswitch.experiments import measurements as measure

MS_NS = 1_000_000
T0_NS = 5_000 * MS_NS  # the probe's clock when the first data segment left the server


def test_dip_and_delay_are_relative_to_the_steady_state_and_never_negative():
    assert handover.cost_dip(9.0, 12.0) == pytest.approx(0.25)
    assert handover.cost_dip(13.0, 12.0) == 0.0
    assert handover.cost_delay(60.0, 48.0) == pytest.approx(0.25)
    assert handover.cost_delay(40.0, 48.0) == 0.0
    # both last 2 s of a 10-s flow: (0.25 + 0.25) x 2 / 10
    assert handover.handover_cost(0.25, 0.25) == pytest.approx(0.1)
    with pytest.raises(ValueError, match="positive"):
        handover.cost_dip(1.0, 0.0)


def test_pair_costs_take_medians_over_repetitions_and_the_default_over_pairs():
    steady = {"c": {"bbr": [{"throughput_mbps": 12.0, "delay_p95_ms": 50.0}, {"throughput_mbps": 10.0, "delay_p95_ms": 46.0}],
                    "cubic": [{"throughput_mbps": 6.0, "delay_p95_ms": 80.0}, {"throughput_mbps": 8.0, "delay_p95_ms": 100.0}]},
              # another path: its steady states are not the ones the handovers on "c" are set against
              "d": {"vegas": [{"throughput_mbps": 1.0, "delay_p95_ms": 10.0}]}}
    handovers = [
        # B = bbr, steady 11 Mbit/s and 48 ms: dip 1 - 8.8/11 = 0.2, delay 60/48 - 1 = 0.25; then 0 and 0
        {"client": "c", "from": "cubic", "to": "bbr", "repetition": 1, "throughput_mbps": 8.8, "delay_p95_ms": 60.0, "stall_bins": 1},
        {"client": "c", "from": "cubic", "to": "bbr", "repetition": 2, "throughput_mbps": 11.0, "delay_p95_ms": 48.0, "stall_bins": 0},
        # B = cubic, steady 7 Mbit/s and 90 ms: dip 0 (7.7 > 7), delay 81/90 < 1: 0; then 0.5 and 108/90 - 1 = 0.2
        {"client": "c", "from": "bbr", "to": "cubic", "repetition": 1, "throughput_mbps": 7.7, "delay_p95_ms": 81.0},
        {"client": "c", "from": "bbr", "to": "cubic", "repetition": 2, "throughput_mbps": 3.5, "delay_p95_ms": 108.0},
        # no fixed vegas on this path: kept with a note, priced at nothing
        {"client": "c", "from": "bbr", "to": "vegas", "repetition": 1, "throughput_mbps": 3.0, "delay_p95_ms": 30.0},
    ]
    res = handover.pair_costs(steady, handovers)
    assert res["steady"]["c"]["bbr"] == {"throughput_mbps": 11.0, "delay_p95_ms": 48.0, "n": 2}
    to_bbr, to_cubic = res["pairs"]["cubic>bbr"], res["pairs"]["bbr>cubic"]
    # medians of two: dip 0.1, delay 0.125, cost (0.1 + 0.125) x 0.2 = 0.045
    assert (to_bbr["dip"], to_bbr["delay"], to_bbr["n"], to_bbr["stall_bins"]) == pytest.approx((0.1, 0.125, 2, 1))
    assert to_bbr["cost"] == pytest.approx(0.045)
    # dip 0.25, delay 0.1, cost 0.35 x 0.2 = 0.07
    assert (to_cubic["dip"], to_cubic["delay"]) == pytest.approx((0.25, 0.1))
    assert to_cubic["cost"] == pytest.approx(0.07)
    assert set(res["pairs"]) == {"cubic>bbr", "bbr>cubic"}
    assert res["handovers"][-1]["note"] == "no steady state of vegas" and res["handovers"][-1]["dip"] is None
    assert res["default"] == pytest.approx((0.045 + 0.07) / 2)
    doc = handover.cost_file({**res, "source": "results/x", "method": "m"})
    assert doc == {"default": 0.0575, "pairs": {"bbr>cubic": 0.07, "cubic>bbr": 0.045},
                   "source": "results/x", "method": "m"}


def packets(arrivals_ms, owd_ms, nbytes=1500):
    """Probe records of one flow (id 1): arrival k ms after T0, one-way delay, payload."""
    pk = np.zeros(len(arrivals_ms), dtype=measure.PACKET_DTYPE)
    pk["t_ns"] = T0_NS + np.asarray(arrivals_ms, dtype=np.int64) * MS_NS
    pk["owd_us"] = np.asarray(owd_ms, dtype=np.int64) * 1000
    pk["flow"], pk["bytes"], pk["flags"] = 1, nbytes, measure.FLAG_MATCHED
    return pk


def flows_entry(pk):
    return {"flow": 1, "server_ip": "198.18.0.2", "server_port": 8080, "client_port": 40000,
            "segments_sent": len(pk), "bytes_sent": int(pk["bytes"].sum()), "segments_received": len(pk),
            "bytes_received": int(pk["bytes"].sum()), "unmatched": 0, "first_sent_ns": T0_NS}


def handed_over_packets():
    """A packet every ms for 10 s at 20 ms one way, except none from 3.52 s to 4.02 s, and the
    100 packets before 5.02 s delayed 100 ms. A handover at 3.0 s opens the window at 3.02 s
    (3 s + the least one-way delay): in [3.02, 5.02) 1,500 packets arrive (9 Mbit/s), one
    500-ms bin is empty (a stall), and the p95 of 1,400 x 20 ms and 100 x 100 ms is 100 ms."""
    k = np.arange(10_000)
    k = k[(k < 3520) | (k >= 4020)]
    owd = np.where((k >= 4920) & (k < 5020), 100, 20)
    return packets(k, owd)


def steady_packets():
    """A packet every ms for 10 s at 20 ms: from 2 s on, 8,001 packets of 1500 B in 8 s."""
    k = np.arange(10_001)
    return packets(k, np.full(k.size, 20))


STEADY_MBPS = 8001 * 1500 * 8 / 8.0 / 1e6


def probe_of(pk):
    return measure.Probe(prefix="synthetic", packets=pk, meta={}, flows={1: flows_entry(pk)})


def test_the_window_after_a_handover_opens_when_the_new_algorithm_can_be_seen():
    fig = handover.probe_after_handover(probe_of(handed_over_packets()), 1, 3.0)
    assert fig["window_from_s"] == pytest.approx(3.02) and fig["span_s"] == 2.0
    assert fig["throughput_mbps"] == pytest.approx(1500 * 1500 * 8 / 2.0 / 1e6)  # 9 Mbit/s
    assert fig["delay_p95_ms"] == pytest.approx(100.0)
    assert fig["stall_bins"] == 1


def test_a_window_cut_short_by_the_end_of_the_flow_says_so():
    pk = packets(np.arange(4000), np.full(4000, 20))  # ends at 3.999 s
    fig = handover.probe_after_handover(probe_of(pk), 1, 3.0)
    # the window opens at 3.02 s; 980 packets arrive until the last one, 0.979 s later
    assert fig["span_s"] == pytest.approx(0.979)
    assert fig["throughput_mbps"] == pytest.approx(980 * 1500 * 8 / 0.979 / 1e6)
    assert fig["stall_bins"] == 0


def test_the_steady_state_skips_the_first_two_seconds():
    fig = handover.probe_steady(probe_of(steady_packets()), 1)
    assert fig["throughput_mbps"] == pytest.approx(STEADY_MBPS)
    assert fig["delay_p95_ms"] == pytest.approx(20.0)
    assert handover.probe_steady(probe_of(packets(np.arange(2500), np.full(2500, 20))), 1) is None


def write_probe(run, number, pk):
    (run / "probe").mkdir(exist_ok=True)
    prefix = run / "probe" / f"{number:06d}"
    pk.tofile(str(prefix) + ".packets.bin")
    (run / "probe" / f"{number:06d}.flows.json").write_text(
        json.dumps({"version": 1, "clock": "CLOCK_MONOTONIC", "flows": [flows_entry(pk)]}))
    return f"probe/{number:06d}"


PAIR = "kernel:policy:policies/handover-pair.toml:initial={},default={}"


def test_a_run_directory_gives_the_cost_file(tmp_path):
    def row(i, scheme, pk=None, events=None, error=None):
        return {"transfer": i, "client": "c", "scheme": scheme, "repetition": 1, "file_bytes": 15_000_000,
                "tct_s": None if error else 10.0, "sha256_ok": error is None, "error": error,
                "probe": write_probe(tmp_path, i, pk) if pk is not None else None, "handover_events": events}

    ho = [{"t_s": 3.0, "from": "cubic", "to": "bbr", "kind": "temporal", "reason": "default: no rule matched"}]
    rows = [row(1, PAIR.format("cubic", "bbr"), handed_over_packets(), ho),
            row(2, "kernel:bbr", steady_packets()),
            row(3, PAIR.format("bbr", "cubic"), steady_packets(), []),
            row(4, PAIR.format("vegas", "bbr"), error="curl: (28) Operation timed out")]
    (tmp_path / "transfers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "models" / "handover-cost.json"
    assert cli.main(["analyze", str(tmp_path), "--handover-cost", str(out)]) == 0
    doc = json.loads(out.read_text())
    dip, delay = 1 - 9.0 / STEADY_MBPS, 100.0 / 20.0 - 1  # 0.2501 and 4
    cost = round((dip + delay) * 2 / 10, 4)
    assert doc == {"default": cost, "pairs": {"cubic>bbr": cost}, "source": str(tmp_path),
                   "method": handover.COST_METHOD}
    res = handover.handover_costs(str(tmp_path))
    assert [(m["transfer"], m["note"]) for m in res["missing"]] == [
        (3, "no handover"), (4, "curl: (28) Operation timed out")]
    assert res["pairs_without_cost"] == ["bbr>cubic", "vegas>bbr"]
    text = handover.format_costs(res)
    assert "cubic>bbr" in text and "transfer 3 (" in text and "pairs asked for without a cost: bbr>cubic" in text
