"""The line a run prints per finished transfer: `[12/48] clean-20ms kernel:reno rep 3: 3.91 s
ok`, with the algorithms a flow handed over between and the ovs shim's figures."""

from __future__ import annotations

import os

from ..topology import bridges as _ovs
from .scenario import Client, display_label
from .statistics import python_troubles


def transfer_status(row: dict) -> str:
    """The verdict on one transfer for the progress line: "ok", "ok (73 on_report errors, 2
    python timeouts)",
    "ERROR curl: (28) ...", "SHA-256 MISMATCH"."""
    if row["error"]:
        status = f"ERROR {row['error']}"
    elif not row["sha256_ok"]:
        status = "SHA-256 MISMATCH"
    else:
        status = "ok"
    return status + python_troubles(row)


def progress_line(i: int, total: int, client: Client, row: dict, out_dir: str) -> str:
    """`[12/48] clean-20ms kernel:reno rep 3: 3.91 s ok`, with the handovers the flow made and
    the ovs shim's figures when there are any."""
    tct = f"{row['tct_s']:.2f} s" if row["tct_s"] is not None else "-"
    sz = f" {row['file_bytes']}B" if len(client.file_sizes) > 1 else ""
    return (f"[{i}/{total}] {client.name}{sz} {display_label(row['scheme'])} rep {row['repetition']}: {tct} "
            f"{transfer_status(row)}{_ovs_note(row, out_dir)}{_algorithms_note(row)}")


def _ovs_note(row: dict, out_dir: str) -> str:
    if not row.get("ovs_stats"):
        return ""
    doc = _ovs.load_stats(os.path.join(out_dir, row["ovs_stats"]))
    if doc is None:
        return ""
    f = _ovs.transfer_figures(doc)
    return (f" [ovs: {f['acks_rewritten']} ACKs rewritten, {f['dupacks_hidden']} dupACKs hidden, "
            f"{f['retransmissions']} retx, {f['fallbacks']} fallbacks]")


def _algorithms_note(row: dict) -> str:
    if row.get("handover_events"):
        return f" [{' > '.join(str(a) for a in row['algorithms'])}]"
    if row.get("events_note"):
        return f" [events: {row['events_note']}]"
    return ""
