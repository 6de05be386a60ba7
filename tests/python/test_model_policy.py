"""Policies that name a learned model, loaded over the operator interface (loadPolicy) of a real
`ccswitch-agent`: a corrupt, truncated or wrong-version model file, unknown feature names, and
classes that name unknown or full-API algorithms are refused with an error naming the policy,
the model file and the fault; the agent keeps serving and keeps its policy. The native module
refuses the same files with the same words. Needs the Rust binaries (make build)."""

import json

import pytest

from ccswitch import _native
from ccswitch.agent.operator import OperatorError
from agent_process import Agent

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


@pytest.fixture
def agent(tmp_path):
    a = Agent(tmp_path, ["--algorithm", "reno"])
    yield a
    a.stop()


def write(tmp_path, case, model_text):
    d = tmp_path / case
    (d / "models").mkdir(parents=True)
    (d / "models" / "m.json").write_text(model_text)
    policy = d / "p.toml"
    policy.write_text(POLICY.format(model="models/m.json"))
    return str(policy), str(d / "models" / "m.json")


def test_bad_models_are_refused_over_the_control_interface_and_the_agent_keeps_serving(agent, tmp_path):
    good_policy, good_model = write(tmp_path, "good", json.dumps(MODEL))
    with agent.client() as c:
        assert c.load_policy(good_policy) == "loaded policy learned (0 flows to choose for, 0 pinned)"
        assert c.policy()["origin"] == good_policy
        for case, text, fault in BAD_MODELS:
            policy, model = write(tmp_path, case, text)
            with pytest.raises(OperatorError) as e:
                c.load_policy(policy)
            message = str(e.value)
            assert message.startswith(f'policy {policy}: model = "models/m.json": model {model}: {fault}'), (case, message)
            assert agent.alive(), f"the agent died on {case}"
            assert c.policy()["origin"] == good_policy, "a refused policy leaves the loaded one in force"
        # A window other than the model's is refused too.
        policy, model = write(tmp_path, "window", json.dumps(MODEL))
        with open(policy, "w") as f:
            f.write(POLICY.format(model="models/m.json").replace("samples = 20", "samples = 30"))
        with pytest.raises(OperatorError, match=r"\[window\] kind = \"first\", samples = 30 differs from the window of model"):
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
