"""One reader of a run directory, used by every analysis (grid, handover, report, the learner's
dataset): which file a run's transfers come from, its stored scenario, its summary and the
agent events of each transfer. The files are results.py's (its docstring lists them).

Where the transfers come from (`RunDirectory.rows`):

  - a finished run: transfers.parquet. The runner writes it at the end of a run (and of a run
    stopped by an error), from the same rows the log holds, sorted by transfer number, with
    every column of results.TRANSFER_COLUMNS; it is what `experiments/measured/` keeps, often
    alone. The Parquet schema has no place for what only the log carries per transfer (the
    transfer number, the event slice `events`, `events_note`, `flow`, the client's address,
    the shims' statistics), so when transfers.jsonl is beside it those fields are joined onto
    the Parquet rows, matched by the transfer's identity (unit, client, scheme, repetition,
    file size, start time);
  - an interrupted run: transfers.jsonl, the log appended as each transfer ends, which has
    every transfer that finished. A Parquet file beside it that does not hold the log's
    transfers is an earlier invocation's (a resumed run was cut off again) and is stale: the
    log wins. That is how "finished" is told: the Parquet holds exactly the log's transfers.

Either way every row passes once through compat.upgrade_row (today's scheme and field
names). Reading the log alone when both are present would also work today, but then a run
directory's table would be its most fragile file, typed by JSON instead of the schema, and
the Parquet-only directories would be read another way; reading the Parquet alone would lose
the event slices of every finished run.

The scenario is the run's stored copy, read with `stored=True` (old spellings such as
`ccswitch:` schemes are read as today's, not refused). An agent scheme's transfer names its
slice of the agent's events (`flows/NNN-LABEL.jsonl`, relative to the run directory, one JSON
event per line: experiments/events.py describes them); `events_of(row)` reads it strictly.

Anything that makes a path unusable as a run directory, or a file of one unreadable, raises
RunDirectoryError, whose message starts with the file (or directory) at fault.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from functools import cached_property
from typing import Dict, List, Optional, Sequence

from . import results
from .compat import upgrade_event
from .scenario import Scenario, ScenarioError, load_scenario

TRANSFERS_PARQUET = "transfers.parquet"
TRANSFERS_LOG = "transfers.jsonl"
SCENARIO = "scenario.toml"
SUMMARY = "summary.json"


class RunDirectoryError(ValueError):
    """A path that is not a run directory, or a file of one that cannot be read; the message
    names the file."""


# ----------------------------------------------------------------------- agent events

#: What each line of an events file may be (experiments/events.py describes their fields).
EVENT_KINDS = ("flow", "report", "handover", "close")


def parse_event_line(line: str, where: str) -> Optional[dict]:
    """One line of an events file; None for a blank line; RunDirectoryError naming `where`
    (FILE:LINE) for anything that is not an event object."""
    line = line.strip()
    if not line:
        return None
    try:
        ev = json.loads(line)
    except json.JSONDecodeError as e:
        raise RunDirectoryError(f"{where}: not JSON: {e}") from None
    if isinstance(ev, dict):
        upgrade_event(ev)
    if not isinstance(ev, dict) or ev.get("event") not in EVENT_KINDS:
        raise RunDirectoryError(f"{where}: not an event (\"event\" must be one of {', '.join(EVENT_KINDS)})")
    for k in ("t_us", "datapath", "sid"):
        if not isinstance(ev.get(k), int) or isinstance(ev.get(k), bool):
            raise RunDirectoryError(f"{where}: {ev['event']} event without an integer {k!r}")
    return ev


def read_events(path: str) -> List[dict]:
    """All events of a file (an agent's or a transfer's slice), strictly: a bad line raises."""
    out = []
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for i, line in enumerate(f, 1):
                ev = parse_event_line(line, f"{path}:{i}")
                if ev is not None:
                    out.append(ev)
    except FileNotFoundError:
        raise RunDirectoryError(f"{path}: events file not found") from None
    except OSError as e:
        raise RunDirectoryError(f"{path}: cannot read events: {e.strerror}") from None
    return out


# ----------------------------------------------------------------------- the directory

#: What identifies a transfer in both transfer files (the Parquet has no transfer number).
ROW_IDENTITY = ("unit", "client", "scheme", "repetition", "file_bytes", "started_at")


def _identity(row: Dict) -> tuple:
    return tuple(row.get(k) for k in ROW_IDENTITY)


def join_log_fields(table: Sequence[Dict], log: Sequence[Dict]) -> Optional[List[Dict]]:
    """The Parquet rows `table` with the fields only the log's rows have, when both hold the
    same transfers (each Parquet row matched to a log row of the same identity); None when
    they do not, i.e. the Parquet is not the log's run."""
    if len(table) != len(log):
        return None
    by_identity: Dict[tuple, List[Dict]] = defaultdict(list)
    for r in log:
        by_identity[_identity(r)].append(r)
    joined = []
    for r in table:
        same = by_identity.get(_identity(r))
        if not same:
            return None
        extra = same.pop(0)
        joined.append(dict(r, **{k: v for k, v in extra.items() if k not in r}))
    return joined


class RunDirectory:
    """A directory written by `ccswitch run` (or a trimmed copy such as experiments/measured/*).
    Constructing it checks only that the path is a directory; each property reads its file on
    first use and raises RunDirectoryError naming it."""

    def __init__(self, path) -> None:
        self.path = os.fspath(path)
        if not os.path.isdir(self.path):
            raise RunDirectoryError(f"{self.path}: not a directory")

    def __repr__(self) -> str:
        return f"RunDirectory({self.path!r})"

    def file(self, name: str) -> str:
        """A file of the run directory by its name relative to it."""
        return os.path.join(self.path, name)

    def has(self, name: str) -> bool:
        return os.path.exists(self.file(name))

    @property
    def has_transfers(self) -> bool:
        """Whether the directory has a transfer file at all (a run that recorded anything)."""
        return self.has(TRANSFERS_PARQUET) or self.has(TRANSFERS_LOG)

    # -- transfers

    def _read(self, name: str) -> List[Dict]:
        path = self.file(name)
        read = results.read_transfers_parquet if name == TRANSFERS_PARQUET else results.read_jsonl
        try:
            return read(path)
        except OSError as e:
            raise RunDirectoryError(f"{path}: cannot read: {e.strerror or e}") from None
        except Exception as e:  # pyarrow's errors, a bad JSON line (read_jsonl names the row)
            text = str(e)
            raise RunDirectoryError(text if text.startswith(path) else f"{path}: cannot read: {text}") from None

    @cached_property
    def _transfers(self):
        """(rows, the file they came from, whether the run finished)."""
        has_table, has_log = self.has(TRANSFERS_PARQUET), self.has(TRANSFERS_LOG)
        if not has_table and not has_log:
            raise RunDirectoryError(f"{self.path}: not a run directory (no {TRANSFERS_LOG} or {TRANSFERS_PARQUET})")
        if not has_log:
            return self._read(TRANSFERS_PARQUET), TRANSFERS_PARQUET, True
        log = self._read(TRANSFERS_LOG)
        if has_table:
            joined = join_log_fields(self._read(TRANSFERS_PARQUET), log)
            if joined is not None:
                return joined, TRANSFERS_PARQUET, True
        return log, TRANSFERS_LOG, False

    @property
    def rows(self) -> List[Dict]:
        """The run's transfers in today's names: the finished run's Parquet (with the log's
        per-transfer fields), else the interrupted run's log (see the module docstring).
        The same list on every call: copy a row before changing it."""
        return self._transfers[0]

    @property
    def source(self) -> str:
        """The file `rows` came from: transfers.parquet or transfers.jsonl."""
        return self._transfers[1]

    @property
    def finished(self) -> bool:
        """Whether the run wrote its Parquet table of these transfers (it ended, possibly on
        an error, rather than being cut off)."""
        return self._transfers[2]

    # -- scenario and summary

    @cached_property
    def scenario(self) -> Scenario:
        """The run's stored copy of its scenario (old spellings read as today's)."""
        path = self.file(SCENARIO)
        if not os.path.exists(path):
            raise RunDirectoryError(f"{self.path}: not a run directory (no {SCENARIO})")
        try:
            return load_scenario(path, check_files=False, stored=True)
        except ScenarioError as e:
            raise RunDirectoryError(str(e)) from None

    @cached_property
    def summary(self) -> Dict:
        """summary.json: the per (client, scheme) statistics and the run's metadata, written
        when the run ended."""
        path = self.file(SUMMARY)
        try:
            with open(path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            raise RunDirectoryError(f"{self.path}: no {SUMMARY} (not a finished run directory)") from None
        except OSError as e:
            raise RunDirectoryError(f"{path}: cannot read: {e.strerror}") from None
        except json.JSONDecodeError as e:
            raise RunDirectoryError(f"{path}: not JSON: {e}") from None

    # -- events

    def events_path(self, row: Dict) -> Optional[str]:
        """The path of a transfer's event slice, None when its row names none (native schemes,
        flows the runner did not find, runs stored without their slices)."""
        return self.file(row["events"]) if row.get("events") else None

    def has_events(self, row: Dict) -> bool:
        """Whether the transfer's event slice is named and on disk."""
        path = self.events_path(row)
        return path is not None and os.path.exists(path)

    def events_of(self, row: Dict) -> List[dict]:
        """A transfer's events in file order (today's names), strictly: a row without a slice,
        a missing slice or a bad line raises RunDirectoryError naming it."""
        path = self.events_path(row)
        if path is None:
            what = f"transfer {row['transfer']}" if row.get("transfer") is not None else "the transfer"
            raise RunDirectoryError(f"{self.path}: {what} ({row.get('scheme')}) has no events "
                                    f"({row.get('events_note') or 'not an agent scheme'})")
        return read_events(path)
