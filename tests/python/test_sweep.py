"""Sweep specs, path sampling, hold-out, cell keys and resumption (the runner faked)."""

import gzip
import hashlib
import json
import os

import pytest

from ccswitch.experiments import results, sweep, sweep_paths, sweep_spec, sweep_store
from ccswitch.experiments.errors import Interrupted

TRACES = "/usr/share/mahimahi/traces"

SPEC = """
name = "t"
seed = 3
paths = 6
candidates = ["bbr", "cubic"]
initial = "bbr"
[sizes]
fixed = [1_200_000]
large = [6_000_000]
[[mix]]
name = "constant"
weight = 0.7
kind = "constant"
rtt_ms = { dist = "loguniform", min = 4, max = 300 }
mbps = { dist = "loguniform", min = 4, max = 100 }
loss_downlink = { dist = "choice", values = [0, 0.01], weights = [2, 1] }
queue_bdp = { dist = "choice", values = [0.5, 1, 2] }
[[mix]]
name = "cell"
weight = 0.3
kind = "trace"
traces = ["TRACES/TMobile-*.down", "TRACES/ATT-LTE-driving.down"]
rtt_ms = { dist = "uniform", min = 10, max = 150 }
queue_packets = 60
""".replace("TRACES", TRACES)


def spec_of(text=SPEC):
    return sweep_spec.loads_spec(text)


@pytest.mark.parametrize("old,new,message", [
    ('name = "t"', 'name = "a b"', "name: required, must match"),
    ("seed = 3", "", "seed: required"),
    ("paths = 6", "paths = 0", "paths: must be an integer >= 1, got 0"),
    ('initial = "bbr"', 'initial = "reno"', "initial: must be one of the candidates (bbr, cubic)"),
    ('candidates = ["bbr", "cubic"]', 'candidates = ["bbr", "policy:mystique"]',
     "candidates[1]: 'policy:mystique': a policy is not a candidate"),
    ('candidates = ["bbr", "cubic"]', 'candidates = ["bbr", "bbr"]', "candidates[1]: 'bbr' repeats"),
    ("seed = 3", 'seed = 3\ndatapaths = ["tc"]', 'datapaths[0]: must be "kernel"'),
    ("seed = 3", 'seed = 3\ndatapaths = ["switch"]', 'datapaths[0]: "switch": renamed, write "ovs"'),
    ("seed = 3", "seed = 3\nbogus = 1", "bogus: unknown key"),
    ("fixed = [1_200_000]", "fixed = []", "sizes.fixed: must be a non-empty list"),
    ("large = [6_000_000]", "large = [1_200_000]", "sizes.large: 1200000 is also a fixed size"),
    ("large = [6_000_000]", "large = [6_000_000]\nmax_est_s = 1000", "sizes.max_est_s: must be a number in (0, timeout_s = 90]"),
    ('rtt_ms = { dist = "loguniform", min = 4, max = 300 }', 'rtt_ms = { dist = "loguniform", min = 0, max = 300 }',
     "mix[0].rtt_ms.min: must be > 0 for dist = \"loguniform\""),
    ('rtt_ms = { dist = "loguniform", min = 4, max = 300 }', 'rtt_ms = { dist = "normal", min = 4, max = 300 }',
     'mix[0].rtt_ms.dist: must be "uniform", "loguniform" or "choice"'),
    ('mbps = { dist = "loguniform", min = 4, max = 100 }', 'mbps = { dist = "uniform", min = 4, max = 5000 }',
     "mix[0].mbps.max: must be a number in [0.012, 1000], got 5000"),
    ("weights = [2, 1]", "weights = [2]", "mix[0].loss_downlink.weights: must be a list of 2 numbers"),
    ("values = [0, 0.01]", "values = [0, 1.5]", "mix[0].loss_downlink.values[1]: must be a number in [0, 1)"),
    ('queue_bdp = { dist = "choice", values = [0.5, 1, 2] }', "", "mix[0].queue_bdp: give exactly one of"),
    ('kind = "constant"', 'kind = "wifi"', 'mix[0].kind: must be "constant" or "trace"'),
    ("queue_packets = 60", "queue_packets = 60\nmbps = 3", 'mix[1].mbps: only for kind = "constant"'),
    ("ATT-LTE-driving.down", "ATT-LTE-nonexistent.down", "mix[1].traces[1]: no trace file matches"),
    ("ATT-LTE-driving.down", "ATT-LTE-driving.up", "mix[1].traces[1]: must be a .down trace file"),
])
def test_a_bad_spec_is_refused_with_the_key_named(old, new, message):
    assert old in SPEC
    with pytest.raises(sweep_spec.SweepError) as e:
        spec_of(SPEC.replace(old, new, 1))
    assert message in str(e.value)


def test_a_window_deciding_after_more_samples_than_it_holds_is_refused():
    with pytest.raises(sweep_spec.SweepError, match=r"^window.min_samples: must be at most samples \(4\), got 5$"):
        spec_of(SPEC.replace("[sizes]", "[window]\nsamples = 4\nmin_samples = 5\n[sizes]"))


def test_a_spec_naming_a_verizon_trace_is_refused_at_load():
    text = SPEC.replace("ATT-LTE-driving.down", "Verizon-LTE-short.down")
    with pytest.raises(sweep_spec.SweepError) as e:
        spec_of(text)
    assert str(e.value) == ("mix[1].traces[1]: '/usr/share/mahimahi/traces/Verizon-LTE-short.down' names held-out "
                            "trace(s) Verizon-LTE-short.down: the Verizon traces are held out for evaluation and no "
                            "sweep may train on them")
    # a glob that would sweep them in is refused as well, naming what it matched
    with pytest.raises(sweep_spec.SweepError, match=r"mix\[1\].traces\[0\]: .*Verizon-EVDO-driving.down, Verizon-LTE-driving"):
        spec_of(SPEC.replace("TMobile-*.down", "*.down"))


def test_the_same_seed_gives_the_same_paths_and_more_paths_keep_the_first_ones():
    a = sweep_paths.sample_paths(spec_of())
    b = sweep_paths.sample_paths(spec_of())
    assert [p.params for p in a] == [p.params for p in b]
    assert [p.sizes for p in a] == [p.sizes for p in b]
    assert len({p.id for p in a}) == 6
    more = sweep_paths.sample_paths(spec_of(SPEC.replace("paths = 6", "paths = 20")))
    assert {p.component for p in more} == {"constant", "cell"}
    assert [p.params for p in more[:6]] == [p.params for p in a]
    other = sweep_paths.sample_paths(spec_of(SPEC.replace("seed = 3", "seed = 4")))
    assert [p.params for p in other] != [p.params for p in a]


def test_sampled_paths_respect_their_distributions():
    spec = spec_of(SPEC.replace("paths = 6", "paths = 60"))
    for p in sweep_paths.sample_paths(spec):
        rtt = 2 * p.params["delay_ms"]
        if p.component == "constant":
            assert 4 <= rtt <= 300 and 4 <= p.params["downlink_mbps"] <= 100
            assert p.params["loss_downlink"] in (0.0, 0.01)
            bdp = p.mean_mbps * 1e6 * rtt / 1000 / 12000
            assert p.params["queue_packets"] == max(8, round(p.queue_bdp * bdp))
        else:
            assert 10 <= rtt <= 150 and p.params["queue_packets"] == 60
            assert os.path.basename(p.params["downlink_trace"]).split("-")[0] in ("TMobile", "ATT")
        for s in p.sizes:
            assert p.est_slowest_s[s] <= spec.max_est_s


HELD = """
name = "h"
seed = 1
paths = 4
candidates = ["bbr"]
initial = "bbr"
[sizes]
fixed = [1_200_000]
[[mix]]
name = "near-mystique"
weight = 1
kind = "constant"
rtt_ms = { dist = "choice", values = [30, 40, 44, 50, 60, 70] }
mbps = 24
loss_downlink = 0.01
queue_packets = 60
"""


def test_a_sampled_held_out_path_is_drawn_again_and_the_fact_logged():
    said = []
    paths = sweep_paths.sample_paths(spec_of(HELD), log=said.append)
    # RTT 30 ms, 24 Mbit/s, 1% loss, 60 packets is mystique-mix's regional-30ms-loss1
    assert all(p.params["delay_ms"] != 15 for p in paths)
    held_said = [m for m in said if "held-out" in m]
    assert held_said and all("held-out path of mystique-mix.toml clients[2] (regional-30ms-loss1); drawing again" in m
                             for m in held_said)
    assert sum(len(p.redraws) for p in paths) == len(said)
    held = sweep_paths.held_out_paths(spec_of(HELD))
    assert not any(sweep_paths._comparable(p.params) in held for p in paths)


def test_a_trace_path_of_a_held_out_scenario_is_drawn_again():
    text = HELD.replace('kind = "constant"', 'kind = "trace"').replace("mbps = 24\n", "") \
        .replace("loss_downlink = 0.01\n", "") \
        .replace("values = [30, 40, 44, 50, 60, 70]", "values = [20, 22, 24, 26, 28, 30]") \
        .replace('name = "near-mystique"', f'name = "att"\ntraces = ["{TRACES}/ATT-LTE-driving-2016.down"]')
    said = []
    paths = sweep_paths.sample_paths(spec_of(text), log=said.append)
    assert all(p.params["delay_ms"] != 10 for p in paths)
    assert any("mcc-wifi.toml clients[0] (jittery-att-lte)" in m for m in said)


def test_a_path_drawn_twice_is_drawn_again_so_no_two_paths_share_cells():
    """One trace, two RTTs and one queue: most draws repeat an earlier path, whose cells (keyed
    by the path's parameters) the repeat would share (a crash of the first paths-v1 run)."""
    text = SPEC.replace('weight = 0.7', 'weight = 0.001') \
        .replace('traces = ["TRACES/TMobile-*.down", "TRACES/ATT-LTE-driving.down"]'.replace("TRACES", TRACES),
                 f'traces = ["{TRACES}/ATT-LTE-driving.down"]') \
        .replace('rtt_ms = { dist = "uniform", min = 10, max = 150 }', 'rtt_ms = { dist = "choice", values = [10, 20, 30, 40] }') \
        .replace("paths = 6", "paths = 4")
    said = []
    paths = sweep_paths.sample_paths(spec_of(text), log=said.append)
    assert len({p.id for p in paths}) == 4
    assert any("the same path as path" in m for m in said), said
    cells = sweep_paths.cells_of(spec_of(text), paths)
    assert len({c.key for c in cells}) == len(cells)


def test_a_mix_that_only_yields_held_out_paths_is_a_spec_error():
    with pytest.raises(sweep_spec.SweepError, match=r"path 0: 200 draws in a row were held out or too slow"):
        sweep_paths.sample_paths(spec_of(HELD.replace("values = [30, 40, 44, 50, 60, 70]", "values = [30]")))


def test_the_spec_may_hold_out_more_scenarios(tmp_path):
    extra = tmp_path / "mine.toml"
    extra.write_text('name = "mine"\nschemes = ["native:cubic"]\n[[clients]]\nname = "x"\ndelay_ms = 20\n'
                     'loss_downlink = 0.01\nlink = { mbps = 24 }\nqueue_packets = 60\nfile_bytes = 1000\n')
    spec = spec_of(HELD.replace("seed = 1", f'seed = 1\nheld_out = ["{extra}"]')
                   .replace("values = [30, 40, 44, 50, 60, 70]", "values = [30, 40]"))
    with pytest.raises(sweep_spec.SweepError, match="200 draws in a row"):
        sweep_paths.sample_paths(spec)


def test_cell_keys_are_stable_and_tell_every_parameter_apart():
    params = {"delay_ms": 25, "loss_downlink": 0.01, "loss_uplink": 0.0, "downlink_mbps": 24.0, "uplink_mbps": 24.0,
              "downlink_trace": None, "uplink_trace": None, "queue_packets": 100}
    key = sweep_paths.cell_key(params, "kernel:bbr", 1_200_000, 1)
    # a key is a hash of the cell's parameters: fixed forever, or stores stop resuming
    assert key == sweep_paths.cell_key(dict(reversed(list(params.items()))), "kernel:bbr", 1_200_000, 1)
    canonical = {"path": params, "scheme": "kernel:bbr", "file_bytes": 1_200_000, "rep": 1}
    assert key == hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:20]
    # (stores written while the scheme was spelled "ccswitch:bbr" had "afafa013a9671f0c5e9d"
    # here; they were migrated to the new keys when the kernel datapath became "kernel:")
    assert key == "4467570d0ce83ca54cbb"
    assert sweep_paths.path_id(params) == "2d7fd4ba793b886b"
    variants = [sweep_paths.cell_key(dict(params, delay_ms=26), "kernel:bbr", 1_200_000, 1),
                sweep_paths.cell_key(dict(params, queue_packets=101), "kernel:bbr", 1_200_000, 1),
                sweep_paths.cell_key(dict(params, loss_uplink=0.01), "kernel:bbr", 1_200_000, 1),
                sweep_paths.cell_key(params, "ovs:bbr", 1_200_000, 1),
                sweep_paths.cell_key(params, "kernel:cubic", 1_200_000, 1),
                sweep_paths.cell_key(params, "kernel:bbr", 1_200_001, 1),
                sweep_paths.cell_key(params, "kernel:bbr", 1_200_000, 2)]
    assert len(set(variants + [key])) == len(variants) + 1
    spec = spec_of()
    cells = sweep_paths.cells_of(spec, sweep_paths.sample_paths(spec))
    assert len({c.key for c in cells}) == len(cells)


def test_every_path_runs_every_candidate_in_an_order_rotated_from_path_to_path():
    spec = spec_of(SPEC.replace("fixed = [1_200_000]", "fixed = [1_200_000]").replace("large = [6_000_000]", ""))
    cells = sweep_paths.cells_of(spec, sweep_paths.sample_paths(spec))
    firsts = [cells[i].scheme for i in range(0, len(cells), 2)]
    assert firsts[:4] == ["kernel:bbr", "kernel:cubic", "kernel:bbr", "kernel:cubic"]
    assert all({cells[i].scheme, cells[i + 1].scheme} == {"kernel:bbr", "kernel:cubic"}
               for i in range(0, len(cells), 2))


def test_transfers_are_verdicts_only_when_the_candidate_ran():
    ok = {"error": None, "sha256_ok": True, "curl_exit": None}
    assert results.verdict(ok) == (True, "ok")
    assert results.verdict(dict(ok, error="curl: (28) Operation timed out", curl_exit=28))[0]
    assert results.verdict(dict(ok, error="HTTP 404"))[0]
    assert results.verdict(dict(ok, sha256_ok=False)) == (True, "SHA-256 mismatch")
    assert not results.verdict(dict(ok, error="not run: kernel:bbr failed earlier: x"))[0]
    assert not results.verdict(dict(ok, error="ccswitch-agent exited", agent_died="ccswitch-agent exited"))[0]
    assert not results.verdict(dict(ok, error="exit 1: Died on std::runtime_error: `mm-link'"))[0]


def test_stored_reports_come_back_as_the_agent_wrote_them():
    reports = [{"event": "report", "t_us": 1_700_000_000_000_000 + 1000 * i, "dp_us": 5_000 + 997 * i,
                "rtt_us": 20_000 + i, "acked_bytes": 1448 * (i % 3), "lost_packets": i % 2,
                "delivery_rate_bps": 8_000_000 + i, "timeout": i == 4, "cwnd_bytes": 14480,
                "bytes_in_flight": 2896, "pacing_rate_bps": None, "algorithm": "bbr"} for i in range(7)]
    cols = sweep_store.compact_reports(reports, limit=5)
    assert (cols["n"], cols["total"]) == (5, 7)
    back = sweep_store.expand_reports(json.loads(json.dumps(cols)))
    want = [{k: r[k] for k in ("event",) + sweep_store.STORED_REPORT_FIELDS} for r in reports[:5]]
    assert back == want


# ------------------------------------------------------------------ resumption, runner faked

class FakeRunner:
    """Stands in for runner.Runner: "runs" its schedule by calling on_row with a successful
    row; `interrupt_after` raises Interrupted (as SIGTERM would) after that many transfers."""

    runs = []
    failed_once = set()

    def __init__(self, sc, out, schedule, on_row, interrupt_after=None, fail=(), fail_once=None):
        self.sc, self.out, self.schedule, self.on_row = sc, out, schedule, on_row
        self.interrupt_after, self.fail = interrupt_after, set(fail)
        if fail_once is not None and fail_once not in FakeRunner.failed_once:
            FakeRunner.failed_once.add(fail_once)
            self.fail.add(fail_once)

    def run(self):
        os.makedirs(self.out, exist_ok=True)
        for i, (rep, client, scheme, size) in enumerate(self.schedule, 1):
            if self.interrupt_after is not None and i > self.interrupt_after:
                raise Interrupted(15)
            FakeRunner.runs.append((client.name, scheme.label, size, rep + 1))
            row = {"client": client.name, "scheme": scheme.label, "file_bytes": size, "repetition": rep + 1,
                   "tct_s": 1.5, "sha256_ok": True, "error": None, "curl_exit": None, "load1": 0.5,
                   "transfer": i, "events": None}
            if (client.name, scheme.label) in self.fail:
                row.update(error="exit 1: Died on std::runtime_error", tct_s=None, sha256_ok=False)
            if scheme.label == "kernel:bbr" and row["error"] is None:
                os.makedirs(os.path.join(self.out, "flows"), exist_ok=True)
                row["events"] = f"flows/{i:03d}.jsonl"
                with open(os.path.join(self.out, row["events"]), "w") as f:
                    f.write(json.dumps({"event": "flow", "t_us": 1, "datapath": 1, "sid": i, "mss": 1448}) + "\n")
                    f.write(json.dumps({"event": "report", "t_us": 2, "datapath": 1, "sid": i, "rtt_us": 1000,
                                        "acked_bytes": 1448, "lost_packets": 0, "delivery_rate_bps": 1,
                                        "timeout": False, "dp_us": 7}) + "\n")
            self.on_row(row)


def run_fake(spec, tmp_path, **kw):
    FakeRunner.runs = []
    return sweep.run_sweep(spec, str(tmp_path / "store"), str(tmp_path / "raw"), log=lambda m: None,
                           runner_factory=lambda sc, out, sch, on_row: FakeRunner(sc, out, sch, on_row, **kw),
                           check_schemes=False)


def test_an_interrupted_sweep_resumes_without_rerunning_a_finished_cell(tmp_path):
    spec = spec_of(SPEC.replace("batch_paths", "x").replace("paths = 6", "paths = 3\nbatch_paths = 2"))
    all_cells = sweep_paths.cells_of(spec, sweep_paths.sample_paths(spec))
    with pytest.raises(Interrupted):
        run_fake(spec, tmp_path, interrupt_after=3)
    first = list(FakeRunner.runs)
    assert len(first) == 3
    stored = sorted((tmp_path / "store" / "cells").rglob("*.json.gz"))
    assert len(stored) == 3
    before = {p: p.read_bytes() for p in stored}
    res = run_fake(spec, tmp_path)
    assert (res.skipped, res.ran, res.stored) == (3, len(all_cells) - 3, len(all_cells) - 3)
    assert not set(first) & set(FakeRunner.runs)
    assert len(first) + len(FakeRunner.runs) == len(all_cells)
    assert all(p.read_bytes() == b for p, b in before.items())
    # a third invocation has nothing left to do
    res = run_fake(spec, tmp_path)
    assert (res.skipped, res.ran) == (len(all_cells), 0) and FakeRunner.runs == []
    doc = json.loads(gzip.open(stored[0]).read())
    assert doc["key"] == os.path.basename(stored[0]).split(".")[0]
    assert doc["row"]["load1"] == 0.5


def test_cells_that_did_not_reach_a_verdict_run_again(tmp_path):
    spec = spec_of(SPEC.replace("paths = 6", "paths = 2"))
    paths = sweep_paths.sample_paths(spec)
    bad = (paths[0].client_name, "kernel:cubic")
    res = run_fake(spec, tmp_path, fail=(bad,))
    n_bad = len(paths[0].sizes)
    assert len(res.unfinished) == n_bad and all("Died on" in why for _, why in res.unfinished)
    res = run_fake(spec, tmp_path)
    assert sorted(FakeRunner.runs) == sorted((bad[0], bad[1], s, 1) for s in paths[0].sizes)
    assert res.ran == n_bad and not res.unfinished


def test_a_cell_that_failed_in_the_harness_gets_another_pass_in_the_same_invocation(tmp_path):
    spec = spec_of(SPEC.replace("paths = 6", "paths = 2"))
    paths = sweep_paths.sample_paths(spec)
    bad = (paths[1].client_name, "kernel:bbr")
    FakeRunner.failed_once = set()
    res = run_fake(spec, tmp_path, fail_once=bad)
    cells = sweep_paths.cells_of(spec, paths)
    assert res.stored == len(cells) and not res.unfinished
    assert res.ran == len(cells) + len(paths[1].sizes)
    assert FakeRunner.runs[-len(paths[1].sizes):] == [(bad[0], bad[1], s, 1) for s in paths[1].sizes]


def test_the_initial_algorithms_cells_keep_the_flow_events(tmp_path):
    spec = spec_of(SPEC.replace("paths = 6", "paths = 1"))
    run_fake(spec, tmp_path)
    docs = sweep_store.CellStore(str(tmp_path / "store")).cells()
    bbr = [d for d in docs if d["candidate"] == "bbr"]
    assert bbr and all(d["flow"]["flow"]["mss"] == 1448 and d["flow"]["reports"]["n"] == 1 for d in bbr)
    assert all("flow" not in d for d in docs if d["candidate"] == "cubic")
    assert (tmp_path / "store" / "spec.toml").read_text() == spec.text
    lines = (tmp_path / "store" / "paths.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["path_id"] == docs[0]["path_id"]


def test_the_cli_refuses_a_bad_spec_with_status_2_naming_the_key(tmp_path, capsys):
    from ccswitch.cli import main

    p = tmp_path / "s.toml"
    p.write_text(SPEC.replace("paths = 6", "paths = -1"))
    with pytest.raises(SystemExit) as e:
        main(["sweep", str(p)])
    assert e.value.code == 2
    assert f"{p}: paths: must be an integer >= 1, got -1" in capsys.readouterr().err


def test_the_dry_run_lists_the_paths_without_running_anything(tmp_path, capsys):
    from ccswitch.cli import main

    p = tmp_path / "s.toml"
    p.write_text(SPEC)
    assert main(["sweep", str(p), "--dry-run", "--store", str(tmp_path / "store")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 7 and out[-1].startswith("6 paths (constant ")
    assert not (tmp_path / "store").exists()


STEP_SPEC = SPEC.replace('queue_bdp = { dist = "choice", values = [0.5, 1, 2] }', '''queue_bdp = { dist = "choice", values = [0.5, 1, 2] }
sizes = [3_000_000]
step = { share = 1.0, at_s = { dist = "uniform", min = 1, max = 3 }, delay_ms = 40, loss_downlink = { dist = "choice", values = [0.01, 0.02] } }
competitor = { share = 1.0, scheme = "native:cubic", lead_s = 1, seconds = 4 }''')


def test_step_and_competitor_draws_become_the_paths_schedule_and_flows():
    paths = sweep_paths.sample_paths(spec_of(STEP_SPEC), held_out={})
    constant = [p for p in paths if p.component == "constant"]
    assert constant
    for p in constant:
        first, step = p.params["schedule"]
        assert first["at_s"] == 0 and first["delay_ms"] == 0
        assert 1 <= step["at_s"] <= 3 and step["delay_ms"] == 40 and step["loss_downlink"] in (0.01, 0.02)
        rival, mine = p.params["flows"]
        assert rival["scheme"] == "native:cubic" and rival["start_s"] == 0
        # the competitor's file lasts lead_s + seconds at the link's mean rate (two digits)
        assert rival["file_bytes"] == pytest.approx(p.mean_mbps * 1e6 / 8 * 5, rel=0.05)
        assert mine == {"scheme": None, "start_s": 1.0, "count": 1, "file_bytes": None}
        assert p.sizes[0] == 3_000_000  # the component's own sizes
    for p in paths:
        if p.component == "cell":
            assert "schedule" not in p.params and "flows" not in p.params and p.sizes[0] == 1_200_000


def test_steps_are_drawn_after_the_static_parameters():
    plain = sweep_paths.sample_paths(spec_of(), held_out={})
    # a step on the trace component only: every path keeps its static parameters, and the
    # constant paths (no step declared) keep their ids
    stepped = SPEC.replace("queue_packets = 60", "queue_packets = 60\nstep = { share = 1.0, at_s = 2, delay_ms = 10, "
                           "loss_downlink = 0 }")
    again = sweep_paths.sample_paths(spec_of(stepped), held_out={})
    assert [p.component for p in plain] == [p.component for p in again]
    for a, b in zip(plain, again):
        assert {k: v for k, v in b.params.items() if k != "schedule"} == a.params
        assert (a.id == b.id) == (a.component == "constant")


@pytest.mark.parametrize("step,message", [
    ("step = { share = 0, at_s = 1, delay_ms = 0, loss_downlink = 0 }", "mix[0].step.share: required"),
    ("step = { share = 1, delay_ms = 0, loss_downlink = 0 }", "mix[0].step.at_s: required"),
    ("step = { share = 1, at_s = 1, delay_ms = 0, loss_downlink = 0, rate = 3 }", "mix[0].step.rate: unknown key"),
    ('competitor = { share = 1, scheme = "kernel:bbr" }', "mix[0].competitor.scheme: a competing flow must be native:ALG"),
    ('competitor = { share = 1, lead_s = -1 }', "mix[0].competitor.lead_s: must be a number of seconds in [0, 60]"),
])
def test_bad_steps_and_competitors_are_refused_naming_the_key(step, message):
    text = SPEC.replace('queue_bdp = { dist = "choice", values = [0.5, 1, 2] }',
                        'queue_bdp = { dist = "choice", values = [0.5, 1, 2] }\n' + step)
    with pytest.raises(sweep_spec.SweepError) as e:
        spec_of(text)
    assert message in str(e.value)


def test_a_held_out_sweep_spec_holds_out_every_path_it_draws(tmp_path):
    test_spec = tmp_path / "test.toml"
    test_spec.write_text(STEP_SPEC)
    train = spec_of(STEP_SPEC.replace("seed = 3", f'seed = 3\nheld_out = ["{test_spec}"]'))
    held = sweep_paths.held_out_paths(train)
    drawn = sweep_paths.sample_paths(spec_of(STEP_SPEC), held_out={})
    assert all(sweep_paths._comparable(p.params) in held for p in drawn)
    # the same seed as the held-out sweep: every path is drawn again, none repeats it
    again = sweep_paths.sample_paths(train)
    assert not {p.id for p in again} & {p.id for p in drawn}
    assert all(any(r.startswith("held-out path of test.toml") for r in p.redraws) for p in again)


def test_competitor_throughput_is_its_mean_over_the_flow_under_tests_time(tmp_path):
    (tmp_path / "probe").mkdir()
    lines = ["flow,t_s,mbps"]
    rival = [10.0] * 10 + [4.0] * 20 + [10.0] * 10  # 4 Mbit/s while the test flow ran, 1.0 s to 3.0 s
    mine = [0.0] * 10 + [6.0] * 20 + [0.0] * 10
    lines += [f"1,{i / 10:g},{v}" for i, v in enumerate(rival)] + [f"2,{i / 10:g},{v}" for i, v in enumerate(mine)]
    (tmp_path / "probe" / "000001.throughput.csv").write_text("\n".join(lines) + "\n")
    row = {"throughput_bins": "probe/000001.throughput.csv",
           "flows": [{"flow": 1, "role": "competitor", "start_s": 0.0, "tct_s": 4.0},
                     {"flow": 2, "role": "test", "start_s": 1.0, "tct_s": 2.0}]}
    assert sweep.competitor_mbps(row, str(tmp_path)) == pytest.approx(4.0)
    row["flows"][1]["tct_s"] = None
    assert sweep.competitor_mbps(row, str(tmp_path)) is None
