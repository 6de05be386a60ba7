"""Plots of a run's flows over time (`ccswitch plot-flows`): window, bytes in flight and
throughput, with the handovers marked; or (`--compare`) one figure per path with a line per
scheme, to see an algorithm beside another. Throughput over time is the bytes the reports
acknowledge (`acked_bytes` is per report) per 250 ms bin of the agent's clock.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from ..experiments import results
from ..experiments.scenario import display_label
from ..experiments.rundir import RunDirectory, RunDirectoryError
from ..experiments.events import FlowEvents, flow_of

#: Throughput bins of the plots.
PLOT_BIN_S = 0.25


# ----------------------------------------------------------------------- series


@dataclass
class Series:
    """A flow's reports as time series, t in seconds since the flow was created."""

    t: List[float]
    cwnd: List[int]
    inflight: List[int]
    acked: List[int]
    delivery_bps: List[float]
    handovers: List[dict]  # handover events with "t" added

    @classmethod
    def of(cls, flow: FlowEvents) -> "Series":
        t0 = flow.start_us
        reps = flow.reports
        sw = [dict(s, t=(s["t_us"] - t0) / 1e6) for s in flow.handovers]
        return cls(t=[(r["t_us"] - t0) / 1e6 for r in reps],
                   cwnd=[int(r.get("cwnd_bytes") or 0) for r in reps],
                   inflight=[int(r.get("bytes_in_flight") or 0) for r in reps],
                   acked=[int(r.get("acked_bytes") or 0) for r in reps],
                   delivery_bps=[float(r.get("delivery_rate_bps") or 0) for r in reps], handovers=sw)

    @property
    def end(self) -> float:
        return self.t[-1] if self.t else 0.0

    def acked_between(self, a: float, b: float) -> int:
        """Bytes acknowledged by the reports with a < t <= b."""
        return sum(x for t, x in zip(self.t, self.acked) if a < t <= b)

    def throughput_bins(self, width_s: float) -> Tuple[List[float], List[float]]:
        """(bin starts, Mbit/s) over the flow's reports."""
        n = int(self.end // width_s) + 1 if self.t else 0
        got = [0] * n
        for t, x in zip(self.t, self.acked):
            got[min(int(t // width_s), n - 1)] += x
        return [i * width_s for i in range(n)], [b * 8 / width_s / 1e6 for b in got]


# ----------------------------------------------------------------------- plots


def plot_flow(path: str, flow: FlowEvents, title: str = "") -> None:
    """Window and bytes in flight (top) and throughput (bottom) over time, handovers as
    vertical lines labelled with the new algorithm; written atomically."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = Series.of(flow)
    fig, (ax_w, ax_t) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
    ax_w.step(s.t, [c / 1000 for c in s.cwnd], where="post", label="cwnd", lw=1.2)
    ax_w.plot(s.t, [b / 1000 for b in s.inflight], lw=0.6, alpha=0.6, label="bytes in flight")
    ax_w.set_ylabel("kB")
    ax_w.legend(loc="upper right", fontsize=8)
    starts, mbps = s.throughput_bins(PLOT_BIN_S)
    ax_t.step(starts, mbps, where="post", label=f"delivered / {PLOT_BIN_S * 1000:.0f} ms", lw=1.2)
    ax_t.plot(s.t, [d / 1e6 for d in s.delivery_bps], lw=0.6, alpha=0.5, label="delivery rate (report)")
    ax_t.set_ylabel("Mbit/s")
    ax_t.set_xlabel("time since the flow started (s)")
    ax_t.legend(loc="upper right", fontsize=8)
    first = flow.algorithms()[:1]
    mark_handovers(s, first[0] if first else None, ax_w, (ax_t,))
    for ax in (ax_w, ax_t):
        ax.grid(alpha=0.3)
        ax.set_ylim(bottom=0)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with results.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def mark_handovers(s: Series, first: Optional[str], label_ax, other_axes=(), fontsize: float = 8,
                   inside: bool = False) -> None:
    """The flow's handovers as vertical dashed lines on `label_ax` and `other_axes`, each
    labelled with the new algorithm; `first`, the algorithm the flow started on, labelled at
    t = 0. Labels go just above `label_ax`, or with `inside` rotated along the line inside its
    top (small panels, whose titles sit above); there, handovers closer together than
    LABEL_JOIN of the flow's duration share one label ("illinois>hybla")."""
    where = label_ax.get_xaxis_transform()
    if first:
        label_ax.text(0.0, 1.02, first, transform=where, fontsize=fontsize, color="C3")
    labels: List[Tuple[float, str]] = []
    for sw in s.handovers:
        for ax in (label_ax, *other_axes):
            ax.axvline(sw["t"], color="C3", ls="--", lw=0.9)
        if inside and labels and sw["t"] - labels[-1][0] < LABEL_JOIN * max(s.end, 1e-9):
            labels[-1] = (labels[-1][0], f"{labels[-1][1]}>{sw.get('to')}")
        else:
            labels.append((sw["t"], str(sw.get("to"))))
    for t, text in labels:
        if inside:
            # beside the line, on the side with room: right of it in the flow's first half
            label_ax.text(t, 0.97, text, transform=where, fontsize=fontsize, color="C3", rotation=90,
                          ha="left" if t < s.end / 2 else "right", va="top", bbox={"facecolor": "white", "edgecolor": "none", "pad": 0.8})
        else:
            label_ax.text(t, 1.02, text, transform=where, fontsize=fontsize, color="C3", ha="left")


#: Handovers closer together than this fraction of a flow's duration share a label (`mark_handovers`).
LABEL_JOIN = 0.04


def plot_run(run_dir: str, rows: Sequence[dict], schemes: Optional[Iterable[str]] = None,
             transfer: Optional[int] = None) -> List[str]:
    """Plot the transfers of a run that have events: those of `schemes` (labels; None = every
    policy scheme), or only transfer number `transfer` (1-based). Returns the files written."""
    wanted = set(schemes) if schemes is not None else None
    run = RunDirectory(run_dir)
    written = []
    for i, row in enumerate(rows, 1):
        index = row.get("transfer", i)
        if transfer is not None and index != transfer:
            continue
        if transfer is None:
            if wanted is None and ":policy:" not in row["scheme"]:
                continue
            if wanted is not None and row["scheme"] not in wanted:
                continue
        if not row.get("events") and transfer is None:
            continue
        # strict for the one transfer asked for: a row without a slice raises, naming it
        flow = flow_of(run.events_of(dict(row, transfer=index)), run.events_path(row))
        path = os.path.join(run_dir, os.path.splitext(row["events"])[0] + ".png")
        tct = f", TCT {row['tct_s']:.2f} s" if row.get("tct_s") is not None else ""
        plot_flow(path, flow, f"{row['client']} {row['file_bytes']} B {display_label(row['scheme'])} rep "
                              f"{row['repetition']}{tct}")
        written.append(path)
    if transfer is not None and not written:
        raise RunDirectoryError(f"{run_dir}: no transfer number {transfer} (there are {len(rows)})")
    return written


def plot_compare(run_dir: str, rows: Sequence[dict], schemes: Optional[Iterable[str]] = None) -> List[str]:
    """One figure per client, `flows/compare-CLIENT.png`: window (top) and throughput (bottom)
    over time, one colour per scheme (labels; None = every scheme with events), every
    repetition drawn. Schemes without agent events (native ones) have nothing to draw and are
    left out. Returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    wanted = list(schemes) if schemes is not None else None
    run = RunDirectory(run_dir)
    by_client: Dict[str, Dict[str, List[Series]]] = {}
    for i, row in enumerate(rows, 1):
        if not row.get("events") or (wanted is not None and row["scheme"] not in wanted):
            continue
        flow = flow_of(run.events_of(dict(row, transfer=row.get("transfer", i))), run.events_path(row))
        by_client.setdefault(row["client"], {}).setdefault(row["scheme"], []).append(Series.of(flow))
    written = []
    for client, series in by_client.items():
        order = [s for s in (wanted or sorted(series)) if s in series]
        fig, (ax_w, ax_t) = plt.subplots(2, 1, figsize=(9, 5.5), sharex=True)
        for colour, scheme in enumerate(order):
            for k, s in enumerate(series[scheme]):
                label = display_label(scheme) if k == 0 else None
                ax_w.step(s.t, [c / 1000 for c in s.cwnd], where="post", lw=1.1, color=f"C{colour}", label=label)
                starts, mbps = s.throughput_bins(PLOT_BIN_S)
                ax_t.step(starts, mbps, where="post", lw=1.1, color=f"C{colour}", label=label)
        ax_w.set_ylabel("window (kB)")
        ax_t.set_ylabel(f"Mbit/s per {PLOT_BIN_S * 1000:.0f} ms")
        ax_t.set_xlabel("time since the flow started (s)")
        for ax in (ax_w, ax_t):
            ax.grid(alpha=0.3)
            ax.set_ylim(bottom=0)
            ax.legend(loc="upper right", fontsize=8)
        fig.suptitle(f"{client}: window and throughput, one colour per scheme", fontsize=10)
        fig.tight_layout()
        path = os.path.join(run_dir, "flows", f"compare-{re.sub(r'[^A-Za-z0-9_.-]', '_', client)}.png")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with results.atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=100)
        plt.close(fig)
        written.append(path)
    return written
