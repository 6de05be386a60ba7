"""`ccswitch-probe` for one transfer: per-packet timestamps at both ends of the emulated path.

The probe (tools/probe) stamps every data segment the servers send at their veth's TC egress
and matches it at the TC ingress of the client's innermost mahimahi namespace, so each flow's
one-way delay (propagation plus queueing) is measured the same way for every scheme, per flow
even when several flows share the link; it also keeps the servers' TCP_INFO counters at the end
of each connection. Its files are read by `experiments/measurements.py`.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from typing import Optional, Sequence, Tuple

from .namespaces import Processes, TopologyError

PROBE_BIN = "ccswitch-probe"


class PacketProbe:
    """One `ccswitch-probe` process per transfer: `start` returns once its programs are
    attached (it printed `ready`); `stop` makes it drain, detach and write its files."""

    def __init__(self, procs: Processes, bin_dir: str, log_dir: str) -> None:
        self.procs = procs
        self.bin = os.path.join(bin_dir, PROBE_BIN)
        self.log_dir = log_dir
        self.proc: Optional[subprocess.Popen] = None
        self.prefix: Optional[str] = None

    def start(self, prefix: str, receiver_pid: int, senders: Sequence[Tuple[str, str]], server_ips: Sequence[str],
              ports: Sequence[int], timeout_s: float = 20.0) -> None:
        """`senders`: (namespace, device) of each server veth; files go to PREFIX.packets.bin
        and PREFIX.flows.json."""
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
        cmd = [self.bin, "--receiver-pid", str(receiver_pid), "--ports", ",".join(str(p) for p in ports),
               "--packets", prefix + ".packets.bin", "--flows", prefix + ".flows.json"]
        for ip in server_ips:
            cmd += ["--server-ip", ip]
        for ns, dev in senders:
            cmd += ["--sender", f"{ns}:{dev}"]
        log_path = os.path.join(self.log_dir, "probe.log")
        self.prefix = prefix
        with open(log_path, "a") as log_file:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log_file,
                                         start_new_session=True)
        self.procs.track(PROBE_BIN, self.proc)
        deadline = time.monotonic() + timeout_s
        line = b""
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            if not ready:
                self.stop()
                raise TopologyError(f"{PROBE_BIN} did not attach within {timeout_s:g} s; see {log_path}")
            chunk = os.read(self.proc.stdout.fileno(), 256)
            if not chunk:
                status = self.proc.wait()
                self.procs.forget(self.proc)
                self.proc = None
                raise TopologyError(f"{PROBE_BIN} exited with status {status} before it was ready: "
                                    f"{_last_line(log_path)}")
            line += chunk
        if line.strip() != b"ready":
            self.stop()
            raise TopologyError(f"{PROBE_BIN} said {line.strip()[:200]!r} instead of ready; see {log_path}")

    def stop(self) -> Optional[int]:
        """SIGTERM, then wait for it to write its files; its exit status (None if not running)."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        self.procs.stop(proc, sig=signal.SIGTERM, grace_s=15.0)
        return proc.returncode

    def files_written(self) -> bool:
        return bool(self.prefix) and all(os.path.exists(self.prefix + s) for s in (".packets.bin", ".flows.json"))


def _last_line(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            lines = [x.strip() for x in f if x.strip()]
        return lines[-1] if lines else "no message"
    except OSError:
        return "no log"

