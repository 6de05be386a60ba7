"""Policies that name a learned model, loaded over the control interface (loadPolicy) of a real
`ccswitch-agent`: a corrupt, truncated or wrong-version model file, unknown feature names, and
classes that name unknown or full-API algorithms are refused with an error naming the policy,
the model file and the fault; the agent keeps serving and keeps its policy. The native module
refuses the same files with the same words. Needs the Rust binaries (make build)."""

import json
import os
import subprocess
import time

import pytest

from ccswitch import _native
from ccswitch.control import ControlClient, ControlError
from ccswitch.experiments import runner
from ccswitch.experiments.topology import python_agent_env

START_TIMEOUT_S = 10.0

MODEL = {
    "format": "ccswitch-model", "version": 1, "kind": "forest", "name": "rtt-split",
    "features": ["min_rtt_ms", "loss_rate"], "classes": ["bbr", "cubic", "hybla"],
    "window": {"kind": "first", "samples": 20}, "decide": {"min_samples": 8},
    "trees": [{"children_left": [1, -1, -1], "children_right": [2, -1, -1], "feature": [0, -2, -2],
               "threshold": [50.0, -2.0, -2.0], "value": [[0.4, 0.1, 0.5], [0, 0, 1], [0.8, 0.2, 0]]}],
    "provenance": {"test": "test_model_policy.py"},
}

POLICY = """
name = "learned"
initial = "cubic"
model = "{model}"
[window]
kind = "first"
samples = 20
"""


def with_changes(**changes):
    return json.dumps({**MODEL, **changes})


# (case, model file text, what the error must say after "model <path>: ")
BAD_MODELS = [
    ("truncated", json.dumps(MODEL)[:150], "not valid JSON (EOF while parsing"),
    ("corrupt", json.dumps(MODEL).replace('"trees": [{', '"trees": [{]'), "not valid JSON (key must be a string at line 1 column"),
    ("wrong-version", with_changes(version=2), "format version 2 is not supported: this agent reads version 1"),
    ("not-a-model", json.dumps({"format": "onnx"}), '"format" is "onnx", not "ccswitch-model"'),
    ("unknown-feature", with_changes(features=["min_rtt_ms", "loss_ratio"]), 'features[1] = "loss_ratio": unknown feature'),
    ("unknown-class", with_changes(classes=["bbr", "cubic", "hyblaa"]), 'classes[2] = "hyblaa": unknown algorithm'),
    ("full-api-class", with_changes(classes=["bbr", "cubic", "reno-datapath"]),
     'classes[2] = "reno-datapath": reno-datapath brings its own datapath program'),
]


def agent_binary():
    path = os.path.join(runner.bin_dir(), "ccswitch-agent")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not built (make build)")
    return path


@pytest.fixture
def control(tmp_path):
    sock, ctl, log_path = str(tmp_path / "agent.sock"), str(tmp_path / "control.sock"), str(tmp_path / "agent.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [agent_binary(), "--socket", sock, "--control-socket", ctl, "--algorithm", "reno"],
            stdout=log, stderr=subprocess.STDOUT, env=python_agent_env(dict(os.environ)),
        )
    deadline = time.monotonic() + START_TIMEOUT_S
    while not os.path.exists(ctl):
        assert proc.poll() is None and time.monotonic() < deadline, open(log_path).read()
        time.sleep(0.02)
    yield ctl, proc
    proc.kill()
    proc.wait()


def write(tmp_path, case, model_text):
    d = tmp_path / case
    (d / "models").mkdir(parents=True)
    (d / "models" / "m.json").write_text(model_text)
    policy = d / "p.toml"
    policy.write_text(POLICY.format(model="models/m.json"))
    return str(policy), str(d / "models" / "m.json")


def test_bad_models_are_refused_over_the_control_interface_and_the_agent_keeps_serving(control, tmp_path):
    ctl, proc = control
    good_policy, good_model = write(tmp_path, "good", json.dumps(MODEL))
    with ControlClient(ctl, timeout=5.0) as c:
        assert c.load_policy(good_policy) == "loaded policy learned (0 flows to choose for, 0 pinned)"
        assert c.policy()["origin"] == good_policy
        for case, text, fault in BAD_MODELS:
            policy, model = write(tmp_path, case, text)
            with pytest.raises(ControlError) as e:
                c.load_policy(policy)
            message = str(e.value)
            assert message.startswith(f'policy {policy}: model = "models/m.json": model {model}: {fault}'), (case, message)
            assert proc.poll() is None, f"the agent died on {case}"
            assert c.policy()["origin"] == good_policy, "a refused policy leaves the loaded one in force"
        # A window other than the model's is refused too.
        policy, model = write(tmp_path, "window", json.dumps(MODEL))
        with open(policy, "w") as f:
            f.write(POLICY.format(model="models/m.json").replace("samples = 20", "samples = 30"))
        with pytest.raises(ControlError, match=r"\[window\] kind = \"first\", samples = 30 differs from the window of model"):
            c.load_policy(policy)
        assert c.list_flows() == []


def test_the_native_module_refuses_the_same_files_in_the_same_words(tmp_path):
    for case, text, fault in BAD_MODELS:
        _, model = write(tmp_path, case, text)
        with pytest.raises(ValueError) as e:
            _native.load_model(model)
        assert str(e.value).startswith(f"model {model}: {fault}"), (case, str(e.value))
    _, model = write(tmp_path, "good", json.dumps(MODEL))
    m = _native.load_model(model)
    assert (m.name, m.features, m.classes, m.window, m.min_samples, m.trees) == (
        "rtt-split", ["min_rtt_ms", "loss_rate"], ["bbr", "cubic", "hybla"], {"kind": "first", "samples": 20}, 8, 1)
    assert m.predict([20.0, 0.0]) == ("hybla", [0.0, 0.0, 1.0])
    # 50.000001 is above the threshold 50 but its f32 is 50.0: scikit-learn sends it left.
    assert m.predict([50.000001, 0.0]) == ("hybla", [0.0, 0.0, 1.0])
    assert m.predict([50.00001, 0.0]) == ("bbr", [0.8, 0.2, 0.0])
    with pytest.raises(ValueError, match="takes 2 features"):
        m.predict([1.0])
