"""`ccswitch dataset`: rows from a tiny synthetic run directory and a tiny sweep store, with a
stand-in for the native feature code (the builder's own logic is what is tested here)."""

import json
import math
import os
import types

import pyarrow.parquet as pq
import pytest

from ccswitch.experiments import sweep_paths, sweep_spec, sweep_store
from ccswitch.learner import dataset, labels

NAMES = ["min_rtt_ms", "loss_rate", "samples"]


def stand_in():
    """Looks like ccswitch._native's feature API: min RTT, lost/(lost+acked) packets and the
    number of RTT samples over the first `samples` reports with an RTT; decided once
    `min_samples` samples were seen. Records its calls."""
    calls = []

    def decision_features(reports, mss, window, samples, min_samples):
        calls.append((len(reports), mss, window, samples, min_samples))
        seen, decided_at = [], None
        lost = acked = 0
        for i, r in enumerate(reports):
            if len(seen) < samples:
                lost += r["lost_packets"]
                acked += math.ceil(r["acked_bytes"] / mss)
                if r["rtt_us"] > 0:
                    seen.append(r["rtt_us"])
            if decided_at is None and len(seen) >= min_samples:
                decided_at = i
        feats = {"min_rtt_ms": min(seen) / 1000, "loss_rate": lost / (lost + acked) if lost + acked else 0.0,
                 "samples": float(len(seen))}
        return {"features": feats, "decided": decided_at is not None, "report_index": decided_at,
                "dp_us": reports[decided_at]["dp_us"] if decided_at is not None else None}

    return types.SimpleNamespace(FEATURE_NAMES=NAMES, decision_features=decision_features, calls=calls)


#: Reports a round trip apart at least (RTTs here are up to 100 ms): the feature window
#: takes one RTT sample per round trip.
REPORT_EVERY_US = 100_000


def events(t0_us, rtts, mss=1448, lost_at=()):
    out = [{"event": "flow", "t_us": t0_us, "datapath": 1, "sid": 7, "dst": "198.18.0.1", "dport": 4000,
            "algorithm": "bbr", **({"mss": mss} if mss else {})}]
    for i, rtt in enumerate(rtts):
        out.append({"event": "report", "t_us": t0_us + REPORT_EVERY_US * (i + 1), "datapath": 1, "sid": 7, "algorithm": "bbr",
                    "rtt_us": rtt, "acked_bytes": 2 * 1448, "lost_packets": 1 if i in lost_at else 0,
                    "delivery_rate_bps": 8_000_000, "timeout": False, "dp_us": 1000 + REPORT_EVERY_US * i,
                    "cwnd_bytes": 14480, "bytes_in_flight": 2896, "pacing_rate_bps": None})
    out.append({"event": "close", "t_us": t0_us + REPORT_EVERY_US * (len(rtts) + 2), "datapath": 1, "sid": 7,
                "algorithm": "bbr", "reports": len(rtts), "handovers": 0})
    return out


def path_fields(delay, mbps, loss, queue):
    return {"delay_ms": delay, "rtt_ms": 2 * delay, "loss_downlink": loss, "loss_uplink": 0.0, "downlink_mbps": mbps,
            "uplink_mbps": mbps, "downlink_trace": None, "uplink_trace": None, "queue_packets": queue, "path": "x"}


def write_run(run_dir):
    """Two clients; kernel:bbr (twice on the first), kernel:cubic, a native and a policy
    scheme that are not candidates; one cubic transfer failed."""
    rows, n = [], 0
    os.makedirs(run_dir / "flows")
    spec = [("a", path_fields(10, 24.0, 0.01, 40), [("kernel:bbr", 1, 2.0), ("kernel:bbr", 2, 3.0),
                                                    ("kernel:cubic", 1, 5.0), ("kernel:cubic", 2, None),
                                                    ("native:cubic", 1, 1.0), ("kernel:policy:mystique", 1, 0.5)]),
            ("b", path_fields(50, 8.0, 0.0, 200), [("kernel:bbr", 1, 4.0), ("kernel:cubic", 1, 3.5)])]
    for client, path, transfers in spec:
        for scheme, rep, tct in transfers:
            n += 1
            row = dict(path, client=client, scheme=scheme, repetition=rep, file_bytes=1_000_000, tct_s=tct,
                       sha256_ok=tct is not None, error=None if tct is not None else "curl: (28) timed out",
                       load1=0.25 * n, started_at=f"2026-01-01T00:00:{n:02d}Z", events=None)
            if scheme == "kernel:bbr":
                rel = f"flows/{n:03d}.jsonl"
                rtts = [30_000 + 1000 * i for i in range(12)] if client == "a" else [100_000] * 5
                evs = events(1_000_000 * n, rtts, lost_at=(2,) if client == "a" else ())
                (run_dir / rel).write_text("".join(json.dumps(e) + "\n" for e in evs))
                row["events"] = rel
            rows.append(row)
    (run_dir / "transfers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_run_directory_becomes_one_row_per_initial_transfer_with_every_candidates_tct(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    native = stand_in()
    out = tmp_path / "d.parquet"
    res = dataset.build_dataset([str(run)], str(out), native=native, window=("first", 10, 4))
    assert (res["rows"], res["paths"], res["candidates"]) == (3, 2, ["bbr", "cubic"])
    t = pq.read_table(out)
    rows = sorted(t.to_pylist(), key=lambda r: (r["rtt_ms"], r["rep"]))
    a1, a2, b = rows
    # every candidate's median TCT over its successful repetitions on the path and size
    assert (a1["tct_bbr"], a1["n_bbr"], a1["tct_cubic"], a1["n_cubic"]) == (2.5, 2, 5.0, 1)
    assert (b["tct_bbr"], b["tct_cubic"]) == (4.0, 3.5)
    assert (a1["rep"], a2["rep"], a1["path_id"]) == (1, 2, a2["path_id"]) and b["path_id"] != a1["path_id"]
    # the path: the same path_id the sweep gives the same parameters
    assert a1["path_id"] == sweep_paths.path_id(sweep_paths.params_from_row(path_fields(10, 24.0, 0.01, 40)))
    assert (a1["rtt_ms"], a1["mbps"], a1["loss_downlink"], a1["queue_packets"], a1["link_kind"]) == (20.0, 24.0, 0.01, 40, "constant")
    assert a1["queue_bdp"] == pytest.approx(40 / (24e6 * 0.020 / 12000))
    # features from the native API: window, min_samples and the flow's mss passed through
    assert sorted(native.calls) == [(5, 1448, "first", 10, 4), (12, 1448, "first", 10, 4), (12, 1448, "first", 10, 4)]
    assert (a1["f_min_rtt_ms"], a1["f_samples"]) == (30.0, 10.0)
    assert a1["f_loss_rate"] == pytest.approx(1 / 21)
    # decided at the 4th report (index 3): 400 ms after the flow event
    assert a1["decision_at_s"] == pytest.approx(0.4)
    # b's flow has five samples: enough for min_samples = 4
    assert b["decision_at_s"] == pytest.approx(0.4) and b["f_samples"] == 5.0
    assert (a1["initial"], a1["datapath"], a1["reports"], a1["mss"]) == ("bbr", "kernel", 12, 1448)
    # the highest load under which any candidate ran on this path (the failed cubic transfer, 4th)
    assert a1["load1_max"] == pytest.approx(0.25 * 4)
    meta = json.loads(t.schema.metadata[b"ccswitch.dataset"])
    assert meta["window"] == {"kind": "first", "samples": 10, "min_samples": 4}
    assert meta["candidates"] == ["bbr", "cubic"] and meta["features"] == NAMES
    # what the notebook's label code reads
    assert labels.candidate_columns(t.column_names) == ["bbr", "cubic"]
    assert labels.feature_columns(t.column_names) == NAMES


def test_a_flow_that_ends_before_the_first_decision_has_no_decision_time(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    res = dataset.build_dataset([str(run)], str(tmp_path / "d.parquet"), native=stand_in(), window=("first", 20, 8))
    rows = {r["rtt_ms"]: r for r in pq.read_table(tmp_path / "d.parquet").to_pylist()}
    assert res["rows"] == 3
    assert rows[100.0]["decision_at_s"] is None and rows[100.0]["f_samples"] == 5.0
    assert rows[20.0]["decision_at_s"] == pytest.approx(0.8)


def test_a_flow_without_mss_is_counted_and_gets_the_default(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    for f in (run / "flows").iterdir():
        evs = [json.loads(l) for l in f.read_text().splitlines()]
        evs[0].pop("mss")
        f.write_text("".join(json.dumps(e) + "\n" for e in evs))
    warned, native = [], stand_in()
    dataset.build_dataset([str(run)], str(tmp_path / "d.parquet"), native=native, window=("first", 10, 4),
                          warn=warned.append)
    assert {c[1] for c in native.calls} == {dataset.DEFAULT_MSS}
    assert warned == [f"3 flow(s) without an mss in their flow event: assumed {dataset.DEFAULT_MSS} bytes"]


def test_a_sweep_store_gives_the_same_rows_as_its_cells_say(tmp_path):
    spec_text = (f'name = "tiny"\nseed = 1\npaths = 2\ncandidates = ["bbr", "cubic:beta=0.8"]\ninitial = "bbr"\n'
                 '[window]\nkind = "first"\nsamples = 10\nmin_samples = 4\n[sizes]\nfixed = [1_000_000]\n'
                 '[[mix]]\nname = "c"\nweight = 1\nkind = "constant"\nrtt_ms = { dist = "uniform", min = 20, max = 40 }\n'
                 'mbps = 24\nqueue_bdp = 1\n')
    spec = sweep_spec.loads_spec(spec_text)
    store = sweep_store.CellStore(str(tmp_path / "store"))
    paths = sweep_paths.sample_paths(spec)
    store.write_spec(spec, paths)
    for i, cell in enumerate(sweep_paths.cells_of(spec, paths)):
        tct = 1.0 + i
        row = {"tct_s": tct, "sha256_ok": True, "error": None, "load1": 0.1, "started_at": "t"}
        evs = events(10_000_000 * i, [25_000] * 6) if cell.candidate == "bbr" else None
        store.write_cell(spec, cell, row, evs, "batch-x")
    native = stand_in()
    out = tmp_path / "d.parquet"
    res = dataset.build_dataset([str(tmp_path / "store")], str(out), native=native)
    assert res["window"] == ("first", 10, 4) and res["rows"] == 2
    rows = pq.read_table(out).to_pylist()
    assert {r["path_id"] for r in rows} == {p.id for p in paths}
    assert all(r["sweep"] == "tiny" and r["f_samples"] == 6.0 and r["tct_cubic_beta_0_8"] is not None for r in rows)
    assert all(r["tct_bbr"] < r["tct_cubic_beta_0_8"] or r["tct_bbr"] > r["tct_cubic_beta_0_8"] for r in rows)
    assert json.loads(pq.read_table(out).schema.metadata[b"ccswitch.dataset"])["candidates"] == ["bbr", "cubic:beta=0.8"]
    # the store's initial algorithm is the spec's
    with pytest.raises(dataset.DatasetError, match="observed flows under bbr"):
        dataset.build_dataset([str(tmp_path / "store")], str(out), native=native, initial="cubic")


def test_sources_that_are_neither_a_store_nor_a_run_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(dataset.DatasetError, match="neither a sweep store .* nor a run directory"):
        dataset.build_dataset([str(tmp_path / "empty")], str(tmp_path / "d.parquet"), native=stand_in())
    run = tmp_path / "run"
    write_run(run)
    with pytest.raises(dataset.DatasetError, match="no transfer ran the initial algorithm 'hybla'"):
        dataset.build_dataset([str(run)], str(tmp_path / "d.parquet"), native=stand_in(), initial="hybla")


def test_the_cli_computes_the_features_with_the_agents_own_code(tmp_path, capsys):
    from ccswitch import _native
    from ccswitch.cli import main

    assert dataset.native_features() is _native
    run = tmp_path / "run"
    write_run(run)
    out = tmp_path / "d.parquet"
    assert main(["dataset", str(run), "-o", str(out), "--samples", "20", "--min-samples", "8"]) == 0
    assert f"{out}: 3 rows, 2 paths, candidates bbr, cubic; window first 20 (decide after 8)" in capsys.readouterr().err
    t = pq.read_table(out)
    assert labels.feature_columns(t.column_names) == list(_native.FEATURE_NAMES)
    rows = sorted(t.to_pylist(), key=lambda r: (r["rtt_ms"], r["rep"]))
    a1, _, b = rows
    # a: 12 reports of RTT 30, 31, ... ms, decided once the window holds 8 samples
    assert (a1["f_samples"], a1["f_min_rtt_ms"], a1["f_max_rtt_ms"]) == (8.0, 30.0, 37.0)
    assert a1["decision_at_s"] == pytest.approx(0.8)
    # b: 5 reports, fewer than min_samples: no decision, the features of the whole flow
    assert b["decision_at_s"] is None and b["f_samples"] == 5.0 and b["f_min_rtt_ms"] == 100.0


# ---- what the objectives read ------------------------------------------------------------------

OBJECTIVE_SPEC = """
name = "tiny-objectives"
seed = 1
paths = 2
candidates = ["bbr", "cubic", "hybla"]
initial = "bbr"
repetitions = 2
[window]
kind = "first"
samples = 10
min_samples = 4
[sizes]
fixed = [1_000_000]

[[mix]]
name = "competing"
weight = 1
kind = "constant"
rtt_ms = 40
mbps = 24
queue_bdp = 1
competitor = { share = 1.0, scheme = "native:cubic", lead_s = 1, seconds = 6 }

[[mix]]
name = "step"
weight = 1
kind = "constant"
rtt_ms = { dist = "uniform", min = 20, max = 40 }
mbps = 24
queue_bdp = 1
step = { share = 1.0, at_s = 2, delay_ms = 50, loss_downlink = 0.01 }
"""

#: (candidate, rep) -> (tct_s, throughput_mbps, delay_p95_ms, competitor_mbps); None: failed
FIGURES = {
    ("bbr", 1): (1.0, 8.0, 30.0, 4.0), ("bbr", 2): (1.2, 10.0, 50.0, 6.0),
    # the reference: the competitor runs Cubic, so does the test flow
    ("cubic", 1): (2.0, 5.0, 80.0, 10.0), ("cubic", 2): (2.2, 6.0, 90.0, 12.0),
    # hybla's second transfer failed: its figures (competitor at 100 Mbit/s) must not count
    ("hybla", 1): (1.5, 7.0, 60.0, 9.0), ("hybla", 2): None,
}


def write_objective_store(root):
    """A sweep store of two paths (one with a competing native:cubic flow, one with a step),
    written by the store itself from cells carrying the probe's figures."""
    spec = sweep_spec.loads_spec(OBJECTIVE_SPEC)
    store = sweep_store.CellStore(str(root))
    paths = sweep_paths.sample_paths(spec)
    assert sorted(p.component for p in paths) == ["competing", "step"]
    store.write_spec(spec, paths)
    for i, cell in enumerate(sweep_paths.cells_of(spec, paths)):
        figs = FIGURES[(cell.candidate, cell.rep)]
        competing = cell.path.component == "competing"
        if figs is None:
            row = {"tct_s": None, "sha256_ok": False, "error": "curl: (28) timed out", "throughput_mbps": 1.0,
                   "delay_p95_ms": 1.0, "competitor_mbps": 100.0 if competing else None}
        else:
            tct, thr, dp95, rival = figs
            row = {"tct_s": tct, "sha256_ok": True, "error": None, "throughput_mbps": thr, "delay_p95_ms": dp95,
                   "delay_p50_ms": dp95 / 2, "competitor_mbps": rival if competing else None,
                   "flows": [{"role": "test", "scheme": cell.scheme}, {"role": "competitor", "scheme": "native:cubic"}]
                   if competing else None}
        row.update(load1=0.1, started_at="t")
        evs = events(10_000_000 * i, [25_000] * 6) if cell.candidate == "bbr" else None
        store.write_cell(spec, cell, row, evs, "batch-x")
    return paths


def test_every_candidate_gets_its_median_throughput_delay_and_harm_and_each_path_its_step_and_competitor(tmp_path):
    paths = write_objective_store(tmp_path / "store")
    out = tmp_path / "d.parquet"
    dataset.build_dataset([str(tmp_path / "store")], str(out), native=stand_in())
    t = pq.read_table(out)
    rows = {r["path_id"]: r for r in t.to_pylist() if r["rep"] == 1}
    comp = rows[next(p.id for p in paths if p.component == "competing")]
    step = rows[next(p.id for p in paths if p.component == "step")]
    for r in (comp, step):
        # medians over the successful repetitions; hybla's failed one left out
        assert (r["tct_bbr"], r["thr_bbr"], r["dp95_bbr"]) == (1.1, 9.0, 40.0)
        assert (r["tct_cubic"], r["thr_cubic"], r["dp95_cubic"]) == (2.1, 5.5, 85.0)
        assert (r["tct_hybla"], r["n_hybla"], r["thr_hybla"], r["dp95_hybla"]) == (1.5, 1, 7.0, 60.0)
    # harm against the reference (Cubic's competitor median 11 Mbit/s): BBR's 5 -> 6/11,
    # Hybla's 9 -> 2/11, Cubic itself 0
    assert comp["has_competitor"] is True and comp["has_schedule"] is False
    assert comp["harm_bbr"] == pytest.approx(6 / 11) and comp["harm_hybla"] == pytest.approx(2 / 11)
    assert comp["harm_cubic"] == 0.0
    assert comp["step_at_s"] is None and comp["step_delay_ms"] is None and comp["step_loss"] is None
    # the step path: its last step's time, added delay and loss; no competitor, no harm
    assert step["has_schedule"] is True and step["has_competitor"] is False
    assert (step["step_at_s"], step["step_delay_ms"], step["step_loss"]) == (2.0, 50.0, 0.01)
    assert step["harm_bbr"] is None and step["harm_cubic"] is None
    # the families do not collide: the candidates are still the tct_ columns
    assert labels.candidate_columns(t.column_names) == ["bbr", "cubic", "hybla"]
    meta = json.loads(t.schema.metadata[b"ccswitch.dataset"])
    assert meta["scenarios"] == ["tiny-objectives"] and meta["metrics"]["dp95_"] == "delay_p95_ms"


def test_the_objectives_cost_the_dataset_as_built(tmp_path):
    from ccswitch.learner import objectives, training

    write_objective_store(tmp_path / "store")
    out = tmp_path / "d.parquet"
    dataset.build_dataset([str(tmp_path / "store")], str(out), native=stand_in())
    ds = training.load_dataset(out, objective="harm")
    c = ds.cost
    competing = ds.table["has_competitor"].to_numpy(dtype=bool)
    assert c[competing][0].tolist() == pytest.approx([1.1 * (1 + 6 / 11), 2.1, 1.5 * (1 + 2 / 11)])
    assert c[~competing][0].tolist() == pytest.approx([1.1, 2.1, 1.5])
    assert training.load_dataset(out, objective="tct_delay_budget:budget_ms=50").miss[0].tolist() == [0.0, 1.0, 1.0]
    assert ds.objective == objectives.parse("harm")


def test_cells_from_before_the_probe_have_missing_figures_not_errors(tmp_path):
    spec = sweep_spec.loads_spec(OBJECTIVE_SPEC)
    store = sweep_store.CellStore(str(tmp_path / "store"))
    paths = sweep_paths.sample_paths(spec)
    store.write_spec(spec, paths)
    for i, cell in enumerate(sweep_paths.cells_of(spec, paths)):
        # what an old cell holds: no throughput, delay, flows or competitor figures at all
        row = {"tct_s": 1.0 + i, "sha256_ok": True, "error": None, "load1": 0.1, "started_at": "t"}
        store.write_cell(spec, cell, row, events(10_000_000 * i, [25_000] * 6) if cell.candidate == "bbr" else None, "b")
    out = tmp_path / "d.parquet"
    dataset.build_dataset([str(tmp_path / "store")], str(out), native=stand_in())
    rows = pq.read_table(out).to_pylist()
    assert rows and all(r["thr_bbr"] is None and r["dp95_cubic"] is None and r["harm_hybla"] is None for r in rows)
    # the path still says it has a competitor (its parameters do), so harm is unknown, not 0
    assert {r["has_competitor"] for r in rows} == {True, False}


def test_a_run_directory_without_the_new_fields_still_builds(tmp_path):
    run = tmp_path / "run"
    write_run(run)
    dataset.build_dataset([str(run)], str(tmp_path / "d.parquet"), native=stand_in(), window=("first", 10, 4))
    rows = pq.read_table(tmp_path / "d.parquet").to_pylist()
    assert all(r["thr_bbr"] is None and r["has_competitor"] is False and r["has_schedule"] is False for r in rows)


# ---- held out for evaluation -------------------------------------------------------------------


def test_a_run_of_a_held_out_scenario_is_refused_by_its_name(tmp_path):
    run = tmp_path / "mix"
    write_run(run)
    (run / "scenario.toml").write_text('name = "mystique-mix"\nschemes = ["kernel:bbr"]\n'
                                       '[[clients]]\nname = "c"\ndelay_ms = 7\nlink = { mbps = 12 }\n'
                                       'file_sizes = [1000]\n')
    with pytest.raises(dataset.DatasetError) as e:
        dataset.build_dataset([str(run)], str(tmp_path / "d.parquet"), native=stand_in())
    assert str(e.value) == f"{run}: a run of mystique-mix.toml, held out for evaluation: training may not use it"


def test_a_run_on_a_held_out_path_is_refused_whatever_its_name(tmp_path):
    # mcc-wifi.toml clients[1]: 20 ms RTT, 24 Mbit/s, a 40-packet queue, clean
    from ccswitch.experiments import scenario as _scenario
    from ccswitch.experiments.environment import repo_root

    wired = _scenario.load_scenario(os.path.join(repo_root(), "experiments/mcc-wifi.toml"), check_files=False).clients[1]
    run = tmp_path / "innocent"
    write_run(run)
    rows = [json.loads(l) for l in (run / "transfers.jsonl").read_text().splitlines()]
    rows[-1].update({k: v for k, v in wired.path_fields().items()})
    (run / "transfers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(dataset.DatasetError) as e:
        dataset.build_dataset([str(run)], str(tmp_path / "d.parquet"), native=stand_in())
    assert str(e.value) == (f"{run}: a run on the path of mcc-wifi.toml clients[1] ({wired.name}), held out for "
                            "evaluation: training may not use it")


def test_the_measured_runs_on_the_held_out_paths_are_refused():
    from ccswitch.experiments.environment import repo_root

    run = os.path.join(repo_root(), "experiments/measured/learned-mix-2026-11-24")
    with pytest.raises(dataset.DatasetError, match="a run on the path of mystique-mix.toml clients"):
        dataset.read_source(run, None)


def test_training_refuses_a_dataset_built_from_a_held_out_run(tmp_path):
    import pyarrow as pa

    from ccswitch.learner import training

    cols = {"path_id": ["p"], "initial": ["bbr"], "tct_bbr": [1.0], "f_min_rtt_ms": [1.0]}
    for sources, scenarios in ((["results/mcc-wifi-20261124-101500"], None), (["results/renamed"], ["mcc-wifi"])):
        meta = {"sources": sources, **({"scenarios": scenarios} if scenarios else {})}
        pq.write_table(pa.table(cols).replace_schema_metadata({b"ccswitch.dataset": json.dumps(meta).encode()}),
                       tmp_path / "d.parquet")
        with pytest.raises(ValueError) as e:
            training.load_dataset(tmp_path / "d.parquet")
        assert str(e.value) == (f"{tmp_path / 'd.parquet'}: built from {sources[0]}, a run of mcc-wifi.toml, held out "
                                "for evaluation: training may not use it")
    assert dataset.held_out_source("results/mystique-mixer-20261124-101500") is None
