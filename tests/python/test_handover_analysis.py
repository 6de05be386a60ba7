"""The analyses of the handover scenarios on synthetic runs whose figures are known: a handover
with a known dip (smoothness), TCT tables with a known oracle (mix) and MCC's comparison."""

import json
import os

import pytest

from ccswitch import cli
from ccswitch.analysis import handover
from ccswitch.analysis.after_run import RunAnalyses
from ccswitch.experiments import runner
from ccswitch.experiments.scenario import loads_scenario

T0_US = 1_700_000_000_000_000
STEP_US = 50_000  # one report every 50 ms
POLICY = "kernel:policy:policies/cubic-bbr-westwood.toml"

SCENARIO = """
name = "smooth"
schemes = ["{policy}", "ovs:policy:policies/cubic-bbr-westwood.toml", "kernel:bbr", "kernel:westwood"]
analysis = "{analysis}"
plots = ["flows"]
timeout_s = 60
[[clients]]
name = "c"
link = {{ mbps = 2 }}
file_bytes = 5_000_000
"""


class Flow:
    """Builds one flow's events: reports every 50 ms at a given rate, handovers, a close."""

    def __init__(self, sid, algorithm):
        self.sid, self.algorithm, self.t_us = sid, algorithm, T0_US
        self.events = [{"event": "flow", "t_us": T0_US, "datapath": 1, "sid": sid, "src": "198.18.0.2",
                        "sport": 8080, "dst": "198.18.0.1", "dport": 40000 + sid, "algorithm": algorithm}]

    def run(self, seconds, mbps, cwnd, inflight, spikes=None):
        """Reports for `seconds` delivering `mbps`; `spikes` maps a report's time since the flow
        started (µs) to the bytes in flight it reports instead of `inflight`."""
        for _ in range(round(seconds * 1e6 / STEP_US)):
            self.t_us += STEP_US
            f = (spikes or {}).get(self.t_us - T0_US, inflight)
            self.events.append({"event": "report", "t_us": self.t_us, "datapath": 1, "sid": self.sid,
                                "algorithm": self.algorithm, "cwnd_bytes": cwnd, "pacing_rate_bps": None,
                                "rtt_us": 30_000, "acked_bytes": round(mbps * 1e6 * STEP_US / 1e6 / 8),
                                "lost_packets": 0, "bytes_in_flight": f, "delivery_rate_bps": mbps * 1e6,
                                "timeout": False})
        return self

    def handover(self, to, cwnd):
        self.events.append({"event": "handover", "t_us": self.t_us, "datapath": 1, "sid": self.sid,
                            "from": self.algorithm, "to": to, "kind": "temporal",
                            "reason": f"rule -> {to}", "features": {"elapsed_s": (self.t_us - T0_US) / 1e6},
                            "cwnd_bytes": cwnd, "pacing_rate_bps": None})
        self.algorithm = to
        return self

    def write(self, run_dir, name):
        self.events.append({"event": "close", "t_us": self.t_us + 1000, "datapath": 1, "sid": self.sid,
                            "algorithm": self.algorithm, "reports": 0, "handovers": 0})
        os.makedirs(os.path.join(run_dir, "flows"), exist_ok=True)
        rel = f"flows/{name}.jsonl"
        with open(os.path.join(run_dir, rel), "w") as f:
            f.write("".join(json.dumps(e) + "\n" for e in self.events))
        return rel


def policy_flow():
    """Cubic at 1 Mbit/s for 10 s; handed over to BBR, which delivers nothing for 0.5 s (a stall)
    and then 2 Mbit/s; at 20 s Westwood at 1 Mbit/s, which at 20.5 s has 17 kB in flight
    against its 12 kB window (a 5 kB burst)."""
    return (Flow(1, "cubic").run(10, 1, 20_000, 15_000)
            .handover("bbr", 20_000).run(0.5, 0, 20_000, 15_000).run(9.5, 2, 20_000, 15_000)
            .handover("westwood", 20_000).run(10, 1, 12_000, 10_000, spikes={20_500_000: 17_000}))


def smooth_run(tmp_path, analysis="smoothness"):
    run = str(tmp_path)
    (tmp_path / "scenario.toml").write_text(SCENARIO.format(policy=POLICY, analysis=analysis))
    rows = []
    for i, (scheme, flow) in enumerate([
        (POLICY, policy_flow()),
        ("ovs:policy:policies/cubic-bbr-westwood.toml", policy_flow()),
        ("kernel:bbr", Flow(2, "bbr").run(20, 2, 20_000, 15_000)),
        ("kernel:westwood", Flow(3, "westwood").run(20, 1, 12_000, 10_000)),
    ], 1):
        rows.append({"transfer": i, "client": "c", "scheme": scheme, "repetition": 1, "file_bytes": 5_000_000,
                     "tct_s": 30.0, "sha256_ok": True, "error": None, "events": flow.write(run, f"{i:03d}")})
    with open(tmp_path / "transfers.jsonl", "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_smoothness_figures_of_a_known_dip(tmp_path):
    res = handover.smoothness(str(tmp_path), smooth_run(tmp_path))
    assert res["steady_bps"] == pytest.approx({"kernel:bbr": 2e6, "kernel:westwood": 1e6})
    to_bbr, to_westwood, sw_bbr, sw_westwood = res["handovers"]
    # 0.5 s of nothing, 1.5 s at 2 Mbit/s: 1.5 Mbit/s in the 2 s after the handover, 75% of BBR's 2
    assert to_bbr["handover"] == "cubic->bbr" and to_bbr["t_s"] == pytest.approx(10.0)
    assert to_bbr["throughput_bps"] == pytest.approx(1.5e6)
    assert to_bbr["ratio"] == pytest.approx(0.75) and to_bbr["smooth"] is False
    assert to_bbr["stall_bins"] == 1
    assert (to_bbr["burst"], to_bbr["max_excess_bytes"], to_bbr["max_inflight_bytes"]) == (False, -5000, 15_000)
    assert to_westwood["ratio"] == pytest.approx(1.0) and to_westwood["smooth"] is True
    assert to_westwood["stall_bins"] == 0
    assert (to_westwood["burst"], to_westwood["max_excess_bytes"]) == (True, 5000)
    assert (to_westwood["max_inflight_bytes"], to_westwood["window_bytes"]) == (17_000, 12_000)
    # the ovs datapath has no fixed schemes here: the kernel datapath's steady state serves
    assert sw_bbr["steady_scheme"] == "kernel:bbr" and sw_bbr["ratio"] == pytest.approx(0.75)
    assert sw_westwood["steady_scheme"] == "kernel:westwood"
    assert res["verdict"] == {"handovers": 4, "all_smooth": False, "stalls": 2, "bursts": 2}
    text = handover.format_smoothness(res)
    assert "cubic->bbr" in text and "75%" in text and "FAIL" in text
    assert "4 handovers: throughput target FAIL, stalls 2 (FAIL), bursts 2 (FAIL)" in text


def test_a_smooth_switch_passes(tmp_path):
    run = str(tmp_path)
    flow = Flow(1, "cubic").run(10, 1, 20_000, 15_000).handover("bbr", 20_000).run(10, 1.8, 20_000, 15_000)
    rows = [{"transfer": 1, "client": "c", "scheme": POLICY, "repetition": 1, "file_bytes": 1, "tct_s": 20.0,
             "sha256_ok": True, "error": None, "events": flow.write(run, "001")},
            {"transfer": 2, "client": "c", "scheme": "kernel:bbr", "repetition": 1, "file_bytes": 1,
             "tct_s": 20.0, "sha256_ok": True, "error": None,
             "events": Flow(2, "bbr").run(20, 2, 20_000, 15_000).write(run, "002")}]
    res = handover.smoothness(run, rows)
    (sw,) = res["handovers"]
    assert sw["ratio"] == pytest.approx(0.9) and sw["smooth"] and sw["stall_bins"] == 0 and sw["burst"] is False
    assert res["verdict"] == {"handovers": 1, "all_smooth": True, "stalls": 0, "bursts": 0}


def test_steady_state_without_events_is_size_over_tct():
    assert handover.steady_throughput_bps({"file_bytes": 1_000_000, "tct_s": 4.0, "sha256_ok": True,
                                            "error": None}, None) == pytest.approx(2e6)
    assert handover.steady_throughput_bps({"file_bytes": 1, "tct_s": None, "sha256_ok": False,
                                            "error": "timeout: x"}, None) is None


def tct_row(client, scheme, tct, rep=1, algorithms=None, error=None):
    return {"client": client, "scheme": scheme, "file_bytes": 1000, "repetition": rep, "tct_s": tct,
            "sha256_ok": error is None, "error": error, "algorithms": algorithms}


def mix_rows():
    A, B, P = "kernel:cubic", "kernel:bbr", "kernel:policy:mystique"
    return [
        tct_row("c1", A, 10), tct_row("c1", A, 10, 2),
        tct_row("c1", B, 20), tct_row("c1", B, None, 2, error="timeout: no result after 90 s"),
        tct_row("c1", P, 10, algorithms=["cubic", "hybla"]), tct_row("c1", P, 11, 2, algorithms=["cubic", "hybla"]),
        tct_row("c2", A, 30), tct_row("c2", A, 30, 2),
        tct_row("c2", B, 10), tct_row("c2", B, 10, 2),
        tct_row("c2", P, 10, algorithms=["cubic", "bbr"]), tct_row("c2", P, 10, 2, algorithms=["cubic"]),
        # the ovs datapath: the policy loses everywhere
        tct_row("c1", "ovs:cubic", 10), tct_row("c2", "ovs:cubic", 10),
        tct_row("c1", "ovs:policy:mystique", 12), tct_row("c2", "ovs:policy:mystique", 12),
    ]


def test_mix_against_average_best_and_oracle():
    res = handover.mix(mix_rows(), timeout_s=60)
    k = res["datapaths"]["kernel"]
    # c1: cubic 10, bbr (20 + 60 for the timeout) / 2 = 40, policy 10.5; c2: 30, 10, 10
    assert k["mean_tct_s"] == pytest.approx({"kernel:cubic": 20, "kernel:bbr": 25,
                                             "kernel:policy:mystique": 10.25})
    assert k["best_fixed"] == "kernel:cubic" and k["oracle_tct_s"] == pytest.approx(10)
    assert k["oracle_choice"] == {"c1@1000": "kernel:cubic", "c2@1000": "kernel:bbr"}
    assert k["failed"]["kernel:bbr"] == 1
    p = k["policies"]["kernel:policy:mystique"]
    assert p["reduction_vs_fixed_avg"] == pytest.approx(((1 - 10.25 / 20) + (1 - 10.25 / 25)) / 2)
    assert p["reduction_vs_fixed_avg_tct"] == pytest.approx(1 - 10.25 / 22.5)
    assert p["reduction_vs_best"] == pytest.approx(1 - 10.25 / 20)
    assert p["over_oracle"] == pytest.approx(0.025)
    # 2 cells x 2 repetitions = 4 pairs: too few for an interval, so no verdict either way
    assert (p["pass_avg"], p["pass_best"], p["pass_oracle"]) == (None, None, None)
    assert p["verdicts"]["vs_best"]["text"] == "n = 4: too few for an interval"
    assert p["chosen"] == {"c1@1000": "cubic>hybla x2", "c2@1000": "cubic>bbr, cubic"}
    s = res["datapaths"]["ovs"]["policies"]["ovs:policy:mystique"]
    assert s["reduction_vs_best"] == pytest.approx(-0.2) and s["over_oracle"] == pytest.approx(0.2)
    assert (s["pass_avg"], s["pass_best"], s["pass_oracle"]) == (None, None, None)
    text = handover.format_mix(res)
    assert "mix on the kernel datapath" in text and "mix on the ovs datapath" in text
    assert "over the per-cell oracle +2.5% (within 5%) -: n = 4: too few for an interval" in text
    assert "vs the best fixed (ovs:cubic) -20.0% (must not lose) -: n = 2: too few for an interval" in text


def test_mix_verdicts_from_five_pairs_on():
    rows = []
    for rep in range(1, 7):
        wobble = 1 + 0.02 * (rep % 3)
        for c in ("c1", "c2"):
            rows += [tct_row(c, "kernel:cubic", 10 * wobble, rep), tct_row(c, "kernel:bbr", 12 * wobble, rep),
                     tct_row(c, "kernel:policy:mystique", 7 * wobble, rep, algorithms=["cubic", "bbr"]),
                     tct_row(c, "ovs:cubic", 10 * wobble, rep),
                     tct_row(c, "ovs:policy:mystique", 12 * wobble, rep, algorithms=["cubic"])]
    res = handover.mix(rows, timeout_s=60)
    p = res["datapaths"]["kernel"]["policies"]["kernel:policy:mystique"]
    assert (p["pass_avg"], p["pass_best"], p["pass_oracle"]) == (True, True, True)
    assert p["verdicts"]["vs_fixed_avg"]["text"].startswith("better than ratio 0.82 (ratio 0.64")
    s = res["datapaths"]["ovs"]["policies"]["ovs:policy:mystique"]
    # it ran only cubic, as the best fixed scheme does: said so, neither PASS nor a win
    assert s["pass_best"] is None and s["verdicts"]["vs_best"]["text"] == "ran only cubic, as ovs:cubic does"
    assert (s["pass_avg"], s["pass_oracle"]) == (False, False)
    assert "(must not lose) -: ran only cubic, as ovs:cubic does" in handover.format_mix(res)


def test_mcc_policy_must_beat_every_fixed_scheme():
    rows = [tct_row("jittery", "kernel:bbr", 3.0), tct_row("wired", "kernel:bbr", 2.0),
            tct_row("jittery", "kernel:westwood", 2.0), tct_row("wired", "kernel:westwood", 2.5),
            tct_row("jittery", "kernel:policy:mcc-wifi", 2.0, algorithms=["bbr", "westwood"]),
            tct_row("wired", "kernel:policy:mcc-wifi", 2.0, algorithms=["bbr"]),
            tct_row("jittery", "ovs:westwood", 2.0), tct_row("wired", "ovs:westwood", 2.5),
            tct_row("jittery", "ovs:policy:mcc-wifi", 2.6), tct_row("wired", "ovs:policy:mcc-wifi", 2.0)]
    res = handover.mcc(rows, timeout_s=60)
    k = res["datapaths"]["kernel"]
    assert k["mean_tct_s"] == pytest.approx({"kernel:bbr": 2.5, "kernel:westwood": 2.25,
                                             "kernel:policy:mcc-wifi": 2.0})
    # one repetition per client: two pairs, too few for a verdict
    assert k["policy_beats_all_fixed"] == {"kernel:policy:mcc-wifi": None}
    assert k["chosen"]["kernel:policy:mcc-wifi"] == {"jittery@1000": "bbr>westwood", "wired@1000": "bbr"}
    assert res["datapaths"]["ovs"]["policy_beats_all_fixed"] == {"ovs:policy:mcc-wifi": None}
    text = handover.format_mcc(res)
    assert "MCC paper" in text and "2.75" in text
    assert "kernel:policy:mcc-wifi vs kernel:bbr: n = 2: too few for an interval" in text
    assert "kernel:policy:mcc-wifi beats every fixed scheme on mean TCT: - (not shown either way" in text


def test_mcc_one_outlier_of_fixed_bbr_is_no_win_and_running_only_bbr_is_flagged():
    """learned-mcc's case: the policy ran bbr in every transfer and its mean is below fixed
    BBR's only through one 5.25 s transfer of fixed BBR."""
    bbr = [2.0, 2.1, 1.9, 5.25, 2.0]
    rows = []
    for rep, t in enumerate(bbr, 1):
        rows += [tct_row("jittery", "kernel:bbr", t, rep), tct_row("jittery", "kernel:westwood", 2.5, rep),
                 tct_row("jittery", "kernel:policy:paths-v2.toml", 2.0 + 0.01 * rep, rep, algorithms=["bbr"]),
                 tct_row("jittery", "kernel:policy:mcc-wifi", 2.0 + 0.01 * rep, rep, algorithms=["bbr", "westwood"])]
    res = handover.mcc(rows, timeout_s=60)
    k = res["datapaths"]["kernel"]
    learned, mccp = k["verdicts"]["kernel:policy:paths-v2.toml"], k["verdicts"]["kernel:policy:mcc-wifi"]
    assert learned["kernel:bbr"]["text"] == "ran only bbr, as kernel:bbr does"
    assert learned["kernel:westwood"]["kind"] == "better"
    assert mccp["kernel:bbr"]["kind"] == "no difference" and mccp["kernel:bbr"]["ratio"] < 0.9
    assert k["policy_beats_all_fixed"] == {"kernel:policy:paths-v2.toml": None, "kernel:policy:mcc-wifi": None}
    text = handover.format_mcc(res)
    assert "kernel:policy:paths-v2 vs kernel:bbr: ran only bbr, as kernel:bbr does" in text
    assert "kernel:policy:mcc-wifi vs kernel:westwood: better (ratio 0.81" in text


def test_cli_analyze_and_handover(tmp_path, capsys):
    smooth_run(tmp_path)
    assert cli.main(["analyze", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("smoothness (MCC Fig. 5)") and "cubic->bbr" in out
    assert cli.main(["handover", "smoothness", str(tmp_path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"]["handovers"] == 4
    assert cli.main(["analyze", str(tmp_path), "--kind", "mcc"]) == 0
    assert "mcc on the kernel datapath" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["analyze", str(tmp_path / "absent")])
    assert "absent: not a directory" in capsys.readouterr().err


def test_cli_plot_flows(tmp_path, capsys):
    smooth_run(tmp_path)
    assert cli.main(["plot-flows", str(tmp_path)]) == 0
    written = capsys.readouterr().out.split()
    assert [os.path.basename(p) for p in written] == ["001.png", "002.png"]
    assert cli.main(["plot-flows", str(tmp_path), "--transfer", "3"]) == 0
    assert capsys.readouterr().out.strip().endswith("003.png")
    assert cli.main(["plot-flows", str(tmp_path), "--scheme", "kernel:westwood"]) == 0
    assert capsys.readouterr().out.strip().endswith("004.png")


def test_cli_plot_flows_compare_draws_one_figure_per_path_with_a_line_per_scheme(tmp_path, capsys):
    rows = smooth_run(tmp_path)
    assert cli.main(["plot-flows", str(tmp_path), "--compare"]) == 0
    assert capsys.readouterr().out.split() == [str(tmp_path / "flows" / "compare-c.png")]
    from matplotlib import image
    assert image.imread(str(tmp_path / "flows" / "compare-c.png")).shape[:2] == (550, 900)
    # the lines drawn: two panels (window, throughput), one line per repetition of each scheme asked for
    from ccswitch.analysis import plots
    import matplotlib.pyplot as plt
    drawn = []
    real_savefig = plt.Figure.savefig
    plt.Figure.savefig = lambda fig, *a, **k: drawn.append([[l.get_label() for l in ax.get_lines()] for ax in fig.axes])
    try:
        plots.plot_compare(str(tmp_path), rows, ["kernel:westwood", "kernel:bbr"])
    finally:
        plt.Figure.savefig = real_savefig
    assert drawn == [[["kernel:westwood", "kernel:bbr"]] * 2]
    with pytest.raises(SystemExit):
        cli.main(["plot-flows", str(tmp_path), "--compare", "--scheme", "kernel:reno"])
    assert "--scheme kernel:reno: not a scheme of this run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["plot-flows", str(tmp_path), "--compare", "--transfer", "1"])


def test_runner_writes_plots_and_the_analysis(tmp_path):
    rows = smooth_run(tmp_path)
    sc = loads_scenario(SCENARIO.format(policy="kernel:policy:mystique", analysis="smoothness"),
                        check_files=False)
    r = runner.Runner(sc, str(tmp_path), quiet=True)
    r.rows = [dict(row, scheme="kernel:policy:mystique") if row["scheme"] == POLICY else row for row in rows]
    doc = {}
    text = RunAnalyses().summary_parts(r, doc)
    assert text.startswith("\n\nsmoothness (MCC Fig. 5)")
    assert doc["handover"]["verdict"]["handovers"] == 4
    assert sorted(os.listdir(tmp_path / "flows")) == ["001.jsonl", "001.png", "002.jsonl", "002.png",
                                                       "003.jsonl", "004.jsonl"]
