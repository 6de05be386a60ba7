"""`ccswitch report` on synthetic run directories whose figures are known: the TCT and ratio
tables, our figures beside the papers' (Mystique's 18.13%, MCC's WiFi means, MCC Fig. 5), the
seeds' Observations 1-3 on a grid, the flows' figures or the line saying there are none, and
small PNGs."""

import json
import os

import pytest

from ccswitch import cli
from ccswitch.analysis import report
from ccswitch.experiments import results
from ccswitch.experiments.rundir import RunDirectoryError
from test_handover_analysis import smooth_run

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
MAX_FIGURE_BYTES = 150_000


def row(client, scheme, tct, rep=1, size=1000, error=None, algorithms=None, **extra):
    """A transfer row with the fields the runner records (Runner.new_row and what the transfer
    fills in); `error` makes it a curl timeout."""
    r = {"client": client, "scheme": scheme, "repetition": rep, "file_bytes": size, "load1": 0.3, "host": "h",
         "tct_s": None if error else tct, "ttfb_s": None if error else 0.1, "connect_s": 0.05,
         "bytes": None if error else size, "http_code": None if error else 200, "sha256_ok": error is None,
         "cc_observed": None, "client_addr": None, "started_at": f"2026-11-24T10:{rep:02d}:00.000+00:00",
         "wall_s": None, "error": error, "curl_exit": 28 if error else None,
         "rtt_ms": 40, "delay_ms": 20, "loss_downlink": 0.0, "loss_uplink": 0.0, "downlink_mbps": 24.0,
         "uplink_mbps": 24.0, "downlink_trace": None, "uplink_trace": None, "queue_packets": None,
         "path": "RTT 40 ms, 24 Mbit/s, unbounded queue"}
    if scheme.split(":")[0] in ("kernel", "ovs", "ccswitch", "switch"):
        r.update(algorithms=algorithms or [scheme.split(":", 1)[1]], handover_events=[], on_report_errors=0)
    r.update(extra)
    return r


def write_run(path, scenario, rows, parquet_only=False):
    path.mkdir(parents=True, exist_ok=True)
    (path / "scenario.toml").write_text(scenario)
    if parquet_only:
        results.write_transfers_parquet(str(path / "transfers.parquet"), rows)
    else:
        (path / "transfers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def assert_small_pngs(out_dir, names):
    for name in names:
        data = open(os.path.join(out_dir, name), "rb").read()
        assert data.startswith(PNG_MAGIC), name
        assert 2_000 < len(data) < MAX_FIGURE_BYTES, (name, len(data))


# ----------------------------------------------------------------------- mix (Mystique Fig. 8)

MIX = """
name = "mix"
description = "a two-cell mix"
timeout_s = 60
analysis = "mix"
schemes = ["{k}:cubic", "{k}:bbr", "{k}:policy:mystique"]
compare = [["{k}:policy:mystique", "{k}:cubic"]]
[[clients]]
name = "c1"
delay_ms = 20
link = {{ mbps = 24 }}
file_bytes = 1000
[[clients]]
name = "c2"
delay_ms = 20
link = {{ mbps = 24 }}
file_bytes = 1000
"""
TIMEOUT = "curl: (28) Operation timed out after 60000 milliseconds with 10 out of 1000 bytes received"


def mix_rows(kind="kernel"):
    """Means over the cells: cubic (11 + 30) / 2 = 20.5, bbr (40 + 10) / 2 = 25 (its timeout
    counts as 60 s), the policy (11 + 12) / 2 = 11.5; the oracle (cubic in c1, bbr in c2) 10.5."""
    C, B, P = f"{kind}:cubic", f"{kind}:bbr", f"{kind}:policy:mystique"
    return [
        row("c1", C, 10), row("c1", C, 12, rep=2),
        row("c1", B, 20), row("c1", B, None, rep=2, error=TIMEOUT),
        row("c1", P, 10, algorithms=["cubic"]), row("c1", P, 12, rep=2, algorithms=["cubic"]),
        row("c2", C, 30), row("c2", C, 30, rep=2),
        row("c2", B, 10), row("c2", B, 10, rep=2),
        row("c2", P, 12, algorithms=["cubic", "bbr"]), row("c2", P, 12, rep=2, algorithms=["cubic", "bbr"]),
    ]


def test_mix_page_has_the_tables_and_mystiques_figure_beside_ours(tmp_path):
    run = write_run(tmp_path / "mix-run", MIX.format(k="kernel"), mix_rows())
    path, figures = report.write_report([run], str(tmp_path / "out"))
    page = open(path).read()
    assert "## 1. mix (" in page and "> a two-cell mix" in page
    assert "12 transfers read from `transfers.jsonl` (2 repetitions, 3 schemes, 2 cells" in page
    assert "**1 failed**" in page
    # the TCT table: Student-t 95% interval of 10 and 12 is 11 +- 12.706; the timeout is counted
    assert "| c1 | kernel:cubic | 2 | 11.000 | 11.000 | [-1.706, 23.706] | 0 | 0 | – | ok |" in page
    assert ("| c1 | kernel:bbr | 1 | 20.000 | 20.000 | [20.000, 20.000] | 1 | 0 | – | 1 of 2 failed: "
            "curl: (28) Operation timed out") in page
    assert "| c2 | kernel:policy:mystique | 2 | 12.000 | 12.000 | [12.000, 12.000] | 0 | 0 | bbr 2 | ok |" in page
    # the scenario's compared pair, paired by repetition
    # two pairs: the ratio, no interval and no verdict; in c1 the policy ran only cubic
    assert "| c2 | kernel:policy:mystique / kernel:cubic | 0.400 | – | 2 | too few pairs |" in page
    assert ("| c1 | kernel:policy:mystique / kernel:cubic | 1.000 | – | 2 | ran only cubic, as kernel:cubic "
            "does |") in page
    # handover.mix's figures and the published one
    assert "| kernel:bbr | 25.00 | 1 |" in page and "| per-cell oracle | 10.50 |  |" in page
    reduction = ((1 - 11.5 / 20.5) + (1 - 11.5 / 25)) / 2
    assert f"{100 * reduction:.1f}%" == "49.0%"
    assert ("- **kernel:policy:mystique**: mean TCT 11.50 s; it cuts the mean TCT of the 2 fixed algorithms by "
            "49.0% on average, against Mystique's 18.13%: 30.8 percentage points above the published figure") in page
    assert ("it is not judged against the best single fixed algorithm, kernel:cubic (20.50 s) (43.9% faster): "
            "n = 4: too few for an interval; it is 9.5% above the per-cell oracle (10.50 s; within 5%, ratio 1.05: "
            "n = 4: too few for an interval).") in page
    assert "| c2@1000 | kernel:bbr 10.00 s | cubic>bbr x2: 12.00 s |" in page
    # no event slices: one line instead of the flows' figures
    assert ("No flow event slices in this run directory (transfers.jsonl; its rows name no event slice): "
            "throughput over time is not drawn.") in page
    assert figures == ["1-mix-tct-cdf.png"] and "![TCT CDFs](1-mix-tct-cdf.png)" in page
    # the failed transfer is written in its cell's panel, and keeps bbr's CDF below 1
    run_ = report.load_run(run)
    assert report.plot_cdfs(str(tmp_path / "cdf.png"), run_) == {"c1": ["kernel:bbr: 1 failed"]}
    assert_small_pngs(tmp_path / "out", figures)
    assert "Grid" not in page


def test_a_losing_policy_is_said_to_lose(tmp_path):
    rows = [dict(r, tct_s=r["tct_s"] * 3) if r["scheme"] == "kernel:policy:mystique" else r for r in mix_rows()]
    run = write_run(tmp_path / "run", MIX.format(k="kernel"), rows)
    page = open(report.write_report([run], str(tmp_path / "out"))[0]).read()
    # the policy at 34.5 s: 68.3% slower than cubic, 228.6% above the oracle, 34.6 points short
    assert ("it is not judged against the best single fixed algorithm, kernel:cubic (20.50 s) (68.3% slower): "
            "n = 4: too few for an interval; it is 228.6% above the per-cell oracle (10.50 s;") in page
    reduction = ((1 - 34.5 / 20.5) + (1 - 34.5 / 25)) / 2
    assert f"by {100 * reduction:.1f}% on average, against Mystique's 18.13%: " \
           f"{abs(100 * (reduction - 0.1813)):.1f} percentage points below the published figure" in page


def test_mix_verdicts_from_five_repetitions_on(tmp_path):
    """The losing policy with five repetitions per cell: now the intervals settle the verdicts."""
    rows = []
    for rep in range(1, 6):
        w = 1 + 0.02 * rep
        for r in mix_rows():
            if r["repetition"] == 1 and r["tct_s"] is not None:
                t = r["tct_s"] * (3 if r["scheme"] == "kernel:policy:mystique" else 1) * w
                rows.append(dict(r, repetition=rep, tct_s=t))
    run = write_run(tmp_path / "run", MIX.format(k="kernel"), rows)
    page = open(report.write_report([run], str(tmp_path / "out"))[0]).read()
    assert ("it loses to the best single fixed algorithm, kernel:bbr (15.90 s): 120.0% slower; worse (ratio 2.20 "
            "[1.73, 2.90], n = 10)") in page
    assert "a cut of at least 18%, ratio 0.82: worse than ratio 0.82 (ratio 1.89 [1.83, 1.95], n = 10)" in page
    assert "(10.60 s; within 5%, ratio 1.05: worse than ratio 1.05 (ratio 3.30 [3.12, 3.48], n = 10))." in page


def test_a_stored_run_with_old_names_and_only_parquet(tmp_path):
    """experiments/measured keeps transfers.parquet only, and old runs say ccswitch:/switches."""
    rows = [dict(r, switches=r.pop("handover_events")) if "handover_events" in r else r for r in mix_rows("ccswitch")]
    run = write_run(tmp_path / "old", MIX.format(k="ccswitch"), rows, parquet_only=True)
    page = open(report.write_report([run], str(tmp_path / "out"))[0]).read()
    assert "12 transfers read from `transfers.parquet`" in page
    assert "| c1 | kernel:cubic | 2 | 11.000 |" in page and "ccswitch:" not in page
    assert "- **kernel:policy:mystique**: mean TCT 11.50 s" in page
    assert "No flow event slices in this run directory (transfers.parquet; its rows name no event slice)" in page


# ----------------------------------------------------------------------- MCC's WiFi case

MCC = """
name = "mcc"
timeout_s = 60
analysis = "mcc"
plot_schemes = ["kernel:bbr"]
schemes = ["kernel:bbr", "kernel:westwood", "kernel:policy:mcc-wifi"]
[[clients]]
name = "jittery"
delay_ms = 20
link = { mbps = 24 }
file_bytes = 1000
[[clients]]
name = "wired"
delay_ms = 10
link = { mbps = 24 }
file_bytes = 1000
"""


def mcc_rows():
    """Means over the clients: BBR 2.5 s, Westwood 2.25 s, the policy 2.0 s."""
    return [row("jittery", "kernel:bbr", 3.0), row("wired", "kernel:bbr", 2.0),
            row("jittery", "kernel:westwood", 2.0), row("wired", "kernel:westwood", 2.5),
            row("jittery", "kernel:policy:mcc-wifi", 2.0, algorithms=["bbr", "westwood"]),
            row("wired", "kernel:policy:mcc-wifi", 2.0, algorithms=["bbr"])]


def mcc_rows_5(policy_tct=None):
    """mcc_rows over five repetitions, each a little slower than the one before."""
    return [dict(r, repetition=rep, tct_s=(policy_tct if policy_tct and "policy" in r["scheme"] else r["tct_s"])
                 * (1 + 0.01 * rep)) for rep in range(1, 6) for r in mcc_rows()]


def test_mcc_means_beside_the_published_ones(tmp_path):
    run = write_run(tmp_path / "mcc", MCC, mcc_rows_5())
    page = open(report.write_report([run], str(tmp_path / "out"))[0]).read()
    assert ("MCC published mean TCTs of 2.10 s (its WiFi policy), 2.75 s (BBR) and 2.34 s (Westwood): its policy "
            "23.6% below BBR and 10.3% below Westwood.") in page
    assert "| kernel:bbr | 2.58 | 2.75 | -0.17 | – |" in page
    assert "| kernel:westwood | 2.32 | 2.34 | -0.02 | 10.0% below |" in page
    assert "| kernel:policy:mcc-wifi | 2.06 | 2.10 | -0.04 | 20.0% below |" in page
    assert ("- **kernel:policy:mcc-wifi**: 2.06 s, 20.0% below fixed BBR (2.58 s; MCC's policy: 23.6% below), "
            "11.1% below fixed Westwood (2.32 s; MCC's policy: 10.3% below); it beats every fixed scheme beyond "
            "the noise, as MCC's did (against kernel:bbr: better (ratio 0.80 [0.71, 0.91], n = 10); against "
            "kernel:westwood: better (ratio 0.89 [") in page
    assert "It ran jittery@1000: bbr>westwood x5; wired@1000: bbr x5." in page


def test_mcc_policy_slower_than_westwood_does_not_beat_every_fixed_scheme(tmp_path):
    page = open(report.write_report([write_run(tmp_path / "mcc", MCC, mcc_rows_5(2.6))], str(tmp_path / "out"))[0]).read()
    assert ("- **kernel:policy:mcc-wifi**: 2.68 s, 4.0% above fixed BBR (2.58 s; MCC's policy: 23.6% below), "
            "15.6% above fixed Westwood (2.32 s; MCC's policy: 10.3% below); it does not beat every fixed scheme "
            "(one is faster beyond the noise), which MCC's did (against kernel:bbr: no difference (ratio 1.04 [") in page


def test_mcc_one_repetition_gives_no_verdict(tmp_path):
    page = open(report.write_report([write_run(tmp_path / "mcc", MCC, mcc_rows())], str(tmp_path / "out"))[0]).read()
    assert ("it is not shown to beat every fixed scheme, which MCC's did (against kernel:bbr: n = 2: too few for "
            "an interval; against kernel:westwood: n = 2: too few for an interval).") in page


# ----------------------------------------------------------------------- MCC Fig. 5 and flows


def test_smoothness_and_flows_with_handovers(tmp_path):
    run_dir = tmp_path / "smooth"
    run_dir.mkdir()
    smooth_run(run_dir)  # the known dip of test_handover_analysis: 75% after cubic->bbr, 100% after ->westwood
    path, figures = report.write_report([str(run_dir)], str(tmp_path / "out"))
    page = open(path).read()
    assert "### Against MCC Fig. 5 (smoothness of a handover)" in page
    assert "| 1 | kernel:policy:policies/cubic-bbr-westwood.toml | cubic->bbr | 10.00 | 1.50 | 2.00 | 75% | 1 | no | no |" \
        not in page  # a policy file is named by its stem
    assert "| 1 | kernel:policy:cubic-bbr-westwood | cubic->bbr | 10.00 | 1.50 | 2.00 | 75% | 1 | no | no |" in page
    assert "| 1 | kernel:policy:cubic-bbr-westwood | bbr->westwood | 20.00 | 1.00 | 1.00 | 100% | 0 | yes | yes |" in page
    assert ("2 of 4 handovers reach 80% of the new algorithm's steady state (target missed); the lowest is 75% "
            "(kernel:policy:cubic-bbr-westwood cubic->bbr at 10.0 s); 2 stalled 500 ms bins, 2 bursts.") in page
    assert figures == ["1-smooth-tct-cdf.png", "1-smooth-flows-kernel_policy_cubic-bbr-westwood.png",
                       "1-smooth-flows-ovs_policy_cubic-bbr-westwood.png"]
    assert "![throughput over time, kernel:policy:cubic-bbr-westwood](1-smooth-flows-kernel_policy_cubic-bbr-westwood.png)" in page
    assert "No flow event slices" not in page
    assert_small_pngs(tmp_path / "out", figures)


def test_flows_pick_one_transfer_per_client_first_repetition_largest_file(tmp_path):
    run_dir = tmp_path / "smooth"
    run_dir.mkdir()
    rows = smooth_run(run_dir)
    extra = [dict(rows[0], repetition=2, transfer=5), dict(rows[0], repetition=1, file_bytes=10, transfer=6)]
    with open(run_dir / "transfers.jsonl", "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in extra))
    run = report.load_run(str(run_dir))
    assert [(n, r["repetition"], r["file_bytes"]) for n, r in report.flow_rows(run, rows[0]["scheme"])] == \
        [(1, 1, 5_000_000)]


def test_missing_event_slices_are_said_missing(tmp_path):
    run_dir = tmp_path / "smooth"
    run_dir.mkdir()
    smooth_run(run_dir)
    for name in os.listdir(run_dir / "flows"):
        os.unlink(run_dir / "flows" / name)
    page = open(report.write_report([str(run_dir)], str(tmp_path / "out"))[0]).read()
    assert "No flow event slices in this run directory (transfers.jsonl; the event slices its rows name are missing)" in page
    assert "Not evaluated: the policy transfers of this run directory have no flow event slices." in page


# ----------------------------------------------------------------------- grid and the seeds' observations

GRID = """
name = "small-grid"
timeout_s = 60
schemes = ["native:cubic", "kernel:bbr", "kernel:hybla", "kernel:illinois"]
[[clients]]
name = "rtt50-loss0"
delay_ms = 25
link = { mbps = 24 }
file_bytes = 1000
[[clients]]
name = "rtt50-loss1"
delay_ms = 25
loss_downlink = 0.01
link = { mbps = 24 }
file_bytes = 1000
[[clients]]
name = "rtt150-loss0"
delay_ms = 75
link = { mbps = 24 }
file_bytes = 1000
[[clients]]
name = "rtt150-loss1"
delay_ms = 75
loss_downlink = 0.01
link = { mbps = 24 }
file_bytes = 1000
"""

#: median TCT per cell: cubic, bbr, hybla, illinois
GRID_TCTS = {
    "rtt50-loss0": (1.0, 1.1, 0.9, 1.2),    # hybla (a short clean path: no observation)
    "rtt150-loss0": (2.0, 1.8, 1.5, 2.2),   # hybla, 1/6 less time than bbr: Observation 1 agrees
    "rtt50-loss1": (3.0, 1.6, 2.5, 2.0),    # bbr; illinois 25% longer: Observation 3 does not reproduce
    "rtt150-loss1": (6.0, 2.0, 5.0, 1.5),   # illinois; bbr 33% longer: Observation 2 only partly
}


def grid_rows(repetitions=5):
    """Each cell's TCTs around GRID_TCTS (the median exact), one shift per repetition shared by
    the schemes, so the paired ratios are steady."""
    schemes = ["native:cubic", "kernel:bbr", "kernel:hybla", "kernel:illinois"]
    shifts = [-0.1, 0.0, 0.1, -0.05, 0.05][:repetitions]
    out = []
    for client, tcts in GRID_TCTS.items():
        for s, t in zip(schemes, tcts):
            out += [row(client, s, t + d, rep=i) for i, d in enumerate(shifts, 1)]
    return out


def test_grid_gets_table_heat_map_and_the_observations(tmp_path):
    run = write_run(tmp_path / "grid", GRID, grid_rows())
    path, figures = report.write_report([run], str(tmp_path / "out"))
    page = open(path).read()
    assert "### Grid: best algorithm per cell" in page
    assert "| rtt150-loss1 | 150 ms | 1 % | 6.00 | 2.00 | 5.00 | **1.50** | illinois | 25 % |" in page
    assert "![best algorithm per cell](1-small-grid-grid.png)" in page
    assert ("- **Observation 1 (Hybla is strong on clean long paths)**: agrees: hybla is fastest in 1 of 1 of the "
            "clean cells with RTT above 50 ms (by median; beyond the noise faster in 1, slower in 0).") in page
    assert ("  - rtt150-loss0 (150 ms, 0% loss): hybla 1.50 s fastest, 17% less time than the best other "
            "(bbr 1.80 s); better (ratio 0.83 [") in page
    assert ("- **Observation 2 (the BBR family is best under loss)**: reproduces only partly: bbr/mystique-bbr is "
            "fastest in 1 of 2 of the lossy cells (by median; beyond the noise faster in 1, slower in 1).") in page
    assert ("  - rtt150-loss1 (150 ms, 1% loss): illinois 1.50 s fastest; the best of the claim, bbr 2.00 s, "
            "takes 33% longer; worse (ratio 1.33 [") in page
    assert ("- **Observation 3 (Illinois is best at short RTT with loss)**: does not reproduce: illinois is "
            "fastest in 0 of 1 of the lossy cells with RTT <= 50 ms (by median; beyond the noise faster in 0, "
            "slower in 1).") in page
    assert ("  - rtt50-loss1 (50 ms, 1% loss): bbr 1.60 s fastest; the best of the claim, illinois 2.00 s, takes 25% "
            "longer; worse (ratio 1.25 [") in page
    assert "The scenario has no policy scheme and no `plot_schemes`: no flow drawn." in page
    assert figures == ["1-small-grid-tct-cdf.png", "1-small-grid-grid.png"]
    assert_small_pngs(tmp_path / "out", figures)


def test_three_repetitions_of_a_grid_judge_no_observation(tmp_path):
    run = write_run(tmp_path / "grid", GRID, grid_rows(repetitions=3))
    page = open(report.write_report([run], str(tmp_path / "out"))[0]).read()
    assert ("- **Observation 1 (Hybla is strong on clean long paths)**: undecided: hybla is fastest in 1 of 1 of "
            "the clean cells with RTT above 50 ms (by median; beyond the noise faster in 0, slower in 0).") in page
    assert ("  - rtt150-loss0 (150 ms, 0% loss): hybla 1.50 s fastest, 17% less time than the best other "
            "(bbr 1.80 s); n = 3: too few for an interval.") in page


def test_an_interrupted_grid_says_which_cells_miss_schemes(tmp_path):
    rows = [r for r in grid_rows() if not (r["client"] == "rtt150-loss0" and r["scheme"] == "kernel:bbr")]
    page = open(report.write_report([write_run(tmp_path / "grid", GRID, rows)], str(tmp_path / "out"))[0]).read()
    assert ("  - rtt150-loss0 (150 ms, 0% loss; only 3 of 4 fixed schemes have results): hybla 1.50 s fastest, 25% "
            "less time than the best other (cubic (native) 2.00 s); better (ratio 0.75 [") in page


def test_which_scenarios_are_grids(tmp_path):
    from ccswitch.experiments.scenario import loads_scenario

    assert report.is_grid(loads_scenario(GRID, check_files=False))
    assert not report.is_grid(loads_scenario(MIX.format(k="kernel"), check_files=False))
    # three of the four corners of the product: not a grid, unless it is the grid scenario
    partial = GRID[:GRID.index('[[clients]]\nname = "rtt150-loss1"')]
    assert not report.is_grid(loads_scenario(partial, check_files=False))
    assert report.is_grid(loads_scenario(partial.replace("small-grid", "algorithms-grid"), check_files=False))


# ----------------------------------------------------------------------- several runs, the command line


def test_several_runs_on_one_page(tmp_path):
    a = write_run(tmp_path / "mix", MIX.format(k="kernel"), mix_rows())
    b = write_run(tmp_path / "mcc", MCC, mcc_rows())
    path, figures = report.write_report([a, b], str(tmp_path / "out"))
    page = open(path).read()
    assert page.index("## 1. mix (") < page.index("## 2. mcc (")
    assert "### Against Mystique Fig. 8 (mix)" in page and "### Against MCC's WiFi case" in page
    assert figures == ["1-mix-tct-cdf.png", "2-mcc-tct-cdf.png"]


def test_cli_writes_into_the_first_run_by_default(tmp_path, capsys):
    run = write_run(tmp_path / "mix", MIX.format(k="kernel"), mix_rows())
    assert cli.main(["report", run]) == 0
    assert os.path.exists(os.path.join(run, "report", "report.md"))
    assert os.path.exists(os.path.join(run, "report", "1-mix-tct-cdf.png"))
    assert "report.md" in capsys.readouterr().out


def test_not_a_run_directory(tmp_path, capsys):
    with pytest.raises(RunDirectoryError, match="not a run directory \\(no scenario.toml\\)"):
        report.write_report([str(tmp_path)], str(tmp_path / "out"))
    (tmp_path / "scenario.toml").write_text(MIX.format(k="kernel"))
    with pytest.raises(RunDirectoryError, match="no transfers.jsonl or transfers.parquet"):
        report.write_report([str(tmp_path)], str(tmp_path / "out"))
    with pytest.raises(SystemExit) as e:
        cli.main(["report", str(tmp_path / "absent")])
    assert e.value.code == 2
    assert "absent: not a directory" in capsys.readouterr().err


def test_close_handovers_share_one_label_in_a_small_panel():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from ccswitch.analysis.plots import Series, mark_handovers

    s = Series(t=[0.5 * i for i in range(21)], cwnd=[0] * 21, inflight=[0] * 21, acked=[1000] * 21,
               delivery_bps=[0.0] * 21,
               handovers=[{"t": 1.0, "to": "bbr"}, {"t": 1.2, "to": "westwood"}, {"t": 6.0, "to": "cubic"}])
    fig, ax = plt.subplots()
    mark_handovers(s, None, ax, inside=True)
    assert [(t.get_position()[0], t.get_text()) for t in ax.texts] == [(1.0, "bbr>westwood"), (6.0, "cubic")]
    assert len(ax.lines) == 3  # still one line per handover
    plt.close(fig)


def test_the_report_judges_a_run_by_a_named_objective(tmp_path):
    run = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "measured", "step-path-2026-11-25")
    path, _ = report.write_report([run], str(tmp_path), ["power"])
    page = open(path).read()
    section = page.split("### Objective `power`", 1)[1].split("###", 1)[0]
    # BBR keeps its rate after the step to 2% loss: the least delay per throughput of the fixed schemes
    assert "| loss-at-5s | kernel:bbr | 5 |" in section
    assert [line for line in section.splitlines() if "best fixed" in line and "|" in line][0].startswith(
        "| loss-at-5s | kernel:bbr |")
