"""The trade-off plots on synthetic rows and files: the one-sigma ellipse against a known
covariance, every figure written, and missing data skipped rather than raised."""

import json
import os
import math

import numpy as np
import pytest

from ccswitch.analysis import tradeoffs

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
POLICY = "kernel:policy:../learner/models/paths-v2.policy.toml"


def points_with_covariance(cov, centre, n=40, seed=3):
    """n points whose sample mean is `centre` and sample covariance exactly `cov`: whitened
    noise, coloured by the Cholesky factor of cov."""
    z = np.random.default_rng(seed).normal(size=(n, 2))
    z -= z.mean(axis=0)
    z = z @ np.linalg.inv(np.linalg.cholesky(np.cov(z.T))).T  # sample covariance now the identity
    x = z @ np.linalg.cholesky(np.asarray(cov)).T + np.asarray(centre)
    return list(x[:, 0]), list(x[:, 1])


def test_the_ellipse_axes_are_those_of_a_known_covariance():
    # eigenvalues 4 and 1, the major axis at 30 degrees
    rot = np.array([[math.cos(math.radians(30)), -math.sin(math.radians(30))],
                    [math.sin(math.radians(30)), math.cos(math.radians(30))]])
    cov = rot @ np.diag([4.0, 1.0]) @ rot.T
    xs, ys = points_with_covariance(cov, (50.0, 10.0))
    e = tradeoffs.sigma_ellipse(xs, ys)
    assert (e.cx, e.cy) == (pytest.approx(50.0), pytest.approx(10.0))
    assert e.width == pytest.approx(2 * 2.0) and e.height == pytest.approx(2 * 1.0)
    assert e.angle_deg % 180 == pytest.approx(30.0)
    assert tradeoffs.sigma_ellipse(xs, ys, n_sigma=2).width == pytest.approx(8.0)
    # an axis-aligned one: x spread 3, y spread 0.5
    xs, ys = points_with_covariance([[9.0, 0.0], [0.0, 0.25]], (0, 0), n=10)
    e = tradeoffs.sigma_ellipse(xs, ys)
    assert (e.width, e.height) == (pytest.approx(6.0), pytest.approx(1.0)) and e.angle_deg % 180 == pytest.approx(0.0)


def test_no_ellipse_below_three_points():
    assert tradeoffs.sigma_ellipse([1.0, 2.0], [3.0, 4.0]) is None
    with pytest.raises(ValueError, match="3 x values but 2 y values"):
        tradeoffs.sigma_ellipse([1.0, 2.0, 3.0], [1.0, 2.0])


def unit(client, scheme, rep, thr, p95, **extra):
    return {"client": client, "scheme": scheme, "repetition": rep, "throughput_mbps": thr, "delay_p95_ms": p95,
            **extra}


def tradeoff_rows():
    rows = []
    for rep in range(1, 6):
        rows += [unit("wired", "kernel:bbr", rep, 20 + rep, 30 + 2 * rep),
                 unit("wired", "native:cubic", rep, 22 - rep % 2, 80 + 5 * rep),
                 unit("lte", "kernel:bbr", rep, 5 + 0.3 * rep, 60 + rep),
                 unit("lte", POLICY, rep, 6 + 0.2 * rep, 70 - rep)]
    rows.append(unit("lte", "ovs:bbr", 1, 4.0, 90.0))  # one point: no ellipse, still drawn
    rows.append(unit("lte", "ovs:bbr", 2, None, None, error="curl: (28)"))  # no figures: left out
    return rows


def write_requests(run_dir, name, requests):
    (run_dir / "workload").mkdir(exist_ok=True)
    path = run_dir / "workload" / name
    path.write_text("".join(json.dumps(q) + "\n" for q in requests))
    return f"workload/{name}"


def workload_rows(run_dir):
    rows = []
    for rep, scheme in enumerate(["kernel:bbr", "native:cubic", "kernel:bbr"], 1):
        reqs = [{"i": i, "t_s": 0.1 * i, "size": size, "fct_s": fct, "ttfb_s": 0.02, "ideal_s": ideal,
                 "slowdown": None if fct is None else fct / ideal, "ok": fct is not None, "error": None,
                 "client_port": 40000 + i}
                for i, (size, fct, ideal) in enumerate([(10_000, 0.05 * rep, 0.04), (500_000, 0.4, 0.25),
                                                        (3_000_000, 1.5 + rep, 1.1), (20_000, None, 0.04)])]
        f = write_requests(run_dir, f"{rep:06d}.jsonl", reqs)
        rows.append({"client": "web", "scheme": scheme, "repetition": rep,
                     "workload": {"kind": "poisson", "load": 0.5, "requests_file": f}})
    # a row whose request file is missing: skipped, not raised
    rows.append({"client": "web", "scheme": "ovs:bbr", "repetition": 1,
                 "workload": {"kind": "poisson", "requests_file": "workload/absent.jsonl"}})
    return rows


def competition_rows(run_dir):
    (run_dir / "probe").mkdir(exist_ok=True)
    rows = []
    for rep in (2, 1):  # the first repetition is drawn, whatever the order of the rows
        name = f"probe/{rep:06d}.throughput.csv"
        lines = ["flow,t_s,mbps"] + [f"{flow},{0.1 * k:.1f},{(8 if flow == 0 else 4) + k % 3}"
                                      for flow in (0, 1) for k in range(30)]
        (run_dir / name).write_text("\n".join(lines) + "\n")
        rows.append({"client": "shared", "scheme": "kernel:bbr", "repetition": rep, "throughput_bins": name,
                     "jain": 0.93, "shared_s": 2.5,
                     "flows": [{"flow": 0, "scheme": "kernel:bbr", "role": "test"},
                               {"flow": 1, "scheme": "native:cubic", "role": "competitor"}]})
    return rows


def assert_png(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data.startswith(PNG_MAGIC) and len(data) > 5000, path


def test_throughput_delay_figures_per_path_and_for_the_run(tmp_path):
    rows = tradeoff_rows()
    one = tradeoffs.plot_throughput_delay([r for r in rows if r["client"] == "lte"], str(tmp_path / "lte.png"))
    assert_png(one)
    grid = tradeoffs.plot_throughput_delay_grid(rows, str(tmp_path / "all.png"))
    assert_png(grid)
    points = tradeoffs.tradeoff_points(rows)
    assert len(points["ovs:bbr"]) == 1 and len(points["kernel:bbr"]) == 10


def test_workload_and_competition_figures(tmp_path):
    rows = workload_rows(tmp_path)
    reqs = tradeoffs.workload_requests(str(tmp_path), rows)
    assert sorted(reqs) == ["kernel:bbr", "native:cubic"] and len(reqs["kernel:bbr"]) == 8
    p = tradeoffs.slowdown_percentiles(reqs["kernel:bbr"])
    assert p["lt100k"][2] == 2 and p["lt100k"][0] == pytest.approx((0.05 / 0.04 + 0.15 / 0.04) / 2)
    assert p["100k-1m"] == (pytest.approx(1.6), pytest.approx(1.6), 2)
    assert_png(tradeoffs.plot_fct_cdf(str(tmp_path), rows, str(tmp_path / "fct.png")))
    assert_png(tradeoffs.plot_slowdown(str(tmp_path), rows, str(tmp_path / "slowdown.png")))
    comp = competition_rows(tmp_path)
    assert [r["repetition"] for r in tradeoffs.first_repetition_units(comp)] == [1]
    bins = tradeoffs.read_throughput_bins(str(tmp_path / "probe" / "000001.throughput.csv"))
    assert sorted(bins) == [0, 1] and len(bins[1][0]) == 30
    assert_png(tradeoffs.plot_competing_flows(str(tmp_path), comp[1], str(tmp_path / "flows.png")))


def test_a_whole_run_draws_what_its_rows_support(tmp_path):
    rows = tradeoff_rows() + workload_rows(tmp_path) + competition_rows(tmp_path)
    written = tradeoffs.plot_run_tradeoffs(str(tmp_path), rows)
    names = sorted(p.rsplit("/", 1)[1] for p in written)
    assert names == ["fct-cdf-web.png", "flows-shared-kernel_bbr.png", "slowdown-web.png", "throughput-delay-lte.png",
                     "throughput-delay-wired.png", "throughput-delay.png"]
    for p in written:
        assert p.startswith(str(tmp_path / "tradeoffs")) and p.endswith(".png")
        assert_png(p)


def test_missing_data_is_skipped_not_raised(tmp_path, caplog):
    bare = [{"client": "c", "scheme": "kernel:bbr", "repetition": 1, "tct_s": 1.0}]
    assert tradeoffs.plot_run_tradeoffs(str(tmp_path), bare) == []
    assert tradeoffs.plot_throughput_delay(bare, str(tmp_path / "x.png")) is None
    gone = [{"client": "c", "scheme": "kernel:bbr", "repetition": 1, "throughput_bins": "probe/none.csv",
             "flows": [{"flow": 0, "scheme": "kernel:bbr", "role": "test"}]}]
    with caplog.at_level("WARNING"):
        assert tradeoffs.plot_run_tradeoffs(str(tmp_path), gone) == []
    assert "probe/none.csv" in caplog.text
    assert not (tmp_path / "x.png").exists()


def test_lone_flows_are_drawn_over_time_one_line_per_scheme(tmp_path):
    (tmp_path / "probe").mkdir()
    rows = []
    for i, scheme in enumerate(("native:cubic", "kernel:vegas")):
        name = f"probe/{i:06d}.throughput.csv"
        (tmp_path / name).write_text("flow,t_s,mbps\n0,0.0,5.0\n0,0.1,20.0\n0,0.2,23.5\n")
        rows.append({"client": "c", "scheme": scheme, "repetition": 1, "throughput_bins": name})
    rows.append({"client": "c", "scheme": "kernel:vegas", "repetition": 2, "throughput_bins": "probe/missing.csv"})
    path = tradeoffs.plot_lone_flows(str(tmp_path), rows, str(tmp_path / "t.png"), title="c")
    assert path and os.path.getsize(path) > 0
    assert tradeoffs.plot_lone_flows(str(tmp_path), [{"client": "c", "scheme": "x"}], str(tmp_path / "u.png"),
                                     title="c") is None
