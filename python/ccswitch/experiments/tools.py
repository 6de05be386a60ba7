"""The external tools a transfer goes through, as the runner drives and reads them: the
mahimahi shell stack's command line (`mahimahi_command`), curl's error messages
(`curl_error`, `transfer_error`) and the lines of `ss` in the server namespace
(`parse_ss_cc`: the congestion control a socket runs; `parse_ss_peer`: the client's address
as the server sees it)."""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from .events import format_peer
from .scenario import Client


#: curl's exit status for "operation timed out" (--max-time reached).
CURL_TIMEOUT_EXIT = 28


def mahimahi_command(client: Client, up_trace: str, down_trace: str, downlink_log: Optional[str] = None) -> List[str]:
    """The mahimahi shell stack for a client, ending just before the inner command;
    `downlink_log`: mm-link's per-packet log of the downlink (arrivals, departures with their
    queueing delay, delivery opportunities), a cross-check of the probe's figures."""
    cmd: List[str] = []
    if client.delay_ms > 0:
        cmd += ["mm-delay", str(client.delay_ms)]
    if client.loss_uplink > 0:
        cmd += ["mm-loss", "uplink", repr(client.loss_uplink)]
    if client.loss_downlink > 0:
        cmd += ["mm-loss", "downlink", repr(client.loss_downlink)]
    cmd += ["mm-link", up_trace, down_trace]
    if client.queue_packets is not None:
        for d in ("uplink", "downlink"):
            cmd += [f"--{d}-queue=droptail", f"--{d}-queue-args=packets={client.queue_packets}"]
    if downlink_log is not None:
        cmd.append(f"--downlink-log={downlink_log}")
    return cmd


_CURL_ERROR_RE = re.compile(r"^curl: \((\d+)\) (.*)$", re.M)


_MM_COMMAND_RE = re.compile(r"`(\S+)[^`']*'")


def curl_error(stderr: str) -> Optional[Tuple[int, str]]:
    """curl's own error from the transfer's stderr: (exit status, "curl: (28) Operation timed
    out after ..."). Through mahimahi the exit status of the whole stack is mahimahi's (1), and
    its stderr ends with mahimahi's "Died on ..." lines, so curl's line is what says why."""
    m = _CURL_ERROR_RE.search(stderr)
    if m is None:
        return None
    return int(m.group(1)), f"curl: ({m.group(1)}) {m.group(2).strip()}"


def transfer_error(rc: Optional[int], stderr: str) -> str:
    """What to record for a failed mahimahi+curl invocation: curl's message if it printed one,
    else the first line of the rest (mahimahi's "Died on ..." with each quoted command line
    shortened to its program), else the exit status."""
    found = curl_error(stderr)
    if found is not None:
        return found[1]
    for line in stderr.splitlines():
        line = line.strip()
        if line:
            return f"exit {rc}: " + _MM_COMMAND_RE.sub(lambda m: f"`{m.group(1)}'", line)[:300]
    return f"exit {rc}: no message"


_SS_CC_RE = re.compile(r"^\s*([a-z][a-z0-9_]*)\s+(?:wscale|rto|ts |sack|ecn)")


_SS_ADDR_RE = re.compile(r"(\[[0-9a-fA-F:.%]+\]|[0-9]+(?:\.[0-9]+){3}):([0-9]+)")


def parse_ss_cc(text: str) -> Optional[str]:
    """Congestion control name from `ss -tin` output (first token of the info line)."""
    for line in text.splitlines():
        m = _SS_CC_RE.match(line)
        if m:
            return m.group(1)
    return None


def parse_ss_peer(text: str) -> Optional[str]:
    """The peer ("ip:port") of the first socket in `ss -Htin` output: the second address of
    its first line (local address first, then the peer)."""
    for line in text.splitlines():
        found = _SS_ADDR_RE.findall(line)
        if len(found) >= 2:
            ip, port = found[1]
            return format_peer(ip.strip("[]"), port)
    return None
