"""`ccswitch bench scale`: what many concurrent flows cost the kernel datapath.

N long-lived TCP connections run from a mahimahi delay shell (`mm-delay D`, run as mmuser)
to `ccswitch-loadgen serve` in the server namespace, whose congestion control is ccswitch,
under the agent (`--algorithm`, Cubic by default) and the kernel shim. Each flow is read at a
fixed rate by `ccswitch-loadgen fetch`, so flow control holds its sender to that rate and every
flow has a realistic ACK clock. The connections open over a ramp; once all are open the
figures are read over a steady window of `seconds`:

- ACKs/s and BPF ns per ACK: run count and time of this shim's `ccsw_cong_control`
  (`kernel.bpf_stats_enabled=1`; one run is one ACK);
- reports/s, ACKs folded in BPF, ACKs under the fallback, ring records lost: this shim's
  per-CPU stats map;
- shim and agent CPU as % of one core (user + system, /proc);
- report -> directive latency p50/p99/p99.9, all and urgent (loss/timeout) reports: the
  shim's histogram, logged when it stops;
- memory per flow: growth of the shim's and agent's resident set from before the ramp to
  the window, over N, and the BPF socket storage of one flow;
- flows: opened, still receiving at the end, failed.

Only this run's programs and maps are read (by the ids its shim logs), so another ccswitch
datapath on the machine does not mix in.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from typing import Dict, List, Optional

from .bench import cpu_seconds
from .runner import MM_USER, Interrupted, RunError, Runner, default_out_dir, torn_down_on_exit
from .scenario import loads_scenario
from .topology import log, run

LOADGEN = "ccswitch-loadgen"
LOADGEN_PORT = 9000

SCENARIO = """
name = "scale"
repetitions = 1
schemes = ["ccswitch:{algorithm}"]
timeout_s = 60
agent_settle_s = 0.5
[[clients]]
name = "scale"
delay_ms = {delay_ms}
link = {{ mbps = 100 }}
file_bytes = 10_000
"""


def scenario(algorithm: str, delay_ms: int):
    """The run's set-up as a scenario: the agent scheme, and the client path (its link is
    not used: the flows cross only `mm-delay`)."""
    return loads_scenario(SCENARIO.format(algorithm=algorithm, delay_ms=delay_ms))


def _shim_prog_ids(log_path: str) -> List[int]:
    with open(log_path, errors="replace") as f:
        found = re.findall(r"prog_ids=\[([0-9, ]+)\]", f.read())
    if not found:
        raise RunError(f"the kernel shim did not log its program ids; see {log_path}")
    # the log is appended to: this shim's line is the last
    return [int(x) for x in found[-1].split(",")]


def _bpftool(*args: str):
    return json.loads(run(["bpftool", "--json", *args]).stdout or "null")


class ShimBpf:
    """The BPF programs and stats map of one kernel shim, found by the ids it logged."""

    def __init__(self, log_path: str) -> None:
        progs = {p["name"]: p for p in (_bpftool("prog", "show", "id", str(i)) for i in _shim_prog_ids(log_path))}
        if "ccsw_cong_control" not in progs:
            raise RunError(f"no ccsw_cong_control among the shim's programs: {sorted(progs)}")
        self.cong_control_id = progs["ccsw_cong_control"]["id"]
        maps = [_bpftool("map", "show", "id", str(m)) for m in progs["ccsw_cong_control"].get("map_ids", [])]
        by_name = {m["name"]: m for m in maps}
        if "ccsw_stats" not in by_name:
            raise RunError(f"no ccsw_stats map among {sorted(by_name)}")
        self.stats_map_id = by_name["ccsw_stats"]["id"]
        storage = [m for m in maps if m.get("type") == "sk_storage"]
        self.sk_storage_value_bytes = storage[0].get("bytes_value") if storage else None

    def snapshot(self) -> Dict[str, float]:
        prog = _bpftool("prog", "show", "id", str(self.cong_control_id))
        out = {"run_cnt": prog.get("run_cnt", 0), "run_time_ns": prog.get("run_time_ns", 0)}
        for entry in _bpftool("map", "dump", "id", str(self.stats_map_id)):
            # bpftool's BTF view of the per-CPU struct ccsw_stats (the plain one is bytes)
            for per_cpu in (entry.get("formatted") or {}).get("values", []):
                for k, v in (per_cpu.get("value") or {}).items():
                    out[k] = out.get(k, 0) + int(v)
        return out


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _log_fields(log_path: str, message: str) -> Dict[str, float]:
    """The numeric key=value fields of the last log line carrying `message`."""
    with open(log_path, errors="replace") as f:
        lines = [l for l in f if message in l]
    if not lines:
        raise RunError(f"no {message!r} line in {log_path}")
    fields = {}
    for k, v in re.findall(r"(\w+)=([-0-9.]+)\b", lines[-1]):
        fields[k] = float(v)
    return fields


def scale(flows: int, seconds: float, rate_kbps: float, delay_ms: int, out_dir: str, *,
          algorithm: str = "cubic", ramp_s: Optional[float] = None, quiet: bool = False) -> Dict[str, object]:
    if flows < 1 or seconds <= 0 or rate_kbps <= 0 or delay_ms < 0:
        raise RunError("--flows, --seconds and --rate-kbps must be positive, --delay-ms >= 0")
    ramp_s = ramp_s if ramp_s is not None else max(1.0, flows / 2000)
    sc = scenario(algorithm, delay_ms)
    r = Runner(sc, out_dir, quiet=quiet)
    say = (lambda m: None) if quiet else log
    with torn_down_on_exit(r.teardown):
        r.setup()
        loadgen = os.path.join(r.bin_dir, LOADGEN)
        if not os.access(loadgen, os.X_OK):
            raise RunError(f"{loadgen} not found (build the workspace: cargo build --release)")
        r.sysctls.set("kernel.bpf_stats_enabled", "1")
        scheme = sc.schemes[0]
        r.prepare_scheme(scheme)
        shim, agent = r.daemons.shim, r.daemons.agent
        bpf = ShimBpf(os.path.join(r.log_dir, "kernel-shim.log"))
        server = f"{r.ns.server_ip}:{LOADGEN_PORT}"
        r.procs.start_and_wait(
            "ccswitch-loadgen serve", r.ns.exec_cmd([loadgen, "serve", "--bind", server]),
            os.path.join(r.log_dir, "loadgen-serve.log"),
            lambda: bool(run(r.ns.exec_cmd(["ss", "-Htln", f"sport = :{LOADGEN_PORT}"])).stdout.strip()),
            timeout_s=10, waiting_for=f"listening on {server}")
        rss0 = {"shim": rss_kib(shim.pid), "agent": rss_kib(agent.pid)}
        fetch_s = seconds + 3.0
        cmd = (["runuser", "-u", MM_USER, "--", "mm-delay", str(delay_ms), loadgen, "fetch",
                "--connect", server, "--flows", str(flows), "--rate-bps", str(int(rate_kbps * 1000)),
                "--seconds", f"{fetch_s:g}", "--ramp-ms", str(int(ramp_s * 1000))])
        say(f"{flows} flows at {rate_kbps:g} kbit/s each over {2 * delay_ms} ms, ramp {ramp_s:g} s, "
            f"window {seconds:g} s, {algorithm}")
        fetch = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 start_new_session=True)
        r.procs.track("ccswitch-loadgen fetch", fetch)
        # Every flow open and past its first round trips.
        time.sleep(ramp_s + 1.0 + 4 * delay_ms / 1000)
        if fetch.poll() is not None:
            raise RunError(f"ccswitch-loadgen fetch exited early ({fetch.returncode}): {fetch.stderr.read().strip()}")
        t0, b0 = time.monotonic(), bpf.snapshot()
        cpu0 = {"shim": cpu_seconds(shim.pid), "agent": cpu_seconds(agent.pid)}
        rss1 = {"shim": rss_kib(shim.pid), "agent": rss_kib(agent.pid)}
        time.sleep(seconds)
        t1, b1 = time.monotonic(), bpf.snapshot()
        cpu1 = {"shim": cpu_seconds(shim.pid), "agent": cpu_seconds(agent.pid)}
        out, err = fetch.communicate(timeout=fetch_s + 60)
        r.procs.forget(fetch)
        if fetch.returncode != 0:
            raise RunError(f"ccswitch-loadgen fetch failed ({fetch.returncode}): {err.strip()}")
        load = json.loads(out.strip().splitlines()[-1])
        shim_log = os.path.join(r.log_dir, "kernel-shim.log")
        r.daemons.stop()  # the shim logs its totals and latency on the way out
        totals = _log_fields(shim_log, "shim totals")
        latency = _log_fields(shim_log, "report to directive latency")

    dt = t1 - t0
    d = {k: b1.get(k, 0) - b0.get(k, 0) for k in b1}
    acks = d["run_cnt"]
    result = {
        "datapath": "kernel",
        "algorithm": algorithm,
        "flows": flows,
        "rate_kbps_per_flow": rate_kbps,
        "rtt_ms": 2 * delay_ms,
        "window_s": round(dt, 3),
        "flows_opened": load["opened"],
        "flows_receiving": load["receiving"],
        "flows_failed": load["failed"],
        "goodput_mbps": load["steady_bits_per_s"] / 1e6,
        "acks_per_s": acks / dt,
        "bpf_ns_per_ack": d["run_time_ns"] / acks if acks else None,
        "acks_folded_per_s": d.get("acks_folded", 0) / dt,
        "reports_per_s": d.get("reports", 0) / dt,
        "acks_fallback_in_window": d.get("acks_fallback", 0),
        "ring_records_lost": d.get("drops", 0),
        "shim_cpu_pct": 100 * (cpu1["shim"] - cpu0["shim"]) / dt,
        "agent_cpu_pct": 100 * (cpu1["agent"] - cpu0["agent"]) / dt,
        "answer_p50_us": latency.get("p50_us"),
        "answer_p99_us": latency.get("p99_us"),
        "answer_p999_us": latency.get("p999_us"),
        "urgent_answers": latency.get("urgent"),
        "urgent_p99_us": latency.get("urgent_p99_us"),
        "shim_kib_per_flow": (rss1["shim"] - rss0["shim"]) / flows,
        "agent_kib_per_flow": (rss1["agent"] - rss0["agent"]) / flows,
        "bpf_socket_storage_bytes_per_flow": bpf.sk_storage_value_bytes,
        "reports_dropped": totals.get("reports_dropped", 0),
        "agent_errors": totals.get("agent_errors", 0),
        "loadgen_errors": load["errors"],
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "scale.json"), "w") as f:
        json.dump(result, f, indent=1)
    return result


def print_scale(x: Dict[str, object]) -> None:
    def fmt(v):
        return f"{v:,.1f}" if isinstance(v, float) else str(v)
    width = max(len(k) for k in x)
    for k, v in x.items():
        print(f"  {k:<{width}}  {fmt(v)}", file=sys.stderr)
