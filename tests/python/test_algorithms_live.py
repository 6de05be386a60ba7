"""Every algorithm of the library drives real transfers on the kernel datapath.

One run of `ccswitch run` over a lossy 40 ms path with every `kernel:` algorithm the agent
lists (simple and full API): each transfer must arrive intact, and the agent's log must show
the flow created under that algorithm and its reports answered, so a scheme silently falling
back to the kernel's own congestion control would fail here.
"""

import json
import os
import re

from ccswitch.agent.algorithms import list_algorithms
from ccswitch.experiments import results
from test_integration import require_machine, start_cli

SCENARIO = """
name = "every-algorithm"
repetitions = 1
timeout_s = 60
schemes = [{schemes}]
[[clients]]
name = "lossy-40ms"
delay_ms = 20
loss_downlink = 0.005
link = {{ mbps = 24 }}
queue_packets = 80
file_bytes = 1_500_000
"""

#: Reports a 1.5 MB transfer at 40 ms RTT must at least produce (one per RTT for ~0.5 s+).
MIN_REPORTS = 8


def test_every_algorithm_completes_transfers_under_its_own_control(tmp_path, monkeypatch):
    require_machine()
    # Debug logs record every answered report (a flow's closing line may come after the
    # agent was already replaced by the next scheme's).
    monkeypatch.setenv("CCSWITCH_LOG_LEVEL", "debug")
    names = [a["name"] for a in list_algorithms()]
    assert len(names) >= 10
    path = tmp_path / "s.toml"
    path.write_text(SCENARIO.format(schemes=", ".join(f'"kernel:{n}"' for n in names)))
    out = tmp_path / "out"
    proc = start_cli([str(path), "--json", "--out", str(out)])
    stdout, stderr = proc.communicate(timeout=900)
    assert proc.returncode == 0, stderr[-3000:]
    rows = results.read_transfers_parquet(out / "transfers.parquet")
    assert sorted(r["scheme"] for r in rows) == sorted(f"kernel:{n}" for n in names)
    for r in rows:
        assert r["error"] is None and r["sha256_ok"], r
    logs = os.listdir(out / "logs")
    for name in names:
        agent_logs = [l for l in logs if re.fullmatch(rf"agent-\d+-{re.escape(name)}\.log", l)]
        assert agent_logs, f"no agent log for {name}: {logs}"
        text = "".join(open(out / "logs" / l).read() for l in agent_logs)
        created = re.findall(rf"flow created.*algorithm={re.escape(name)}(\s|$)", text)
        assert created, f"{name}: no flow created under it:\n{text[-2000:]}"
        answered = len(re.findall(r"report answered", text))
        assert answered >= MIN_REPORTS, f"{name}: {answered} reports answered"
    assert json.loads(stdout)["rows"]
