"""Summary statistics: median, mean and the Student-t 95% confidence interval of the mean,
and ratios of means of compared schemes with a bootstrap 95% interval (`ratio_rows`).

The t quantiles and the bootstrap are scipy's (`scipy.stats.t`, `scipy.stats.bootstrap`);
scipy is imported only when a statistic needs it.
"""

from __future__ import annotations

import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple


def t975(df: int) -> float:
    """Two-sided 95% critical value of Student's t with `df` degrees of freedom
    (`scipy.stats.t.ppf(0.975, df)`)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def mean_ci95(values: Sequence[float]) -> Tuple[float, float, float]:
    """(mean, lo, hi): the mean and its 95% Student-t confidence interval.

    n = 1 gives [mean, mean] (no spread to estimate). Raises on an empty input.
    """
    n = len(values)
    if n == 0:
        raise ValueError("no values")
    mean = math.fsum(values) / n
    if n == 1:
        return mean, mean, mean
    var = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    half = t975(n - 1) * math.sqrt(var / n)
    return mean, mean - half, mean + half


def median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    if n == 0:
        raise ValueError("no values")
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2


def summarize(rows: Iterable[dict], group_keys=("client", "scheme")) -> List[dict]:
    """Per-group summary of transfer rows (dicts as written to transfers.parquet).

    A row counts towards the TCT statistics only if it has no error and its SHA-256 matched.
    Returns, in first-seen order, dicts with: client, scheme, n, tct_median_s, tct_mean_s,
    ci95 [lo, hi], integrity_failures, errors, attempts, on_report_errors (summed over the
    group's transfers; None when no row carries the count, e.g. native schemes), first_error
    (the first failed transfer's error, None if none), status (`cell_status`) and ended_on
    (for transfers whose rows name the `algorithms` their flow ran: how many ended on each,
    most first; None when no row does). Statistics are None when n = 0.
    """
    groups: Dict[tuple, dict] = {}
    for r in rows:
        key = tuple(r[k] for k in group_keys)
        g = groups.setdefault(key, {"tcts": [], "integrity_failures": 0, "errors": 0, "attempts": 0,
                                    "on_report_errors": None, "first_error": None, "ended_on": None})
        g["attempts"] += 1
        if r.get("algorithms"):
            ended = g["ended_on"] = g["ended_on"] or {}
            ended[r["algorithms"][-1]] = ended.get(r["algorithms"][-1], 0) + 1
        if r.get("on_report_errors") is not None:
            g["on_report_errors"] = (g["on_report_errors"] or 0) + int(r["on_report_errors"])
        if r.get("error"):
            g["errors"] += 1
            if g["first_error"] is None:
                g["first_error"] = r["error"]
            continue
        if not r.get("sha256_ok"):
            g["integrity_failures"] += 1
            continue
        g["tcts"].append(float(r["tct_s"]))
    out = []
    for key, g in groups.items():
        row = dict(zip(group_keys, key))
        tcts = g["tcts"]
        row["n"] = len(tcts)
        if tcts:
            mean, lo, hi = mean_ci95(tcts)
            row["tct_median_s"] = median(tcts)
            row["tct_mean_s"] = mean
            row["ci95"] = [lo, hi]
        else:
            row["tct_median_s"] = None
            row["tct_mean_s"] = None
            row["ci95"] = None
        row["integrity_failures"] = g["integrity_failures"]
        row["errors"] = g["errors"]
        row["attempts"] = g["attempts"]
        row["on_report_errors"] = g["on_report_errors"]
        row["first_error"] = g["first_error"]
        row["ended_on"] = None if g["ended_on"] is None else dict(
            sorted(g["ended_on"].items(), key=lambda kv: (-kv[1], kv[0])))
        row["status"] = cell_status(row)
        out.append(row)
    return out


#: Datapaths whose schemes are compared with `native:ALG` by default (`default_pairs`).
COMPARED_KINDS = ("kernel", "ovs")
#: Bootstrap of a ratio of means: resamples and the fixed seed (the same data give the same interval).
RATIO_RESAMPLES = 2000
RATIO_SEED = 13


def default_pairs(schemes: Sequence[str]) -> List[Tuple[str, str]]:
    """The compared pairs (A, B) of a run's schemes: every `kernel:ALG[:PARAMS]` and
    `ovs:ALG[:PARAMS]` against `native:ALG` when the run has it, in scheme order. Policies and
    `py:` algorithms have no native counterpart and are not compared."""
    natives = {s.split(":", 1)[1] for s in schemes if s.startswith("native:")}
    pairs = []
    for s in schemes:
        kind, _, alg = s.partition(":")
        base = alg.split(":", 1)[0]
        if kind in COMPARED_KINDS and base not in ("policy", "py") and base in natives:
            pairs.append((s, f"native:{base}"))
    return pairs


def counted(r: dict) -> bool:
    """Whether a transfer's TCT enters the statistics: no error, SHA-256 matched, a TCT."""
    return not r.get("error") and bool(r.get("sha256_ok")) and r.get("tct_s") is not None


def ratio_ci95(a: Sequence[float], b: Sequence[float], *, seed: int = RATIO_SEED,
               n_resamples: int = RATIO_RESAMPLES) -> Tuple[float, float, float]:
    """(ratio, lo, hi): mean(a) / mean(b) and its 95% percentile-bootstrap interval, resampling
    the pairs (a[i], b[i]) together (`scipy.stats.bootstrap(..., paired=True)`). One pair gives
    [ratio, ratio]; a degenerate resampling (e.g. all pairs equal) gives an interval of width 0."""
    if len(a) != len(b) or not a:
        raise ValueError(f"need equally many paired values, got {len(a)} and {len(b)}")
    ratio = math.fsum(a) / math.fsum(b)
    if len(a) == 1:
        return ratio, ratio, ratio
    import inspect

    import numpy as np
    from scipy.stats import bootstrap

    gen = np.random.default_rng(seed)
    seed_kw = {"rng": gen} if "rng" in inspect.signature(bootstrap).parameters else {"random_state": gen}
    res = bootstrap((np.asarray(a, float), np.asarray(b, float)),
                    lambda x, y, axis: np.mean(x, axis=axis) / np.mean(y, axis=axis),
                    paired=True, vectorized=True, confidence_level=0.95, n_resamples=n_resamples,
                    method="percentile", **seed_kw)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo = hi = ratio
    return ratio, lo, hi


def ratio_rows(rows: Iterable[dict], pairs: Sequence[Tuple[str, str]]) -> List[dict]:
    """For each cell (client, file_bytes; in first-seen order) and compared pair (A, B) that
    both ran there: the ratio of mean TCTs A / B with its bootstrap 95% interval (`ratio_ci95`).
    Repetitions alternate the schemes in time, so the successful transfers are paired by
    repetition number; a repetition that only one of the two completed is dropped. Returns dicts
    with client, file_bytes, a, b, n_pairs, ratio, lo, hi (None when no repetition pairs up)."""
    cells: Dict[tuple, Dict[str, Dict[int, float]]] = {}
    for r in rows:
        cell = cells.setdefault((r["client"], r.get("file_bytes")), {})
        by_rep = cell.setdefault(r["scheme"], {})
        if counted(r) and r.get("repetition") is not None:
            by_rep.setdefault(int(r["repetition"]), float(r["tct_s"]))
    out = []
    for (client, size), cell in cells.items():
        for a, b in pairs:
            if a not in cell or b not in cell:
                continue
            reps = sorted(set(cell[a]) & set(cell[b]))
            row = {"client": client, "file_bytes": size, "a": a, "b": b, "n_pairs": len(reps),
                   "ratio": None, "lo": None, "hi": None}
            if reps:
                row["ratio"], row["lo"], row["hi"] = ratio_ci95([cell[a][i] for i in reps],
                                                                [cell[b][i] for i in reps])
            out.append(row)
    return out


def text_table(head: Sequence[str], lines: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """A plain-text table: a header, a rule, one line per row; columns in `right` (figures)
    right-aligned, the others left-aligned."""
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)]

    def fmt(cells):
        return "  ".join(str(c).rjust(w) if i in right else str(c).ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([fmt(head), "  ".join("-" * w for w in widths)] + [fmt(line) for line in lines])


def format_ratio_table(ratios: List[dict]) -> str:
    """The ratio rows as text: "client  A / B  ratio  [lo, hi]  n"; empty for no rows."""
    if not ratios:
        return ""
    head = ["client", "A / B", "ratio", "95% CI (bootstrap)", "n"]
    lines = []
    for r in ratios:
        if r["ratio"] is None:
            ratio = ci = "-"
        else:
            ratio, ci = f"{r['ratio']:.3f}", f"[{r['lo']:.3f}, {r['hi']:.3f}]"
        lines.append([r["client"], f"{r['a']} / {r['b']}", ratio, ci, str(r["n_pairs"])])
    title = "ratio of mean TCT, A / B (transfers paired by repetition; n = pairs)"
    return title + "\n" + text_table(head, lines, right=range(2, len(head)))


#: Longest error text quoted in a summary table's status column.
STATUS_ERROR_CHARS = 90


def cell_status(row: dict) -> str:
    """One cell's verdict in words: "ok", "ok (73 on_report errors)", "all 3 failed: curl: (28)
    Operation timed out ...", "1 of 3 failed: ...", plus SHA-256 mismatches."""
    parts = []
    failed, attempts = row.get("errors", 0), row.get("attempts", 0)
    if failed:
        how = f"all {attempts} failed" if failed == attempts else f"{failed} of {attempts} failed"
        err = " ".join(str(row.get("first_error") or "").split())
        if len(err) > STATUS_ERROR_CHARS:
            err = err[:STATUS_ERROR_CHARS - 1] + "…"
        parts.append(f"{how}: {err}" if err else how)
    if row.get("integrity_failures"):
        parts.append(f"{row['integrity_failures']} SHA-256 mismatch(es)")
    status = "; ".join(parts) or "ok"
    n = row.get("on_report_errors")
    if n:
        status += f" ({n} on_report error{'s' if n != 1 else ''})"
    return status


#: The keys (and only those) of each row of `ccswitch run --json`.
JSON_ROW_KEYS = ("client", "scheme", "n", "tct_median_s", "tct_mean_s", "ci95", "integrity_failures")


def json_rows(summary: List[dict]) -> List[dict]:
    """Project summary rows onto the public --json schema."""
    return [{k: row[k] for k in JSON_ROW_KEYS} for row in summary]


def ended_on_text(ended_on: Optional[dict]) -> str:
    """`{"bbr": 2, "hybla": 1}` -> "bbr 2, hybla 1"; "-" for None."""
    return ", ".join(f"{alg} {n}" for alg, n in ended_on.items()) if ended_on else "-"


def format_table(summary: List[dict]) -> str:
    """Human-readable summary table. Policy runs (rows that know the algorithms their
    transfers ran) get an "ended on" column: which algorithm each cell's transfers ended on."""
    head = ["client", "scheme", "n", "median s", "mean s", "95% CI of mean", "sha fail", "errors", "status"]
    with_ended = any(r.get("ended_on") and ":policy:" in r["scheme"] for r in summary)
    if with_ended:
        head.insert(-1, "ended on")
    lines = []
    for r in summary:
        if r["n"]:
            ci = f"[{r['ci95'][0]:.3f}, {r['ci95'][1]:.3f}]"
            med, mean = f"{r['tct_median_s']:.3f}", f"{r['tct_mean_s']:.3f}"
        else:
            ci = med = mean = "-"
        cells = [r["client"], r["scheme"], str(r["n"]), med, mean, ci,
                 str(r["integrity_failures"]), str(r.get("errors", 0)), r.get("status") or cell_status(r)]
        if with_ended:
            cells.insert(-1, ended_on_text(r.get("ended_on")) if ":policy:" in r["scheme"] else "-")
        lines.append(cells)
    left = {0, 1, len(head) - 1} | ({len(head) - 2} if with_ended else set())  # words, not figures
    return text_table(head, lines, right=[i for i in range(len(head)) if i not in left])


def compare_summaries(a: Sequence[dict], b: Sequence[dict]) -> List[dict]:
    """Cell for cell (client, scheme) of two summaries of the same scenario (e.g. in-process and
    on a cluster): both medians, their difference relative to A's, both 95% intervals of the
    mean and whether they overlap (`agree`). Cells of only one summary come with the other's
    figures None."""
    index_b = {(r["client"], r["scheme"]): r for r in b}
    out = []
    for key in list(dict.fromkeys([(r["client"], r["scheme"]) for r in a] + list(index_b))):
        ra = next((r for r in a if (r["client"], r["scheme"]) == key), None)
        rb = index_b.get(key)
        row = {"client": key[0], "scheme": key[1], "n_a": ra and ra["n"], "n_b": rb and rb["n"],
               "median_a": ra and ra["tct_median_s"], "median_b": rb and rb["tct_median_s"],
               "ci_a": ra and ra["ci95"], "ci_b": rb and rb["ci95"], "diff": None, "agree": None}
        if row["median_a"] and row["median_b"] is not None:
            row["diff"] = row["median_b"] / row["median_a"] - 1
        if row["ci_a"] and row["ci_b"]:
            row["agree"] = row["ci_a"][0] <= row["ci_b"][1] and row["ci_b"][0] <= row["ci_a"][1]
        out.append(row)
    return out


def format_comparison(rows: Sequence[dict], label_a: str = "A", label_b: str = "B") -> str:
    def f(x, fmt="{:.3f}"):
        return "-" if x is None else fmt.format(x)

    def ci(c):
        return "-" if not c else f"[{c[0]:.3f}, {c[1]:.3f}]"

    head = ["client", "scheme", f"n {label_a}", f"n {label_b}", f"median {label_a}", f"median {label_b}",
            "diff", f"95% CI {label_a}", f"95% CI {label_b}", "intervals"]
    lines = [[r["client"], r["scheme"], f(r["n_a"], "{}"), f(r["n_b"], "{}"), f(r["median_a"]), f(r["median_b"]),
              f(r["diff"] if r["diff"] is None else 100 * r["diff"], "{:+.1f}%"), ci(r["ci_a"]), ci(r["ci_b"]),
              "-" if r["agree"] is None else ("overlap" if r["agree"] else "DISJOINT")] for r in rows]
    judged = [r for r in rows if r["agree"] is not None]
    tail = (f"{sum(r['agree'] for r in judged)} of {len(judged)} cells: the 95% intervals of the mean overlap"
            if judged else "no cell with intervals in both runs")
    return text_table(head, lines) + "\n\n" + tail
