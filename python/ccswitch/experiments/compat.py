"""Names of earlier versions and what they are called now, in one place, with the functions
that apply them. Stored results (experiments/measured/, sweep stores) were written with the
old names and keep being read; a scenario, spec or command line that writes an old name is
refused with the new one.

- scheme kinds: `ccswitch:ALG` ran on the kernel datapath, `switch:ALG` on the Open vSwitch
  one (`RENAMED_KINDS`); `py:` algorithm modules that moved (`RENAMED_PY_MODULES`);
  `canonical_scheme` reads both, `renamed_scheme_message` refuses them.
- scenario keys (`RENAMED_KEYS`): `renamed_scenario_keys`, for the scenario loader.
- transfer row fields (`RENAMED_ROW_FIELDS`): `upgrade_row`, for every reader of stored
  transfers (transfers.parquet, transfers.jsonl).
- agent events (`RENAMED_EVENT_KINDS`, `RENAMED_EVENT_FIELDS`): `upgrade_event`, for every
  reader of an events file (a handover was logged as "switch").
- sweep datapaths (`DATAPATH_RENAMED`): refused in a spec, read in a stored cell;
  `DATAPATH_SPELLINGS`: every spelling of a datapath in a benchmark's scheme label.

This module imports nothing of the package: every reader may use it.
The command line's own renames (subcommands: cli.RENAMED_COMMANDS; the operator's environment
variable: agent/operator.py) stay with the command line, which refuses them.
"""

from __future__ import annotations

from typing import Any, Dict, List, Tuple

#: Scheme kinds of earlier versions and what they are called now (`ccswitch:ALG` ran on the
#: kernel datapath, `switch:ALG` on the Open vSwitch one). A scenario or command line that
#: writes them is refused with the new spelling; stored results that carry them are read
#: with `canonical_scheme`.
RENAMED_KINDS = {"ccswitch": "kernel", "switch": "ovs"}
#: Python modules of `py:` algorithms that moved (dotted prefix as stored -> today's).
RENAMED_PY_MODULES = {"ccswitch.examples.": "ccswitch.authoring.examples."}
#: Scenario keys of earlier versions and what they are called now.
RENAMED_KEYS = {"switch_server_cc": "ovs_server_cc"}
#: Row fields of earlier versions and their names now: the ovs datapath's shim outputs, and
#: each handover of the flow (a "switch" before algorithm changes were called handovers).
RENAMED_ROW_FIELDS = {"switch_stats": "ovs_stats", "switch_log": "ovs_log", "switch_exit": "ovs_exit",
                      "switches": "handover_events"}
#: Event kinds of earlier agents and their names now (a handover was logged as "switch", and
#: the close event counted "switches"); events files in stored runs keep being read.
RENAMED_EVENT_KINDS = {"switch": "handover"}
RENAMED_EVENT_FIELDS = {"switches": "handovers"}
#: Datapath names of earlier versions (sweep cells stored by them say "switch").
DATAPATH_RENAMED = {"switch": "ovs"}
#: old datapath spellings of scheme labels -> the current ones
DATAPATH_SPELLINGS = {"ccswitch": "kernel", "kernel": "kernel", "switch": "ovs", "ovs": "ovs"}


def canonical_scheme(text: Any) -> Any:
    """A scheme as stored by any version, in today's spelling: `ccswitch:ALG` -> `kernel:ALG`,
    `switch:ALG` -> `ovs:ALG`, `py:ccswitch.examples.M:C` -> `py:ccswitch.authoring.examples.M:C`;
    anything else unchanged. For readers of stored results and
    events (runs in experiments/measured/ were written with the old spellings)."""
    if isinstance(text, str) and ":" in text:
        for old, new in RENAMED_PY_MODULES.items():
            text = text.replace(f"py:{old}", f"py:{new}")
        kind, rest = text.split(":", 1)
        if kind in RENAMED_KINDS:
            return f"{RENAMED_KINDS[kind]}:{rest}"
    return text


def renamed_scheme_message(text: str, where: str = "schemes") -> str:
    """Why an old spelling (`ccswitch:bbr`, `switch:policy:mystique`) is refused, naming the new one."""
    kind, rest = text.split(":", 1)
    return (f'{where}: scheme "{text}": renamed, write "{canonical_scheme(text)}" '
            '(the kernel datapath is "kernel:", the Open vSwitch one "ovs:")')


def old_py_module_spelling(scheme: str) -> str:
    """A scheme with today's `py:` modules spelled as before they moved (for running a
    baseline checkout older than the move)."""
    for old, new in RENAMED_PY_MODULES.items():
        scheme = scheme.replace(f"py:{new}", f"py:{old}")
    return scheme


def renamed_scenario_keys(data: Dict[str, Any], stored: bool) -> Tuple[Dict[str, Any], List[str]]:
    """A scenario document with its old keys handled: in a stored run's copy (`stored`) read
    as today's (unless today's is there too); otherwise dropped and each named in a problem
    line. Returns (the document, a copy when anything changed; the problem lines)."""
    problems = []
    for old, new in RENAMED_KEYS.items():
        if old in data:
            data = dict(data)
            value = data.pop(old)
            if not stored:
                problems.append(f"{old}: renamed, write {new} (the datapath in front of the server is \"ovs\")")
            else:
                data.setdefault(new, value)
    return data, problems


def upgrade_row(row: Dict) -> Dict:
    """A transfer row as stored by any version, in today's names (the row itself, updated):
    schemes `ccswitch:ALG` / `switch:ALG` become `kernel:ALG` / `ovs:ALG`, `switch_*` fields
    `ovs_*` (RENAMED_ROW_FIELDS). Every reader of
    stored transfers (transfers.parquet, transfers.jsonl) passes its rows through this."""
    if "scheme" in row:
        row["scheme"] = canonical_scheme(row["scheme"])
    for old, new in RENAMED_ROW_FIELDS.items():
        if old in row and new not in row:
            row[new] = row.pop(old)
    return row


def upgrade_event(ev: dict) -> dict:
    """An event as written by any agent, in today's names (the event itself, updated)."""
    kind = ev.get("event")
    if kind in RENAMED_EVENT_KINDS:
        ev["event"] = RENAMED_EVENT_KINDS[kind]
    for old, new in RENAMED_EVENT_FIELDS.items():
        if old in ev and new not in ev:
            ev[new] = ev.pop(old)
    return ev
