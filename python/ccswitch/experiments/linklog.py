"""mm-link's per-packet log (`--downlink-log=FILE`), read as a cross-check of the packet probe.

mahimahi 0.98 writes, after `#` header lines (`# base timestamp: MS` among them), one event per
line: `MS + BYTES` a packet arrived at the link's queue, `MS - BYTES DELAY` a packet left it
after DELAY ms in the queue, `MS # BYTES` a delivery opportunity. It logs no drops and no flow:
packets the queue dropped are those that arrived and never left, and the delays are of every
packet on the link, which for a lone flow are its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List


@dataclass
class LinkLog:
    arrivals: int
    departures: int
    arrived_bytes: int
    departed_bytes: int
    #: queueing delay of each departed packet, ms
    queue_delays_ms: List[int]

    @property
    def dropped(self) -> int:
        """Packets that entered the queue and never left it (dropped, or still queued at the end)."""
        return self.arrivals - self.departures


def read_link_log(path: str) -> LinkLog:
    arrivals = departures = arrived = departed = 0
    delays: List[int] = []
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("#"):
                continue
            fields = line.split()
            if len(fields) < 3:
                continue
            kind, size = fields[1], int(fields[2])
            if kind == "+":
                arrivals += 1
                arrived += size
            elif kind == "-":
                departures += 1
                departed += size
                delays.append(int(fields[3]))
    return LinkLog(arrivals, departures, arrived, departed, delays)
