"""Mahimahi link traces: generation of constant-rate and stepped-rate traces.

Mahimahi's trace format: one line per delivery opportunity of one 1500-byte packet, holding
the millisecond (an integer) at which the opportunity occurs. Several lines may carry the
same millisecond (several packets may leave in one ms). The file repeats: mm-link takes the
*last* timestamp as the period, so a trace of N lines ending at T ms delivers N packets every
T ms, i.e. N * 1500 * 8 / T kbit/s.

The generators below place opportunity i (1-based) at the first integer millisecond t at
which the cumulative delivery curve C(t) = sum of rate * time reaches i packets. That spreads
opportunities as evenly as integer milliseconds allow (never more than one packet ahead of or
behind the ideal curve) and puts the last one exactly at the end of the period.

For a constant trace to have *exactly* the requested average rate, the number of packets in
one period (rate * duration / 12 kbit) must be an integer. When it is not, the period is
stretched to the smallest multiple of the requested duration for which it is (for example
10 Mbit/s over 1000 ms is 833.3 packets, so the trace covers 3000 ms and 2500 packets).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Iterable, List, Sequence, Tuple

#: Bytes per delivery opportunity (mahimahi's MTU-sized packet).
PACKET_BYTES = 1500
#: kbit carried by one opportunity: 1500 B * 8 / 1000.
PACKET_KBIT = Fraction(PACKET_BYTES * 8, 1000)
#: Longest period a constant trace may be stretched to for an exact rate (10 minutes).
MAX_EXACT_PERIOD_MS = 600_000
#: Longest trace we agree to generate (one hour), to catch typos like 5000000.
MAX_TRACE_MS = 3_600_000


class TraceError(ValueError):
    """A bad trace specification (message says which value and why)."""


@dataclass(frozen=True)
class Segment:
    """A stretch of constant rate: `mbps` Mbit/s for `duration_ms` ms."""

    mbps: Fraction
    duration_ms: int


def _parse_rate(value, what: str) -> Fraction:
    try:
        rate = Fraction(str(value).strip())
    except (ValueError, ZeroDivisionError):
        raise TraceError(f"{what}: not a number: {value!r}") from None
    if rate <= 0:
        raise TraceError(f"{what}: rate must be > 0 Mbit/s, got {value}")
    if rate > 100_000:
        raise TraceError(f"{what}: rate {value} Mbit/s is implausibly high (max 100000)")
    return rate.limit_denominator(1_000_000)


def _parse_duration(value, what: str) -> int:
    try:
        text = str(value).strip()
        duration = int(text)
    except ValueError:
        raise TraceError(f"{what}: duration must be an integer number of ms, got {value!r}") from None
    if duration <= 0:
        raise TraceError(f"{what}: duration must be > 0 ms, got {value}")
    if duration > MAX_TRACE_MS:
        raise TraceError(f"{what}: duration {duration} ms exceeds the maximum {MAX_TRACE_MS} ms")
    return duration


def parse_steps(spec: str) -> List[Segment]:
    """Parse "MBPS:MS,MBPS:MS,..." (e.g. "24:5000,6:5000,48:5000") into segments."""
    if not isinstance(spec, str) or not spec.strip():
        raise TraceError("steps: empty specification; expected MBPS:MS[,MBPS:MS...]")
    segments = []
    for index, part in enumerate(spec.split(",")):
        what = f"steps item {index + 1} ({part.strip()!r})"
        fields = part.strip().split(":")
        if len(fields) != 2 or not fields[0].strip() or not fields[1].strip():
            raise TraceError(f"{what}: expected MBPS:MS, e.g. 24:5000")
        segments.append(Segment(_parse_rate(fields[0], what), _parse_duration(fields[1], what)))
    total = sum(s.duration_ms for s in segments)
    if total > MAX_TRACE_MS:
        raise TraceError(f"steps: total duration {total} ms exceeds the maximum {MAX_TRACE_MS} ms")
    return segments


def _opportunities(segments: Sequence[Segment]) -> List[int]:
    """Timestamps (ms) of delivery opportunities for piecewise-constant rates.

    Opportunity i lies at ceil(C^-1(i)) where C is the cumulative packet count. The total is
    rounded to a whole number of packets; the last timestamp is forced to the end of the
    period so that mahimahi's repetition period is the requested one.
    """
    stamps: List[int] = []
    start_ms = 0
    cum_start = Fraction(0)  # packets delivered (ideally) before this segment
    total_ms = sum(s.duration_ms for s in segments)
    total_pkts = sum((s.mbps * s.duration_ms / PACKET_KBIT for s in segments), Fraction(0))
    n_total = max(1, round(total_pkts))
    next_i = 1
    for seg in segments:
        per_ms = seg.mbps / PACKET_KBIT  # packets per millisecond
        cum_end = cum_start + per_ms * seg.duration_ms
        limit = n_total if seg is segments[-1] else min(n_total, math.floor(cum_end))
        while next_i <= limit:
            t = start_ms + math.ceil((next_i - cum_start) / per_ms)
            stamps.append(min(t, total_ms))
            next_i += 1
        start_ms += seg.duration_ms
        cum_start = cum_end
    stamps[-1] = total_ms
    return stamps


def constant_trace(mbps, duration_ms=1000) -> Tuple[List[int], int]:
    """Timestamps for a constant rate; returns (stamps, period_ms).

    The period is `duration_ms`, stretched to a multiple of it when needed for the rate to
    be exact (see module docstring).
    """
    rate = _parse_rate(mbps, "mbps")
    duration = _parse_duration(duration_ms, "duration-ms")
    pkts = rate * duration / PACKET_KBIT
    period = duration
    if pkts.denominator != 1:
        stretched = duration * pkts.denominator
        if stretched <= MAX_EXACT_PERIOD_MS:
            period = stretched
    return _opportunities([Segment(rate, period)]), period


def step_trace(spec: str) -> Tuple[List[int], int]:
    """Timestamps for a stepped-rate spec "MBPS:MS,..."; returns (stamps, period_ms)."""
    segments = parse_steps(spec)
    return _opportunities(segments), sum(s.duration_ms for s in segments)


def average_mbps(stamps: Sequence[int]) -> float:
    """Average rate of a trace (as mahimahi replays it), in Mbit/s."""
    if not stamps:
        raise TraceError("empty trace")
    return len(stamps) * PACKET_BYTES * 8 / (stamps[-1] / 1000) / 1e6


def format_trace(stamps: Iterable[int]) -> str:
    return "".join(f"{t}\n" for t in stamps)


def write_trace(path, stamps: Sequence[int]) -> None:
    """Write a trace file atomically (temp name, then rename)."""
    import os

    path = os.fspath(path)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(format_trace(stamps))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


def read_trace(path) -> List[int]:
    stamps = []
    with open(path) as f:
        for lineno, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                stamps.append(int(line))
            except ValueError:
                raise TraceError(f"{path}:{lineno}: not an integer millisecond: {line!r}") from None
    if not stamps:
        raise TraceError(f"{path}: empty trace")
    return stamps


# ---------------------------------------------------------------------------- CLI


def add_cli(subparsers) -> None:
    p = subparsers.add_parser(
        "trace",
        help="generate a mahimahi link trace",
        description="Generate a mahimahi trace (one line per 1500-byte delivery opportunity).",
    )
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    c = kinds.add_parser("constant", help="constant rate")
    c.add_argument("--mbps", required=True, help="rate in Mbit/s (> 0)")
    c.add_argument("--duration-ms", default="1000", help="period of the trace (default 1000)")
    c.add_argument("-o", "--output", required=True, help="output file")
    c.set_defaults(func=_cli_trace, parser=c)
    s = kinds.add_parser("step", help="piecewise-constant rate")
    s.add_argument("--steps", required=True, help='"MBPS:MS,MBPS:MS,...", e.g. "24:5000,6:5000,48:5000"')
    s.add_argument("-o", "--output", required=True, help="output file")
    s.set_defaults(func=_cli_trace, parser=s)


def _cli_trace(args) -> int:
    import sys

    try:
        if args.kind == "constant":
            stamps, period = constant_trace(args.mbps, args.duration_ms)
        else:
            stamps, period = step_trace(args.steps)
    except TraceError as e:
        args.parser.error(str(e))  # exits with status 2
    write_trace(args.output, stamps)
    print(
        f"wrote {args.output}: {len(stamps)} opportunities over {period} ms "
        f"(average {average_mbps(stamps):.6g} Mbit/s)",
        file=sys.stderr,
    )
    return 0
