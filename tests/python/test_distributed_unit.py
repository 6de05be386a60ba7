"""Resuming runs and the pieces of distributed execution that need no cluster, no root and
no network: unit keys, the plan of a resumed run, moving a scenario between checkouts,
unpacking a unit's results, and host-wide sysctl holding."""

import io
import json
import os
import tarfile

import pytest

from ccswitch.experiments import distributed, errors, results, runner
from ccswitch.experiments import units as run_units
from ccswitch.experiments.scenario import loads_scenario
from ccswitch.topology import namespaces

from test_runner_unit import LOOP, fake_runner

TRACE_SC = """
name = "t"
schemes = ["native:cubic", "kernel:reno"]
repetitions = 2
[[clients]]
name = "lte"
delay_ms = 25
link = {{ uplink = "{root}/traces/x.up", downlink = "{root}/traces/x.down" }}
file_bytes = 1000
"""


def keys(sc):
    return [run_units.unit_key(sc, *u) for u in sc.transfers()]


def test_a_unit_key_names_every_parameter_a_transfer_runs_with():
    sc = loads_scenario(LOOP, check_files=False)
    ks = keys(sc)
    assert len(set(ks)) == len(ks) == 6
    assert ks == keys(loads_scenario(LOOP, check_files=False))
    for old, new in (("delay_ms = 10", "delay_ms = 11"), ("file_bytes = 1000", "file_bytes = 1001"),
                     ('name = "c"', 'name = "d"')):
        assert not set(ks) & set(keys(loads_scenario(LOOP.replace(old, new), check_files=False))), new
    sc.timeout_s += 1
    assert not set(ks) & set(keys(sc))
    # more repetitions keep the first ones' units
    more = keys(loads_scenario(LOOP.replace("repetitions = 2", "repetitions = 3"), check_files=False))
    assert set(ks) < set(more)


def test_a_unit_key_does_not_depend_on_where_the_checkout_is(monkeypatch):
    a = loads_scenario(TRACE_SC.format(root="/src/a"), check_files=False)
    b = loads_scenario(TRACE_SC.format(root="/src/b"), check_files=False)
    monkeypatch.setattr(run_units, "repo_root", lambda: "/src/a")
    ka = keys(a)
    monkeypatch.setattr(run_units, "repo_root", lambda: "/src/b")
    assert keys(b) == ka
    assert keys(a) != ka  # /src/a is not this checkout: its traces are other files


def test_a_scenario_moves_to_the_workers_checkout():
    sc = loads_scenario(TRACE_SC.format(root="/src/a"), check_files=False)
    sc.source = "/src/a/experiments/t.toml"
    moved = distributed.rebase_scenario(sc, "/src/a", "/w/ccswitch")
    assert moved.clients[0].link.uplink_trace == "/w/ccswitch/traces/x.up"
    assert moved.source == "/w/ccswitch/experiments/t.toml"
    assert moved.clients[0].delay_ms == 25 and [s.label for s in moved.schemes] == ["native:cubic", "kernel:reno"]
    other = loads_scenario(TRACE_SC.format(root="/usr/share/mahimahi"), check_files=False)
    assert distributed.rebase_scenario(other, "/src/a", "/w").clients[0].link.uplink_trace == "/usr/share/mahimahi/traces/x.up"


def test_an_interrupted_run_resumes_without_rerunning_a_finished_transfer(tmp_path, monkeypatch):
    from ccswitch.topology.namespaces import TopologyError

    text = LOOP.replace('"kernel:py:m:Broken", ', '"native:reno", ')
    calls = []

    def prepare_then_fail(scheme):
        calls.append(scheme.label)
        if len(calls) == 4:
            raise TopologyError("the bridge went away")

    r, ran = fake_runner(tmp_path, monkeypatch, prepare_then_fail, text)
    with pytest.raises(errors.RunError):
        r.run()
    first = results.read_jsonl(tmp_path / "out" / "transfers.jsonl")
    assert len(first) == 3
    r2, ran2 = fake_runner(tmp_path, monkeypatch, lambda s: None, text)
    rows = r2.run()
    assert len(ran2) == 3
    assert [x["transfer"] for x in rows] == [1, 2, 3, 4, 5, 6]
    assert rows[:3] == first
    assert len({x["unit"] for x in rows}) == 6
    assert len(results.read_transfers_parquet(tmp_path / "out" / "transfers.parquet")) == 6
    # and a third invocation finds nothing to do
    r3, ran3 = fake_runner(tmp_path, monkeypatch, lambda s: None, text)
    assert len(r3.run()) == 6 and ran3 == []


def test_rows_without_a_verdict_run_again_and_are_kept_aside(tmp_path):
    sc = loads_scenario(LOOP, check_files=False)
    units = list(sc.transfers())
    out = tmp_path / "out"
    out.mkdir()

    def row(u, **kw):
        r = runner.Runner.new_row(*u)
        r.update(dict(dict(tct_s=1.0, sha256_ok=True, unit=run_units.unit_key(sc, *u)), **kw))
        return r

    earlier = [row(units[0]), row(units[1], error="not run: x failed earlier: y"),
               row(units[2], error="ccswitch-agent exited", agent_died="ccswitch-agent exited", tct_s=None),
               row(units[3], error="curl: (28) Operation timed out", curl_exit=28, tct_s=None)]
    (out / "transfers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in earlier) + '{"client": "c", "sch')
    plan = run_units.plan_run(sc, str(out))
    assert [r["unit"] for r in plan.kept] == [earlier[0]["unit"], earlier[3]["unit"]]
    assert [n for n, _ in plan.todo] == [2, 3, 5, 6]
    assert plan.superseded == earlier[1:3]


def test_a_directory_of_another_scenario_is_not_resumed(tmp_path):
    sc = loads_scenario(LOOP, check_files=False)
    other = loads_scenario(LOOP.replace("delay_ms = 10", "delay_ms = 20"), check_files=False)
    u = next(iter(other.transfers()))
    r = dict(runner.Runner.new_row(*u), unit=run_units.unit_key(other, *u), sha256_ok=True)
    (tmp_path / "transfers.jsonl").write_text(json.dumps(r) + "\n")
    with pytest.raises(errors.RunError, match=r"1 transfer\(s\) that are not this scenario's.*another --out"):
        run_units.plan_run(sc, str(tmp_path))


def test_a_bad_line_inside_a_log_is_an_error_but_a_cut_last_line_is_not(tmp_path):
    p = tmp_path / "t.jsonl"
    p.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    assert results.read_jsonl(p) == [{"a": 1}, {"a": 2}]
    p.write_text('{"a": 1}\nxx\n{"a": 2}\n')
    with pytest.raises(ValueError, match="row 2"):
        results.read_jsonl(p)


def archive(files):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_a_units_results_join_the_run_directory_and_a_second_attempt_keeps_the_first(tmp_path):
    row = {"transfer": 7, "events": "flows/007-c-1000-kernel_reno-rep1.jsonl", "ovs_stats": "ovs/c.json",
           "ovs_log": "logs/ovs-1.log", "handover_events": []}
    res = {"rows": [row], "host": "h1", "archive": archive({
        "flows/007-c-1000-kernel_reno-rep1.jsonl": "{}\n", "ovs/c.json": "{}", "logs/ovs-1.log": "log",
        "events/agent-001.jsonl": "{}\n", "handovers.jsonl": '{"transfer": 7}\n'})}
    out = tmp_path / "run"
    out.mkdir()
    [got] = distributed.unpack_unit(str(out), "k1", res)
    assert got["events"] == "flows/007-c-1000-kernel_reno-rep1.jsonl" and (out / got["events"]).read_text() == "{}\n"
    assert got["ovs_stats"] == "ovs/c.json" and (out / "ovs" / "c.json").exists()
    assert got["ovs_log"] == "units/k1/logs/ovs-1.log" and (out / got["ovs_log"]).read_text() == "log"
    assert (out / "units" / "k1" / "events" / "agent-001.jsonl").exists()
    assert (out / "handovers.jsonl").read_text() == '{"transfer": 7}\n'
    [again] = distributed.unpack_unit(str(out), "k1", res)
    assert again["ovs_log"] == "units/k1.2/logs/ovs-1.log" and (out / "units" / "k1" / "logs" / "ovs-1.log").exists()
    assert sorted(os.listdir(out / "units")) == ["k1", "k1.2"]


def test_labs_default_to_one_per_two_cores():
    assert [distributed.default_slots(c) for c in (1, 2, 3, 8)] == [1, 1, 1, 4]
    cmd = distributed.worker_command("tcp://h:8786", 3)
    assert cmd[1:] == ["worker", "tcp://h:8786", "--nworkers", "1", "--nthreads", "3", "--resources", "lab=3"]


@pytest.fixture
def fake_sysctls(tmp_path, monkeypatch):
    values = {"x": "0"}
    monkeypatch.setattr(namespaces, "SYSCTL_REGISTRY", str(tmp_path / "reg.json"))
    monkeypatch.setattr(namespaces, "read_sysctl", lambda n: values[n])
    monkeypatch.setattr(namespaces, "write_sysctl", lambda n, v: values.__setitem__(n, v))
    monkeypatch.setattr(namespaces, "host_lock", lambda what: __import__("contextlib").nullcontext())
    return values


def test_a_global_sysctl_is_put_back_by_the_last_run_that_held_it(fake_sysctls, tmp_path):
    reg = tmp_path / "reg.json"
    t = namespaces.Teardown()
    namespaces.SysctlGuard(t).set("x", "1")
    assert fake_sysctls["x"] == "1"
    # another run of this host (pid 1 stands for it: it is alive) holds it too
    doc = json.loads(reg.read_text())
    doc["x"]["holders"].append(1)
    reg.write_text(json.dumps(doc))
    t.run()
    assert fake_sysctls["x"] == "1", "restored from under a run still holding it"
    assert json.loads(reg.read_text())["x"] == {"original": "0", "holders": [1]}
    # a run that takes it now sees the original of the first, not the value in force
    t2 = namespaces.SysctlGuard(namespaces.Teardown())
    t2.set("x", "1")
    assert json.loads(reg.read_text())["x"]["original"] == "0"


def test_a_holder_that_died_does_not_keep_a_sysctl(fake_sysctls, tmp_path):
    reg = tmp_path / "reg.json"
    reg.write_text(json.dumps({"x": {"original": "0", "holders": [2 ** 22 + 12345]}}))
    fake_sysctls["x"] = "1"  # left by a run that was killed
    t = namespaces.Teardown()
    namespaces.SysctlGuard(t).set("x", "1")
    assert json.loads(reg.read_text())["x"] == {"original": "1", "holders": [os.getpid()]}
    t.run()
    assert fake_sysctls["x"] == "1" and json.loads(reg.read_text()) == {}


def test_a_unit_key_changes_with_the_content_of_every_file_the_unit_reads(tmp_path):
    (tmp_path / "m.json").write_text('{"v": 1}')
    (tmp_path / "p.policy.toml").write_text('name = "p"\ninitial = "bbr"\nmodel = "m.json"\n')
    (tmp_path / "t.up").write_text("1\n")
    (tmp_path / "t.down").write_text("1\n")
    (tmp_path / "myalg.py").write_text("X = 1\n")
    text = f"""
name = "files"
schemes = ["kernel:policy:p.policy.toml", "kernel:py:myalg:Alg"]
[[clients]]
name = "c"
link = {{ uplink = "t.up", downlink = "t.down" }}
file_bytes = 1000
"""
    src = tmp_path / "s.toml"
    src.write_text(text)
    sc = loads_scenario(text, source=str(src))
    before = keys(sc)
    assert keys(sc) == before
    # retraining rewrites the model the policy names: the policy's units are new ones
    (tmp_path / "m.json").write_text('{"v": 2}')
    after_model = keys(sc)
    assert after_model[0] != before[0] and after_model[1] == before[1]
    (tmp_path / "myalg.py").write_text("X = 2\n")
    after_module = keys(sc)
    assert after_module[1] != after_model[1] and after_module[0] == after_model[0]
    (tmp_path / "t.down").write_text("2\n")
    assert not set(keys(sc)) & set(after_module)
