"""The arithmetic of `ccswitch bench ... --baseline` (no root, nothing run): samples read from
old and new `bench --json` outputs, schemes matched across the `ccswitch:` -> `kernel:` rename,
medians and after/before per figure."""

import argparse

import pytest

from ccswitch.experiments import bench_compare as bc

OLD_LOG = """starting the topology
ccswitch:reno wan-50ms rep 1: 4.1 s ok
ccswitch:cubic wan-50ms rep 1: 3.9 s ok
ccswitch:cubic wan-50ms rep 2: None s FAILED (timeout)
"""


def old_overhead(bpf, shim):
    # the old bench: no tct_s in its rows (its transfer times are in its log)
    return {"rows": [
        {"scheme": "ccswitch:reno", "acks": 9000, "bpf_ns_per_ack": bpf, "bpf_ns_per_ack_all_programs": bpf + 10,
         "shim_cpu_ms_per_10k_acks": shim, "agent_cpu_ms_per_10k_acks": 50.0, "integrity_failures": 0},
        {"scheme": "ccswitch:cubic", "acks": 9000, "bpf_ns_per_ack": bpf * 2, "bpf_ns_per_ack_all_programs": 0,
         "shim_cpu_ms_per_10k_acks": shim, "agent_cpu_ms_per_10k_acks": 60.0, "integrity_failures": 1},
    ]}


def new_overhead(bpf, tct):
    return {"rows": [
        {"scheme": "kernel:reno", "acks": 9000, "bpf_ns_per_ack": bpf, "shim_cpu_ms_per_10k_acks": 20.0,
         "agent_cpu_ms_per_10k_acks": 5.0, "tct_s": [tct, None]},
        {"scheme": "ovs:cubic", "acks": 100, "bpf_ns_per_ack": 900.0, "shim_cpu_ms_per_10k_acks": 1.0,
         "agent_cpu_ms_per_10k_acks": 1.0, "tct_s": [tct]},
    ]}


def test_old_and_new_spellings_of_a_scheme_are_the_same_subject():
    assert bc.scheme_key("ccswitch:reno") == bc.scheme_key("kernel:reno") == "kernel:reno"
    assert bc.scheme_key("switch:cubic") == bc.scheme_key("ovs:cubic") == "ovs:cubic"
    assert bc.scheme_key("kernel-cubic") == "kernel-cubic"
    assert bc.scheme_key("py:ccswitch.authoring.examples.reno:Reno") == "py:ccswitch.authoring.examples.reno:Reno"
    # stored before the examples moved to ccswitch/authoring/
    assert bc.scheme_key("py:ccswitch.examples.reno:Reno") == "py:ccswitch.authoring.examples.reno:Reno"


def test_transfer_times_come_from_the_json_or_else_from_the_log():
    old = bc.overhead_sample(old_overhead(300.0, 40.0), OLD_LOG)
    assert old[("kernel:reno", "transfer time")] == 4.1
    assert old[("kernel:cubic", "transfer time")] == 3.9  # the failed transfer is left out
    assert old[("kernel:reno", "BPF ns/ACK")] == 300.0
    assert old[("kernel:cubic", "BPF ns/ACK")] == 600.0
    new = bc.overhead_sample(new_overhead(100.0, 3.0), "kernel:reno wan-50ms rep 1: 99 s ok")
    assert new[("kernel:reno", "transfer time")] == 3.0  # tct_s in the row wins; None is dropped
    assert ("kernel:reno", "all programs ns/ACK") not in new


def test_medians_and_ratios_per_figure_matched_across_the_rename():
    before = [bc.overhead_sample(old_overhead(bpf, shim), OLD_LOG) for bpf, shim in ((300, 40), (100, 10), (200, 30))]
    after = [bc.overhead_sample(new_overhead(bpf, tct), "") for bpf, tct in ((50, 3.0), (150, 5.0))]
    rows = {(r["subject"], r["figure"]): r for r in bc.compare_rows(before, after)}
    bpf = rows[("kernel:reno", "BPF ns/ACK")]
    assert (bpf["before"], bpf["after"], bpf["n_before"], bpf["n_after"]) == (200, 100, 3, 2)
    assert bpf["ratio"] == pytest.approx(0.5)
    assert bpf["before_samples"] == [300, 100, 200] and bpf["unit"] == "ns"
    shim = rows[("kernel:reno", "shim CPU per 10k ACKs")]
    assert (shim["before"], shim["after"], shim["ratio"]) == (30, 20, pytest.approx(2 / 3))
    tct = rows[("kernel:reno", "transfer time")]
    assert (tct["before"], tct["after"], tct["ratio"]) == (4.1, 4.0, pytest.approx(4.0 / 4.1))
    # a scheme only one side ran has no ratio
    only_before = rows[("kernel:cubic", "BPF ns/ACK")]
    assert (only_before["after"], only_before["ratio"], only_before["n_after"]) == (None, None, 0)
    only_after = rows[("ovs:cubic", "BPF ns/ACK")]
    assert (only_after["before"], only_after["after"], only_after["ratio"]) == (None, 900, None)
    # subjects in first-seen order, figures in the benchmark's order
    order = [k for k in rows if k[0] == "kernel:reno"]
    assert [f for _s, f in order] == ["BPF ns/ACK", "shim CPU per 10k ACKs", "agent CPU per 10k ACKs", "transfer time"]


def test_authoring_figures_and_a_zero_before():
    doc = {"rust_us_per_report": 0.2, "python_us_per_report": 2.0, "python_to_rust_ratio": 10.0}
    before = [bc.authoring_sample(doc), bc.authoring_sample(dict(doc, python_us_per_report=4.0))]
    after = [bc.authoring_sample(dict(doc, python_us_per_report=1.0, rust_us_per_report=0.0))]
    rows = {r["figure"]: r for r in bc.compare_rows(before, after)}
    assert rows["Python"]["before"] == 3.0 and rows["Python"]["ratio"] == pytest.approx(1 / 3)
    assert rows["Rust"]["ratio"] == pytest.approx(0.0)
    assert bc.compare_rows([bc.authoring_sample(dict(doc, rust_us_per_report=0.0))],
                           [bc.authoring_sample(doc)])[0]["ratio"] is None


def test_markdown_table_shows_missing_values_and_counts():
    rows = bc.compare_rows([{("kernel:reno", "BPF ns/ACK"): 250.0}],
                           [{("kernel:reno", "BPF ns/ACK"): 125.0}, {("kernel:reno", "BPF ns/ACK"): 125.0},
                            {("kernel:cubic", "BPF ns/ACK"): 0.5}])
    md = bc.markdown_table(rows, "3ad5e6a", "ef981a0").splitlines()
    assert md[0].startswith("| subject | figure | unit | before (3ad5e6a) | after (ef981a0) | after/before |")
    assert md[2] == "| kernel:reno | BPF ns/ACK | ns | 250 | 125 | 0.50 | 1+2 |"
    assert md[3] == "| kernel:cubic | BPF ns/ACK | ns | — | 0.5 | — | 0+1 |"


def test_the_child_invocations_get_each_trees_own_arguments():
    args = argparse.Namespace(repetitions=None, scenario=None, reports=1000, rounds=3, rust="reno",
                              python="py:ccswitch.authoring.examples.reno:Reno")
    assert bc.bench_args("overhead", args) == ["--repetitions", "1"]
    assert bc.bench_args("authoring", args) == ["--reports", "1000", "--rounds", "3", "--rust", "reno",
                                                "--python", "py:ccswitch.authoring.examples.reno:Reno"]
    # a baseline checkout from before ccswitch/authoring/ names the example by its old path
    assert bc.bench_args("authoring", args, "/nonexistent-tree")[-1] == "py:ccswitch.examples.reno:Reno"
    build = bc.Build("before", "3ad5e6a", "/tmp/x", "/tmp/x/target/release")
    env = build.env()
    assert env["PYTHONPATH"].split(":")[0] == "/tmp/x/python"
    assert env["CCSWITCH_BIN_DIR"] == "/tmp/x/target/release"
