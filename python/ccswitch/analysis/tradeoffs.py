"""The plots readers look at for the measurements of issue 19 (the row columns of the data
contract): throughput against delay per path, flow completion times of web workloads, and
competing flows over time.

- Throughput-delay, drawn as Pantheon draws it: x = the 95th percentile of one-way delay
  (`delay_p95_ms`) with the axis reversed, so better (less delay) is to the right; y =
  `throughput_mbps`, better up. Each scheme's transfers are points, and its spread is a
  one-sigma ellipse: the ellipse of the 2x2 covariance of its points (axes along the
  covariance's eigenvectors, half-lengths the square roots of its eigenvalues), centred on the
  mean. A scheme with fewer than 3 points has no ellipse (its covariance is not estimable).
  One figure per path (client), and one small-multiples figure for the whole run.
- Workloads: the CDF of flow completion time per scheme (every request of every repetition,
  log x), and the slowdown's median and 99th percentile per size bucket as grouped bars; both
  read the request files named by the rows (`workload.requests_file`, relative to the run dir).
- Competing flows: throughput over time of every flow of one unit (the `throughput_bins` CSV,
  `flow,t_s,mbps`), each line labelled with its scheme and role; one figure per client and
  scheme, from the first repetition.

Schemes are shown by `scenario.display_label`. Every function takes rows (dicts as in
transfers.jsonl) and/or files and an output path, and never raises on missing data: what it
cannot draw it logs and skips, returning None (or fewer paths). `plot_run_tradeoffs` draws
whatever a run's rows support.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from ..experiments import results
from ..experiments.scenario import display_label

log = logging.getLogger(__name__)

FIGURE_DPI = 100
#: The size buckets of the workload columns (bytes): name -> [lo, hi).
SIZE_BUCKETS = (("lt100k", 0, 100_000), ("100k-1m", 100_000, 1_000_000), ("gt1m", 1_000_000, math.inf))
#: Panels per row of the small-multiples figure.
PANEL_COLUMNS = 3
#: Where plot_run_tradeoffs writes, inside the run directory.
OUT_SUBDIR = "tradeoffs"


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str) -> str:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with results.atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=FIGURE_DPI)
    _pyplot().close(fig)
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")


def _number(x) -> Optional[float]:
    """A finite float, or None for a missing / non-numeric / NaN value."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _schemes(rows: Sequence[dict]) -> List[str]:
    return list(dict.fromkeys(str(r.get("scheme")) for r in rows if r.get("scheme")))


def _colours(schemes: Sequence[str]) -> Dict[str, tuple]:
    palette = _pyplot().get_cmap("tab10" if len(schemes) <= 10 else "tab20").colors
    return {s: palette[i % len(palette)] for i, s in enumerate(schemes)}


# ----------------------------------------------------------------------- throughput-delay


@dataclass(frozen=True)
class SigmaEllipse:
    """The one-sigma ellipse of a 2-D sample: centre, full axis lengths (`width` along the
    major axis, 2 sqrt of the larger eigenvalue of the covariance; `height` along the minor one)
    and the major axis's angle from the x axis, degrees."""

    cx: float
    cy: float
    width: float
    height: float
    angle_deg: float


def sigma_ellipse(xs: Sequence[float], ys: Sequence[float], n_sigma: float = 1.0) -> Optional[SigmaEllipse]:
    """The `n_sigma` ellipse of the points (xs[i], ys[i]) from their 2x2 sample covariance
    (n - 1 in the denominator); None with fewer than 3 points."""
    import numpy as np

    if len(xs) != len(ys):
        raise ValueError(f"sigma_ellipse: {len(xs)} x values but {len(ys)} y values")
    if len(xs) < 3:
        return None
    cov = np.cov(np.asarray(xs, float), np.asarray(ys, float))
    values, vectors = np.linalg.eigh(cov)  # ascending eigenvalues, orthonormal eigenvectors
    values = np.clip(values, 0.0, None)
    major = vectors[:, 1]
    angle = math.degrees(math.atan2(major[1], major[0]))
    return SigmaEllipse(float(np.mean(xs)), float(np.mean(ys)), 2 * n_sigma * math.sqrt(values[1]),
                        2 * n_sigma * math.sqrt(values[0]), angle)


def tradeoff_points(rows: Sequence[dict]) -> Dict[str, List[Tuple[float, float]]]:
    """scheme -> [(delay_p95_ms, throughput_mbps)] of the transfers that have both."""
    out: Dict[str, List[Tuple[float, float]]] = {}
    for r in rows:
        d, t = _number(r.get("delay_p95_ms")), _number(r.get("throughput_mbps"))
        if d is not None and t is not None and r.get("scheme"):
            out.setdefault(str(r["scheme"]), []).append((d, t))
    return out


def _draw_tradeoff(ax, points: Dict[str, List[Tuple[float, float]]], colours: Dict[str, tuple],
                   fontsize: float = 7) -> None:
    from matplotlib.patches import Ellipse

    for scheme, pts in points.items():
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        c = colours[scheme]
        ax.scatter(xs, ys, s=12, color=c, alpha=0.7, lw=0)
        e = sigma_ellipse(xs, ys)
        if e is not None:
            ax.add_patch(Ellipse((e.cx, e.cy), e.width, e.height, angle=e.angle_deg, fill=False, ec=c, lw=1.2))
        cx, cy = sum(xs) / len(xs), sum(ys) / len(ys)
        ax.annotate(display_label(scheme), (cx, cy), xytext=(4, 4), textcoords="offset points", fontsize=fontsize,
                    color=c)
    ax.invert_xaxis()  # less delay is better: to the right, as Pantheon draws it
    ax.grid(alpha=0.3)
    ax.tick_params(labelsize=7)


def plot_throughput_delay(rows: Sequence[dict], path: str, title: Optional[str] = None) -> Optional[str]:
    """One path's throughput-delay plot (the rows of one client). None when no row has both figures."""
    points = tradeoff_points(rows)
    if not points:
        log.info("throughput-delay %s: no transfer with delay_p95_ms and throughput_mbps; skipped", path)
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 4.0))
    _draw_tradeoff(ax, points, _colours(_schemes(rows)), fontsize=8)
    ax.set_xlabel("95th percentile one-way delay (ms), better →", fontsize=8)
    ax.set_ylabel("throughput (Mbit/s)", fontsize=8)
    ax.set_title(title or "throughput against delay (ellipse: one sigma)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def plot_throughput_delay_grid(rows: Sequence[dict], path: str, title: Optional[str] = None) -> Optional[str]:
    """A whole run's throughput-delay plots as small multiples, one panel per client (the
    clients without data left out). None when no client has data."""
    by_client: Dict[str, List[dict]] = {}
    for r in rows:
        by_client.setdefault(str(r.get("client")), []).append(r)
    panels = [(c, tradeoff_points(rs)) for c, rs in by_client.items()]
    panels = [(c, p) for c, p in panels if p]
    if not panels:
        log.info("throughput-delay %s: no client with delay_p95_ms and throughput_mbps; skipped", path)
        return None
    plt = _pyplot()
    colours = _colours(_schemes(rows))
    ncols = min(PANEL_COLUMNS, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.0 * ncols, 3.2 * nrows + 0.4), squeeze=False)
    for ax, (client, pts) in zip(axes.flat, panels):
        _draw_tradeoff(ax, pts, colours)
        ax.set_title(client, fontsize=8)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("throughput (Mbit/s)", fontsize=7)
    for ax in axes[-1, :]:
        ax.set_xlabel("p95 one-way delay (ms), better →", fontsize=7)
    fig.suptitle(title or "throughput against delay per path (ellipse: one sigma)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


# ----------------------------------------------------------------------- workloads


def read_requests(run_dir: str, row: dict) -> List[dict]:
    """The requests of one workload row (its `workload.requests_file`, relative to run_dir);
    [] when the row has no workload or the file is missing or unreadable (logged)."""
    w = row.get("workload")
    if isinstance(w, str):  # a parquet row may keep the dict as JSON text
        try:
            w = json.loads(w)
        except ValueError:
            w = None
    if not isinstance(w, dict) or not w.get("requests_file"):
        return []
    path = os.path.join(run_dir, w["requests_file"])
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        log.warning("%s:%d: not JSON; line skipped", path, n)
    except OSError as e:
        log.warning("workload requests %s: %s; skipped", path, e.strerror or e)
        return []
    return out


def workload_requests(run_dir: str, rows: Sequence[dict]) -> Dict[str, List[dict]]:
    """scheme -> every request of every repetition of its workload rows."""
    out: Dict[str, List[dict]] = {}
    for r in rows:
        reqs = read_requests(run_dir, r)
        if reqs:
            out.setdefault(str(r["scheme"]), []).extend(reqs)
    return out


def bucket_of(size) -> Optional[str]:
    s = _number(size)
    if s is None:
        return None
    return next(name for name, lo, hi in SIZE_BUCKETS if lo <= s < hi)


def plot_fct_cdf(run_dir: str, rows: Sequence[dict], path: str) -> Optional[str]:
    """FCT CDF per scheme over all completed requests (log x). None without any."""
    by_scheme = {s: sorted(v for v in (_number(q.get("fct_s")) for q in reqs) if v is not None and v > 0)
                 for s, reqs in workload_requests(run_dir, rows).items()}
    by_scheme = {s: v for s, v in by_scheme.items() if v}
    if not by_scheme:
        log.info("FCT CDF %s: no workload request with a flow completion time; skipped", path)
        return None
    plt = _pyplot()
    colours = _colours(list(by_scheme))
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for s, v in by_scheme.items():
        ys = [(i + 1) / len(v) for i in range(len(v))]
        ax.step(v, ys, where="post", color=colours[s], lw=1.3, label=f"{display_label(s)} (n = {len(v)})")
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("flow completion time (s, log)", fontsize=8)
    ax.set_ylabel("fraction of requests", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7, frameon=False)
    ax.set_title("flow completion time CDF (all requests, all repetitions)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def slowdown_percentiles(requests: Sequence[dict]) -> Dict[str, Tuple[Optional[float], Optional[float], int]]:
    """bucket -> (p50, p99, n) of the slowdown of the completed requests (None without any)."""
    import numpy as np

    out = {}
    for name, _, _ in SIZE_BUCKETS:
        v = [x for q in requests if bucket_of(q.get("size")) == name
             for x in [_number(q.get("slowdown"))] if x is not None]
        out[name] = ((float(np.percentile(v, 50)), float(np.percentile(v, 99)), len(v)) if v else (None, None, 0))
    return out


def plot_slowdown(run_dir: str, rows: Sequence[dict], path: str) -> Optional[str]:
    """Slowdown p50 (solid) and p99 (hatched) per size bucket, one bar group per bucket, one bar
    per scheme. None without any request with a slowdown."""
    stats = {s: slowdown_percentiles(reqs) for s, reqs in workload_requests(run_dir, rows).items()}
    stats = {s: b for s, b in stats.items() if any(n for _, _, n in b.values())}
    if not stats:
        log.info("slowdown %s: no workload request with a slowdown; skipped", path)
        return None
    plt = _pyplot()
    colours = _colours(list(stats))
    fig, ax = plt.subplots(figsize=(6.0, 3.8))
    width = 0.8 / len(stats)
    for i, (s, b) in enumerate(stats.items()):
        xs = [k + (i - (len(stats) - 1) / 2) * width for k in range(len(SIZE_BUCKETS))]
        p50 = [b[name][0] or 0 for name, _, _ in SIZE_BUCKETS]
        p99 = [b[name][1] or 0 for name, _, _ in SIZE_BUCKETS]
        ax.bar(xs, p99, width * 0.95, color=colours[s], alpha=0.35, hatch="//", ec=colours[s])
        ax.bar(xs, p50, width * 0.95, color=colours[s], label=display_label(s))
    ax.set_xticks(range(len(SIZE_BUCKETS)), ["< 100 kB", "100 kB – 1 MB", "> 1 MB"], fontsize=8)
    ax.set_yscale("log")
    ax.axhline(1, color="grey", lw=0.8, ls=":")
    ax.set_ylabel("slowdown (FCT / ideal, log)", fontsize=8)
    ax.tick_params(labelsize=7)
    ax.legend(fontsize=7, frameon=False, title="solid p50, hatched p99", title_fontsize=7)
    ax.set_title("slowdown by request size", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


# ----------------------------------------------------------------------- competing flows


def read_throughput_bins(path: str) -> Dict[int, Tuple[List[float], List[float]]]:
    """flow -> (t_s, mbps) from a `flow,t_s,mbps` CSV; {} when missing or unreadable (logged)."""
    out: Dict[int, Tuple[List[float], List[float]]] = {}
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for rec in csv.DictReader(f):
                try:
                    flow, t, mbps = int(rec["flow"]), float(rec["t_s"]), float(rec["mbps"])
                except (KeyError, TypeError, ValueError):
                    log.warning("%s: bad line %r; skipped", path, rec)
                    continue
                ts, ms = out.setdefault(flow, ([], []))
                ts.append(t)
                ms.append(mbps)
    except OSError as e:
        log.warning("throughput bins %s: %s; skipped", path, e.strerror or e)
        return {}
    return out


def plot_competing_flows(run_dir: str, row: dict, path: str) -> Optional[str]:
    """Throughput over time of every flow of one unit, each line labelled with its scheme and
    role. None when the row has no bins file or the file has no data."""
    if not row.get("throughput_bins"):
        return None
    bins = read_throughput_bins(os.path.join(run_dir, row["throughput_bins"]))
    if not bins:
        return None
    flows = row.get("flows") if isinstance(row.get("flows"), list) else []
    info = {int(f["flow"]): f for f in flows if isinstance(f, dict) and f.get("flow") is not None}
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for flow in sorted(bins):
        ts, ms = bins[flow]
        f = info.get(flow, {})
        scheme = f.get("scheme") or (row.get("scheme") if not info else None) or "?"
        label = f"flow {flow}: {display_label(scheme)}" + (f" ({f['role']})" if f.get("role") else "")
        ax.step(ts, ms, where="post", lw=1.2, label=label)
    ax.set_xlabel("time since the unit started (s)", fontsize=8)
    ax.set_ylabel("Mbit/s per 100 ms", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False)
    jain = _number(row.get("jain"))
    tail = f"; Jain's index {jain:.3f} over {_number(row.get('shared_s')) or 0:.1f} s shared" if jain is not None else ""
    ax.set_title(f"{row.get('client')} {display_label(str(row.get('scheme')))} rep {row.get('repetition')}{tail}",
                 fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def plot_lone_flows(run_dir: str, rows: Sequence[dict], path: str, title: str) -> Optional[str]:
    """Throughput over time of one client's lone flows: per scheme, its first repetition's flow
    (100 ms bins). None when no row has bins."""
    firsts: Dict[str, dict] = {}
    for r in rows:
        if r.get("flows") or r.get("workload") or not r.get("throughput_bins"):
            continue
        scheme = str(r.get("scheme"))
        if scheme not in firsts or (r.get("repetition") or 0) < (firsts[scheme].get("repetition") or 0):
            firsts[scheme] = r
    lines = {s: read_throughput_bins(os.path.join(run_dir, r["throughput_bins"])) for s, r in firsts.items()}
    lines = {s: b[min(b)] for s, b in lines.items() if b}
    if not lines:
        return None
    colours = _colours(list(lines))
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for scheme, (ts, ms) in lines.items():
        ax.step(ts, ms, where="post", lw=1.1, color=colours[scheme], label=display_label(scheme))
    ax.set_xlabel("time since the transfer started (s)", fontsize=8)
    ax.set_ylabel("Mbit/s per 100 ms", fontsize=8)
    ax.set_ylim(bottom=0)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, frameon=False, ncol=2)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def first_repetition_units(rows: Sequence[dict]) -> List[dict]:
    """Per (client, scheme), the row of the lowest repetition that has competing flows and bins."""
    best: Dict[Tuple[str, str], dict] = {}
    for r in rows:
        if not (isinstance(r.get("flows"), list) and r["flows"] and r.get("throughput_bins")):
            continue
        key = (str(r.get("client")), str(r.get("scheme")))
        rep = r.get("repetition") or 0
        if key not in best or rep < (best[key].get("repetition") or 0):
            best[key] = r
    return list(best.values())


# ----------------------------------------------------------------------- a whole run


def plot_run_tradeoffs(run_dir: str, rows: Sequence[dict], out_dir: Optional[str] = None) -> List[str]:
    """Draw whatever the rows support into OUT_DIR (default RUN_DIR/tradeoffs): the run's
    throughput-delay small multiples and one plot per client, the workloads' FCT CDF and
    slowdown bars, and the competing flows of each client and scheme. Returns the paths
    written. A plot that fails on bad data is logged and skipped; the others are still drawn."""
    out_dir = out_dir or os.path.join(run_dir, OUT_SUBDIR)
    rows = list(rows)
    jobs = [(lambda: plot_throughput_delay_grid(rows, os.path.join(out_dir, "throughput-delay.png")))]
    for client in dict.fromkeys(str(r.get("client")) for r in rows):
        mine = [r for r in rows if str(r.get("client")) == client]
        jobs.append(lambda mine=mine, client=client: plot_throughput_delay(
            mine, os.path.join(out_dir, f"throughput-delay-{_slug(client)}.png"), title=f"{client}: throughput "
                                                                                       "against delay"))
        jobs.append(lambda mine=mine, client=client: plot_lone_flows(
            run_dir, mine, os.path.join(out_dir, f"throughput-time-{_slug(client)}.png"),
            title=f"{client}: throughput over time (first repetition of each scheme)"))
    # one workload (client, load) per figure: requests of different loads are not one population
    for client in dict.fromkeys(str(r.get("client")) for r in rows if r.get("workload")):
        mine = [r for r in rows if str(r.get("client")) == client]
        jobs.append(lambda mine=mine, client=client: plot_fct_cdf(
            run_dir, mine, os.path.join(out_dir, f"fct-cdf-{_slug(client)}.png")))
        jobs.append(lambda mine=mine, client=client: plot_slowdown(
            run_dir, mine, os.path.join(out_dir, f"slowdown-{_slug(client)}.png")))
    for r in first_repetition_units(rows):
        name = f"flows-{_slug(str(r.get('client')))}-{_slug(display_label(str(r.get('scheme'))))}.png"
        jobs.append(lambda r=r, name=name: plot_competing_flows(run_dir, r, os.path.join(out_dir, name)))
    written = []
    for job in jobs:
        try:
            path = job()
        except (OSError, ValueError, KeyError, TypeError) as e:
            log.warning("a trade-off plot of %s failed and is skipped: %s", run_dir, e)
            continue
        if path:
            written.append(path)
    return written
