"""A path element whose delay and loss change on a schedule: `ccswitch-schedule`, an NFQUEUE
program in the root namespace, in series with the clients' mahimahi shells.

    client shells ──▶ root namespace FORWARD ──iptables NFQUEUE N──▶ ccswitch-schedule ──▶ server
                       (both directions of the server's address)     drop | hold, then accept

`ScheduleElement.start()` picks a queue number no other run of the host uses (under
`host_lock("nfqueue")`, until the program has bound it), starts the program, waits for its
`ready`, inserts two rules at the head of FORWARD (from the server = downlink, to the server
= uplink) and then starts the schedule's clock (SIGUSR1), so time 0 is when traffic can first
reach it. `stop()` (also run by the teardown) reads the rules' packet counters, deletes the
rules with the exact spec that inserted them, stops the program by its PID (it accepts every
packet it still holds, writes its statistics and exits) and loads the statistics.

The rules carry `--queue-bypass`: if the program is gone, packets pass undelayed instead of
being dropped by a queue nobody reads. Packets the kernel let through without the program
(bypass, or fail-open of a full queue) are `rule_packets - packets` in the statistics.

Uses the `iptables` on PATH (legacy here, as mahimahi needs: ENVIRONMENT.md).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from typing import List, Optional, Sequence

from ccswitch.topology.namespaces import Processes, Teardown, TopologyError, host_lock, run

#: Queue numbers this harness hands out (others on the host may use the low ones).
QUEUE_NUMBERS = range(1900, 65536)
NFQUEUE_PROC = "/proc/net/netfilter/nfnetlink_queue"
BINARY_NAME = "ccswitch-schedule"


def default_binary() -> str:
    """$CCSWITCH_BIN_DIR/ccswitch-schedule, else <repo>/target/release/ccswitch-schedule."""
    bin_dir = os.environ.get("CCSWITCH_BIN_DIR") or os.path.join(
        os.path.dirname(__file__), "..", "..", "..", "target", "release")
    return os.path.abspath(os.path.join(bin_dir, BINARY_NAME))


def bound_queues() -> set:
    """Queue numbers some process has bound (first column of the kernel's queue table)."""
    try:
        with open(NFQUEUE_PROC) as f:
            return {int(line.split()[0]) for line in f if line.strip()}
    except FileNotFoundError:
        raise TopologyError(f"{NFQUEUE_PROC} is missing: this kernel has no nfnetlink_queue") from None


def rule_packets(chain: str, matches) -> int:
    """Packets matched so far by the rules of `chain` (filter table) whose `iptables -S` line
    `matches` (a predicate on the line), from their counters."""
    total = 0
    for line in run(["iptables", "-v", "-S", chain]).stdout.splitlines():
        m = re.search(r" -c (\d+) \d+", line)
        if m and matches(line):
            total += int(m.group(1))
    return total


def queues_in_rules() -> set:
    """Queue numbers that some iptables rule (any chain of the filter table) sends to."""
    out = run(["iptables", "-S"]).stdout
    return {int(n) for n in re.findall(r"--queue-num (\d+)", out)}


def pick_queue() -> int:
    """The lowest queue number of QUEUE_NUMBERS neither bound nor named by a rule; call it
    under host_lock("nfqueue") and keep the lock until the queue is bound."""
    taken = bound_queues() | queues_in_rules()
    for n in QUEUE_NUMBERS:
        if n not in taken:
            return n
    raise TopologyError("no free NFQUEUE number left")


class ScheduleElement:
    """One `ccswitch-schedule` process and its iptables rules for one server address.

    `steps` are the schedule's steps as in the scenario key, e.g.
    `[{"at_s": 0, "delay_ms": 20, "loss_downlink": 0}, {"at_s": 5, "delay_ms": 150, "loss_downlink": 0.01}]`
    (validated by the program, which names a bad step and key). Files go to `work_dir`:
    schedule.json, the program's log and its statistics (stats.json).
    """

    def __init__(self, teardown: Teardown, processes: Processes, *, server_ip: str, steps: Sequence[dict],
                 work_dir: str, seed: int = 1, loss_draws: str = "packet", binary: Optional[str] = None,
                 chain: str = "FORWARD", name: str = "schedule") -> None:
        self._teardown = teardown
        self._procs = processes
        self.server_ip = server_ip
        self.steps = [dict(s) for s in steps]
        self.seed = seed
        self.loss_draws = loss_draws
        self.binary = binary or default_binary()
        self.chain = chain
        self.schedule_path = os.path.join(work_dir, f"{name}.json")
        self.log_path = os.path.join(work_dir, f"{name}.log")
        self.stats_path = os.path.join(work_dir, f"{name}-stats.json")
        self.queue: Optional[int] = None
        self.proc: Optional[subprocess.Popen] = None
        self._rules: List[List[str]] = []
        #: The program's statistics, plus `rule_packets` (what the rules queued), once stopped.
        self.stats: Optional[dict] = None

    def rule_specs(self, queue: int) -> List[List[str]]:
        """The two rule specs (without chain and position): downlink, then uplink."""
        target = ["-j", "NFQUEUE", "--queue-num", str(queue), "--queue-bypass"]
        return [["-s", f"{self.server_ip}/32"] + target, ["-d", f"{self.server_ip}/32"] + target]

    def start(self) -> None:
        if not os.access(self.binary, os.X_OK):
            raise TopologyError(f"{self.binary} is not built (cargo build --release -p ccswitch-schedule)")
        with open(self.schedule_path, "w", encoding="utf-8") as f:
            json.dump({"steps": self.steps}, f)
        self._teardown.push(f"stop {BINARY_NAME}", self.stop)
        with host_lock("nfqueue"):
            self.queue = pick_queue()
            cmd = [self.binary, "--queue", str(self.queue), "--server-ip", self.server_ip,
                   "--schedule", self.schedule_path, "--stats", self.stats_path,
                   "--seed", str(self.seed), "--loss-draws", self.loss_draws, "--start-on-sigusr1"]
            try:
                self.proc = self._procs.start_and_wait(
                    BINARY_NAME, cmd, self.log_path, self._ready, timeout_s=10.0,
                    waiting_for=f"'ready' (bound to NFQUEUE {self.queue})")
            except TopologyError as e:
                raise TopologyError(f"{e}: {self._last_log_line()}") from None
        for spec in self.rule_specs(self.queue):
            run(["iptables", "-I", self.chain, "1"] + spec)
            self._rules.append(spec)
        os.kill(self.proc.pid, signal.SIGUSR1)  # time 0 of the schedule

    def _ready(self) -> bool:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return "ready" in f.read().split("\n")
        except FileNotFoundError:
            return False

    def _last_log_line(self) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                lines = [l for l in f.read().splitlines() if l.strip()]
            errors = [l for l in lines if l.startswith(f"{BINARY_NAME}:")]
            return (errors or lines or ["(empty log)"])[-1]
        except FileNotFoundError:
            return "(no log)"

    def rule_packets(self) -> int:
        """Packets our rules have sent to the queue so far (from their counters)."""
        return rule_packets(self.chain, lambda line: f"--queue-num {self.queue} " in line + " ")

    def stop(self) -> Optional[dict]:
        """Remove the rules, stop the program, load its statistics; a second call does nothing.

        The rules go first: packets the kernel still queues when the program closes its queue
        are dropped by the kernel, so nothing may be queued by then."""
        rule_packets = None
        problems = []
        if self._rules:
            try:
                rule_packets = self.rule_packets()
            except TopologyError as e:  # the rules must go all the same
                problems.append(f"reading the rules' counters: {e}")
        while self._rules:
            spec = self._rules.pop()
            cp = run(["iptables", "-D", self.chain] + spec, check=False)
            if cp.returncode != 0:
                problems.append(f"iptables -D {self.chain} {' '.join(spec)}: {cp.stderr.strip()}")
        if self.proc is not None:
            proc, self.proc = self.proc, None
            self._procs.stop(proc, sig=signal.SIGTERM, grace_s=10.0)
            if proc.returncode != 0:
                problems.append(f"{BINARY_NAME} exited with status {proc.returncode}: {self._last_log_line()}")
            elif os.path.exists(self.stats_path):
                with open(self.stats_path, encoding="utf-8") as f:
                    self.stats = json.load(f)
                self.stats["rule_packets"] = rule_packets
        if problems:
            raise TopologyError("; ".join(problems))
        return self.stats

