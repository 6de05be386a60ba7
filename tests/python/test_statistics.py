import json
import math

import pytest

from ccswitch.experiments import statistics as stats


def test_t_quantiles():
    # published two-sided 95% quantiles
    assert stats.t975(1) == pytest.approx(12.706, abs=1e-3)
    assert stats.t975(4) == pytest.approx(2.776, abs=1e-3)
    assert stats.t975(30) == pytest.approx(2.042, abs=1e-3)
    assert stats.t975(50) == pytest.approx(2.0086, abs=1e-4)
    assert stats.t975(100) == pytest.approx(1.9840, abs=1e-4)
    assert stats.t975(1000) == pytest.approx(1.9623, abs=1e-4)
    assert stats.t975(10**7) == pytest.approx(1.960, abs=1e-3)
    values = [stats.t975(df) for df in range(1, 2000)]
    assert all(a >= b for a, b in zip(values, values[1:]))  # decreasing in df
    assert values[-1] > 1.959964
    with pytest.raises(ValueError):
        stats.t975(0)


def test_mean_ci95():
    mean, lo, hi = stats.mean_ci95([1, 2, 3, 4, 5])
    half = 2.776445 * math.sqrt(2.5) / math.sqrt(5)
    assert mean == 3
    assert (lo, hi) == (pytest.approx(3 - half), pytest.approx(3 + half))
    assert stats.mean_ci95([4.2]) == (4.2, 4.2, 4.2)
    assert stats.mean_ci95([2.0, 2.0, 2.0]) == (2.0, 2.0, 2.0)
    with pytest.raises(ValueError):
        stats.mean_ci95([])


def test_median():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5


def row(client, scheme, tct, *, ok=True, error=None):
    return {"client": client, "scheme": scheme, "tct_s": tct, "sha256_ok": ok, "error": error}


def test_summarize_counts_and_excludes_failures():
    rows = [row("a", "native:cubic", 1.0), row("a", "native:cubic", 3.0),
            row("a", "native:cubic", 100.0, ok=False),
            row("a", "native:cubic", None, ok=False, error="timeout"),
            row("a", "kernel:reno", None, ok=False, error="exit 7"),
            row("b", "native:cubic", 2.0)]
    s = stats.summarize(rows)
    assert [(r["client"], r["scheme"]) for r in s] == [("a", "native:cubic"), ("a", "kernel:reno"), ("b", "native:cubic")]
    a = s[0]
    assert a["n"] == 2 and a["tct_median_s"] == 2.0 and a["tct_mean_s"] == 2.0
    assert a["integrity_failures"] == 1 and a["errors"] == 1 and a["attempts"] == 4
    assert a["ci95"][0] == pytest.approx(2 - 12.7062 * 1.0)
    assert s[1]["n"] == 0 and s[1]["tct_median_s"] is None and s[1]["ci95"] is None
    assert s[2]["ci95"] == [2.0, 2.0]


def test_json_schema_of_summary():
    s = stats.summarize([row("a", "native:cubic", 1.5), row("a", "native:cubic", 1.7),
                         row("a", "native:bbr", None, ok=False, error="x")])
    doc = json.loads(json.dumps({"rows": stats.json_rows(s)}, allow_nan=False))
    assert list(doc) == ["rows"]
    for r in doc["rows"]:
        assert list(r) == ["client", "scheme", "n", "tct_median_s", "tct_mean_s", "ci95", "integrity_failures"]
        assert isinstance(r["client"], str) and isinstance(r["scheme"], str)
        assert isinstance(r["n"], int) and isinstance(r["integrity_failures"], int)
        if r["n"]:
            assert isinstance(r["tct_median_s"], float) and isinstance(r["tct_mean_s"], float)
            assert len(r["ci95"]) == 2 and r["ci95"][0] <= r["tct_mean_s"] <= r["ci95"][1]


def test_format_table():
    text = stats.format_table(stats.summarize([row("a", "native:cubic", 1.5), row("b", "x:y", None, ok=False, error="e")]))
    lines = text.splitlines()
    assert lines[0].startswith("client") and "native:cubic" in lines[2] and "1.500" in lines[2]
    assert lines[3].split()[2] == "0"


def test_cells_say_whether_they_failed_and_how_often_python_raised():
    rows = [row("a", "native:cubic", 1.5),
            dict(row("a", "kernel:py:m:Raises", 1.6), on_report_errors=40),
            dict(row("a", "kernel:py:m:Raises", 1.7), on_report_errors=33, python_timeouts=1, python_bad_values=0),
            dict(row("a", "kernel:py:m:Die", None, ok=False, error="ccswitch-agent exited with killed by SIGKILL"),
                 on_report_errors=0),
            dict(row("a", "kernel:py:m:Die", None, ok=False,
                     error="not run: kernel:py:m:Die failed earlier: ccswitch-agent exited with killed by SIGKILL"),
                 on_report_errors=None),
            row("a", "native:bbr", None, ok=False, error="curl: (28) Operation timed out after 1000 milliseconds " + "x" * 200),
            row("a", "native:bbr", 2.0)]
    s = {r["scheme"]: r for r in stats.summarize(rows)}
    assert s["native:cubic"]["status"] == "ok" and s["native:cubic"]["on_report_errors"] is None
    assert s["kernel:py:m:Raises"]["on_report_errors"] == 73
    assert s["kernel:py:m:Raises"]["status"] == "ok (73 on_report errors, 1 python timeout)"
    assert (s["kernel:py:m:Raises"]["python_timeouts"], s["kernel:py:m:Raises"]["python_skipped"]) == (1, None)
    assert s["kernel:py:m:Die"]["status"] == "all 2 failed: ccswitch-agent exited with killed by SIGKILL"
    bbr = s["native:bbr"]["status"]
    assert bbr.startswith("1 of 2 failed: curl: (28) Operation timed out after 1000 milliseconds")
    assert len(bbr) <= len("1 of 2 failed: ") + stats.STATUS_ERROR_CHARS and bbr.endswith("…")
    table = stats.format_table(list(s.values()))
    assert table.splitlines()[0].split()[-1] == "status"
    die = next(l for l in table.splitlines() if "kernel:py:m:Die" in l)
    assert die.endswith("all 2 failed: ccswitch-agent exited with killed by SIGKILL")
    assert next(l for l in table.splitlines() if "Raises" in l).endswith("ok (73 on_report errors, 1 python timeout)")


def test_policy_cells_say_which_algorithm_their_transfers_ended_on():
    rows = [
        {"client": "c", "scheme": "kernel:policy:m.toml", "tct_s": 1.0, "sha256_ok": True, "error": None,
         "algorithms": ["bbr", "hybla"]},
        {"client": "c", "scheme": "kernel:policy:m.toml", "tct_s": 1.2, "sha256_ok": True, "error": None,
         "algorithms": ["bbr"]},
        {"client": "c", "scheme": "kernel:policy:m.toml", "tct_s": 1.1, "sha256_ok": True, "error": None,
         "algorithms": ["bbr", "hybla"]},
        {"client": "c", "scheme": "kernel:bbr", "tct_s": 0.9, "sha256_ok": True, "error": None,
         "algorithms": ["bbr"]},
        {"client": "c", "scheme": "native:cubic", "tct_s": 1.5, "sha256_ok": True, "error": None},
    ]
    summary = stats.summarize(rows)
    assert summary[0]["ended_on"] == {"hybla": 2, "bbr": 1}
    assert summary[2]["ended_on"] is None
    table = stats.format_table(summary).splitlines()
    assert "ended on" in table[0] and table[0].index("ended on") < table[0].index("status")
    assert "hybla 2, bbr 1" in table[2]
    # a fixed scheme's single algorithm is no news: no figure in its column
    assert "bbr 1" not in table[3]


def test_runs_without_a_policy_keep_the_plain_table():
    rows = [{"client": "c", "scheme": "kernel:bbr", "tct_s": 0.9, "sha256_ok": True, "error": None,
             "algorithms": ["bbr"]}]
    assert "ended on" not in stats.format_table(stats.summarize(rows))


# ------------------------------------------------------------------ ratios of means

def test_default_pairs_compare_each_agent_scheme_with_its_native_algorithm():
    schemes = ["native:bbr", "kernel:bbr", "kernel:bbr:pace=0", "ovs:bbr", "ovs:reno", "kernel:policy:p.toml",
               "ovs:policy:mystique", "kernel:py:m:C", "native:cubic", "ovs:cubic", "kernel:vegas"]
    assert stats.default_pairs(schemes) == [("kernel:bbr", "native:bbr"), ("kernel:bbr:pace=0", "native:bbr"),
                                            ("ovs:bbr", "native:bbr"), ("ovs:cubic", "native:cubic")]
    assert stats.default_pairs(["kernel:bbr", "ovs:bbr"]) == []


def test_ratio_ci95_on_paired_data():
    import random

    rnd = random.Random(1)
    b = [3.0 + rnd.random() for _ in range(10)]
    a = [1.1 * x * (1 + rnd.gauss(0, 0.01)) for x in b]
    ratio, lo, hi = stats.ratio_ci95(a, b)
    assert ratio == pytest.approx(1.1, abs=0.01)
    assert lo < ratio < hi and lo <= 1.1 <= hi and hi - lo < 0.05
    assert stats.ratio_ci95(a, b) == (ratio, lo, hi)  # fixed seed: the same interval every time
    assert stats.ratio_ci95([2.2], [2.0]) == (pytest.approx(1.1),) * 3
    r2 = stats.ratio_ci95([2.2, 4.4], [2.0, 4.0])  # few pairs: a degenerate interval, no crash
    assert r2[0] == pytest.approx(1.1) and r2[1] <= r2[0] <= r2[2]
    r3 = stats.ratio_ci95([1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    assert r3 == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        stats.ratio_ci95([1.0], [])


def trow(client, scheme, rep, tct, *, size=1000, ok=True, error=None):
    return {"client": client, "scheme": scheme, "repetition": rep, "file_bytes": size, "tct_s": tct,
            "sha256_ok": ok, "error": error}


def test_ratio_rows_pair_by_repetition_and_drop_the_unpaired():
    rows = [trow("c", "native:bbr", 1, 2.0), trow("c", "ovs:bbr", 1, 2.2),
            trow("c", "native:bbr", 2, 4.0), trow("c", "ovs:bbr", 2, None, error="curl: (28) timed out"),
            trow("c", "native:bbr", 3, 3.0), trow("c", "ovs:bbr", 3, 3.3),
            trow("c", "ovs:bbr", 4, 9.9),  # native:bbr has no repetition 4
            trow("d", "native:bbr", 1, 5.0), trow("d", "ovs:bbr", 1, 6.0, ok=False),
            trow("e", "native:bbr", 1, 1.0)]  # ovs:bbr never ran there: no row
    out = stats.ratio_rows(rows, [("ovs:bbr", "native:bbr")])
    assert [(r["client"], r["n_pairs"]) for r in out] == [("c", 2), ("d", 0)]
    c = out[0]
    assert (c["a"], c["b"], c["file_bytes"]) == ("ovs:bbr", "native:bbr", 1000)
    assert c["ratio"] == pytest.approx(5.5 / 5.0)
    # two pairs: no interval, no verdict
    assert c["lo"] is None and c["hi"] is None
    assert c["verdict"]["kind"] == "too few" and c["verdict"]["text"] == "n = 2: too few for an interval"
    assert out[1]["ratio"] is None and out[1]["lo"] is None and out[1]["verdict"]["text"].startswith("n = 0")
    one = stats.ratio_rows(rows[:2], [("ovs:bbr", "native:bbr")])[0]
    assert one["n_pairs"] == 1 and one["ratio"] == pytest.approx(1.1) and one["lo"] is None
    json.dumps(out, allow_nan=False)


def test_ratio_rows_give_an_interval_and_a_verdict_from_five_pairs():
    tcts = [2.0, 2.4, 1.9, 2.2, 2.1, 2.6]
    rows = [trow("c", "native:bbr", i, t) for i, t in enumerate(tcts, 1)]
    rows += [trow("c", "ovs:bbr", i, 1.1 * t) for i, t in enumerate(tcts, 1)]
    r = stats.ratio_rows(rows, [("ovs:bbr", "native:bbr")])[0]
    assert r["n_pairs"] == 6 and r["lo"] <= r["ratio"] <= r["hi"]
    assert r["verdict"]["kind"] == "worse" and r["verdict"]["text"].startswith("worse (ratio 1.10 [1.10, 1.10], n = 6")


def test_compare_calls_a_win_only_when_the_interval_excludes_one():
    base = [2.0, 2.4, 1.9, 2.2, 2.1, 2.6, 2.3, 2.0, 1.8, 2.5]
    faster = stats.compare([0.8 * x for x in base], base)
    assert faster.kind == "better" and faster.interval[1] < 1 and faster.n == 10
    assert stats.compare(base, [0.8 * x for x in base]).kind == "worse"
    assert stats.compare(base, [0.8 * x for x in base], lower_is_better=False).kind == "better"
    # one outlier of B makes A's mean lower, but its interval covers 1: no verdict of a win
    b = list(base)
    b[3] = 5.25
    noisy = stats.compare(base, b)
    assert noisy.ratio < 0.9 and noisy.interval[0] < 1 <= noisy.interval[1]
    assert noisy.kind == "no difference"
    assert noisy.text == f"no difference (ratio {noisy.ratio:.2f} [{noisy.interval[0]:.2f}, {noisy.interval[1]:.2f}], n = 10)"
    # identical pairs: an interval of width 0 at 1 is no difference, not a win by rounding
    assert stats.compare(base, base).kind == "no difference"


def test_compare_gives_no_interval_below_five_pairs():
    v = stats.compare([1.0, 1.1], [3.0, 3.3])
    assert (v.kind, v.text, v.interval, v.n) == ("too few", "n = 2: too few for an interval", None, 2)
    assert v.ratio == pytest.approx(1 / 3) and not v.decided
    assert stats.compare([], []).text == "n = 0: too few for an interval"
    with pytest.raises(ValueError, match="equally long, got 2 and 1"):
        stats.compare([1.0, 2.0], [1.0])


def test_compare_within_a_tolerance_band_and_against_another_reference():
    base = [2.0, 2.4, 1.9, 2.2, 2.1, 2.6, 2.3, 2.0]
    assert stats.compare([1.01 * x for x in base], base, tolerance=0.05).text.startswith("within 5% (ratio 1.01")
    assert stats.compare([1.2 * x for x in base], base, tolerance=0.05).kind == "not within"
    wobbly = [x * f for x, f in zip(base, [1.0, 1.1, 0.98, 1.09, 1.0, 1.12, 0.99, 1.08])]
    assert stats.compare(wobbly, base, tolerance=0.05).kind == "undecided"
    # "cuts the mean by at least 18%": better than ratio 0.82
    assert stats.compare([0.7 * x for x in base], base, reference=0.82).text.startswith("better than ratio 0.82")
    assert stats.compare([0.9 * x for x in base], base, reference=0.82).kind == "worse"
    # unpaired samples of different lengths
    assert stats.compare([0.5 * x for x in base], base[:6], paired=False).kind == "better"


def test_a_policy_that_ran_only_the_compared_algorithm_is_flagged_never_a_win():
    fixed = [2.0, 2.1, 1.9, 2.2, 5.25, 2.0]
    rows = [trow("c", "kernel:bbr", i, t) for i, t in enumerate(fixed, 1)]
    policy = "kernel:policy:../learner/models/paths-v2.policy.toml"
    rows += [dict(trow("c", policy, i, 1.5), algorithms=["bbr"]) for i in range(1, 7)]
    r = stats.ratio_rows(rows, [(policy, "kernel:bbr")])[0]
    assert r["verdict"]["kind"] == "ran only" and r["verdict"]["text"] == "ran only bbr, as kernel:bbr does"
    assert r["lo"] is not None  # the interval of the figures is still shown
    assert "kernel:policy:paths-v2 / kernel:bbr" in stats.format_ratio_table([r])
    # one transfer that handed over to another algorithm: compared as usual
    rows[-1]["algorithms"] = ["bbr", "cubic"]
    assert stats.ratio_rows(rows, [(policy, "kernel:bbr")])[0]["verdict"]["kind"] != "ran only"
    assert stats.ran_only_text([dict(trow("c", policy, 1, 1.0), algorithms=["bbr"])], "kernel:cubic") is None
    assert stats.ran_only_text([trow("c", policy, 1, 1.0)], "kernel:bbr") is None  # no algorithms known


def test_ratio_table_text():
    rows = [trow("c@1000", "native:bbr", 1, 2.0), trow("c@1000", "kernel:bbr", 1, 2.2),
            trow("c@1000", "native:bbr", 2, 4.0), trow("c@1000", "kernel:bbr", 2, 4.4),
            trow("d", "native:bbr", 1, 2.0), trow("d", "kernel:bbr", 1, 2.0, error="e")]
    text = stats.format_ratio_table(stats.ratio_rows(rows, stats.default_pairs(["native:bbr", "kernel:bbr"])))
    lines = text.splitlines()
    assert lines[0].startswith("ratio of mean TCT, A / B")
    assert lines[1].split() == ["client", "A", "/", "B", "ratio", "95%", "CI", "(bootstrap)", "n", "verdict"]
    assert lines[3].split() == ["c@1000", "kernel:bbr", "/", "native:bbr", "1.100", "-", "2", "too", "few", "pairs"]
    assert lines[4].split() == ["d", "kernel:bbr", "/", "native:bbr", "-", "-", "0", "too", "few", "pairs"]
    assert stats.format_ratio_table([]) == ""


def test_two_runs_compare_cell_for_cell_and_say_whether_their_intervals_overlap():
    from ccswitch.experiments import statistics as st

    a = [{"client": "c", "scheme": "x", "n": 3, "tct_median_s": 2.0, "ci95": [1.8, 2.2]},
         {"client": "c", "scheme": "y", "n": 3, "tct_median_s": 4.0, "ci95": [3.9, 4.1]},
         {"client": "c", "scheme": "only-a", "n": 1, "tct_median_s": 1.0, "ci95": [1.0, 1.0]}]
    b = [{"client": "c", "scheme": "y", "n": 3, "tct_median_s": 5.0, "ci95": [4.5, 5.5]},
         {"client": "c", "scheme": "x", "n": 2, "tct_median_s": 2.1, "ci95": [2.15, 2.3]}]
    rows = st.compare_summaries(a, b)
    assert [(r["scheme"], r["agree"]) for r in rows] == [("x", True), ("y", False), ("only-a", None)]
    assert abs(rows[0]["diff"] - 0.05) < 1e-12 and abs(rows[1]["diff"] - 0.25) < 1e-12
    text = st.format_comparison(rows)
    assert "DISJOINT" in text and text.endswith("1 of 2 cells: the 95% intervals of the mean overlap")


def test_a_policy_scheme_is_shown_by_its_policys_name(tmp_path):
    from ccswitch.experiments.scenario import display_label

    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "x.policy.toml").write_text('name = "learned-7"\ninitial = "bbr"\n')
    (tmp_path / "m" / "nameless.toml").write_text('initial = "bbr"\n')
    assert display_label("kernel:policy:m/x.policy.toml", str(tmp_path)) == "kernel:policy:learned-7"
    assert display_label(f"ovs:policy:{tmp_path}/m/x.policy.toml:margin=0.2") == "ovs:policy:learned-7:margin=0.2"
    assert display_label("kernel:policy:m/nameless.toml", str(tmp_path)) == "kernel:policy:nameless"
    # a file that is not here (a stored run's label): its file name without .policy.toml
    assert display_label("kernel:policy:../learner/models/gone.policy.toml") == "kernel:policy:gone"
    # the repository's own model, found from experiments/ as the scenarios there name it
    assert display_label("kernel:policy:../learner/models/paths-v2.policy.toml") == "kernel:policy:paths-v2"
    for same in ("kernel:policy:mystique", "kernel:policy:mystique:margin=0.1", "native:cubic", "kernel:py:m:C"):
        assert display_label(same) == same
