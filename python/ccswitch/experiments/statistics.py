"""Summary statistics: median, mean and the Student-t 95% confidence interval of the mean,
and ratios of means of compared schemes with a bootstrap 95% interval (`ratio_rows`).

Every verdict printed about two schemes ("A beats B", "within 5%", PASS/FAIL) comes from
`compare`, which accounts for the noise: it judges the 95% bootstrap interval of the ratio of
means A / B, never the point estimate. A is "better" or "worse" only when that interval lies
wholly on one side of 1 (or of another reference ratio), "within" a tolerance only when it lies
wholly inside the band; otherwise the verdict says "no difference" (or "undecided") with the
interval. Below MIN_VERDICT_N pairs there is no interval and no verdict ("too few"). A policy
whose counted transfers all ran only the algorithm of the scheme it is compared with is
"ran only X, as kernel:X does" (`ran_only_text`), never a win.

The t quantiles and the bootstrap are scipy's (`scipy.stats.t`, `scipy.stats.bootstrap`);
scipy is imported only when a statistic needs it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

from .scenario import display_label

#: What the agent counts per flow of a Python algorithm (agent/src/python_guard.rs), as the
#: events file and transfer rows name it, and as a status line says it: exceptions, windows or
#: rates refused, callbacks abandoned past their time budget, reports answered without Python.
PYTHON_COUNTS = (("on_report_errors", "on_report error"), ("python_bad_values", "refused value"),
                 ("python_timeouts", "python timeout"), ("python_skipped", "skipped python report"))


def python_troubles(row: dict) -> str:
    """" (73 on_report errors, 2 python timeouts)" for a row's non-zero Python counts, else ""."""
    said = [f"{row[k]} {name}{'s' if row[k] != 1 else ''}" for k, name in PYTHON_COUNTS if row.get(k)]
    return f" ({', '.join(said)})" if said else ""


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
    ci95 [lo, hi], integrity_failures, errors, attempts, the PYTHON_COUNTS (each summed over the
    group's transfers; None when no row carries it, e.g. native schemes), first_error
    (the first failed transfer's error, None if none), status (`cell_status`) and ended_on
    (for transfers whose rows name the `algorithms` their flow ran: how many ended on each,
    most first; None when no row does). Statistics are None when n = 0.

    Each of SUMMARY_METRICS gets `<metric>_median` and `<metric>_ci95` (the Student-t interval
    of the mean, `mean_ci95`) over the counted transfers that carry it; None when fewer than
    one (median) or two (interval) do, as in rows of runs older than these columns.
    """
    groups: Dict[tuple, dict] = {}
    for r in rows:
        key = tuple(r[k] for k in group_keys)
        g = groups.setdefault(key, {"tcts": [], "integrity_failures": 0, "errors": 0, "attempts": 0,
                                    **{k: None for k, _ in PYTHON_COUNTS}, "first_error": None, "ended_on": None,
                                    "metrics": {m: [] for m in SUMMARY_METRICS}})
        g["attempts"] += 1
        if r.get("algorithms"):
            ended = g["ended_on"] = g["ended_on"] or {}
            ended[r["algorithms"][-1]] = ended.get(r["algorithms"][-1], 0) + 1
        for k, _ in PYTHON_COUNTS:
            if r.get(k) is not None:
                g[k] = (g[k] or 0) + int(r[k])
        if r.get("error"):
            g["errors"] += 1
            if g["first_error"] is None:
                g["first_error"] = r["error"]
            continue
        if not r.get("sha256_ok"):
            g["integrity_failures"] += 1
            continue
        g["tcts"].append(float(r["tct_s"]))
        for m in SUMMARY_METRICS:
            if r.get(m) is not None:
                g["metrics"][m].append(float(r[m]))
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
        for k, _ in PYTHON_COUNTS:
            row[k] = g[k]
        row["first_error"] = g["first_error"]
        row["ended_on"] = None if g["ended_on"] is None else dict(
            sorted(g["ended_on"].items(), key=lambda kv: (-kv[1], kv[0])))
        row["status"] = cell_status(row)
        row.update(metric_summary(g["metrics"]))
        out.append(row)
    return out


#: The row columns of the probe's and curl's figures that summaries report (the data contract
#: of issue 19; experiments/README.md, "Metrics").
SUMMARY_METRICS = ("throughput_mbps", "link_utilisation", "delay_p50_ms", "delay_p95_ms", "delay_p99_ms",
                   "retrans_segs", "retrans_bytes", "srtt_ms", "min_rtt_ms", "path_drops", "jain")


def median_and_ci95(values: Sequence[float]) -> Tuple[Optional[float], Optional[List[float]]]:
    """(median, [lo, hi]): the median and the Student-t 95% interval of the mean; the median is
    None without values, the interval None with fewer than two."""
    if not values:
        return None, None
    if len(values) < 2:
        return median(values), None
    _, lo, hi = mean_ci95(values)
    return median(values), [lo, hi]


def metric_summary(values: Dict[str, Sequence[float]]) -> dict:
    """`<metric>_median` and `<metric>_ci95` of each of SUMMARY_METRICS (`median_and_ci95`)."""
    out = {}
    for m in SUMMARY_METRICS:
        out[f"{m}_median"], out[f"{m}_ci95"] = median_and_ci95(values.get(m) or [])
    return out


#: Datapaths whose schemes are compared with `native:ALG` by default (`default_pairs`).
COMPARED_KINDS = ("kernel", "ovs")
#: Bootstrap of a ratio of means: resamples and the fixed seed (the same data give the same interval).
RATIO_RESAMPLES = 2000
RATIO_SEED = 13


def default_pairs(schemes: Sequence[str]) -> List[Tuple[str, str]]:
    """The compared pairs (A, B) of a run's schemes: every `kernel:ALG[:PARAMS]` and
    `ovs:ALG[:PARAMS]` against `native:ALG` when the run has it, in scheme order. Policies and
    Python (`py:`, `pyportus:`) algorithms have no native counterpart and are not compared."""
    natives = {s.split(":", 1)[1] for s in schemes if s.startswith("native:")}
    pairs = []
    for s in schemes:
        kind, _, alg = s.partition(":")
        base = alg.split(":", 1)[0]
        if kind in COMPARED_KINDS and base not in ("policy", "py", "pyportus") and base in natives:
            pairs.append((s, f"native:{base}"))
    return pairs


def counted(r: dict) -> bool:
    """Whether a transfer's TCT enters the statistics: no error, SHA-256 matched, a TCT."""
    return not r.get("error") and bool(r.get("sha256_ok")) and r.get("tct_s") is not None


def ratio_ci95(a: Sequence[float], b: Sequence[float], *, seed: int = RATIO_SEED,
               n_resamples: int = RATIO_RESAMPLES, paired: bool = True) -> Tuple[float, float, float]:
    """(ratio, lo, hi): mean(a) / mean(b) and its 95% percentile-bootstrap interval, resampling
    the pairs (a[i], b[i]) together (`scipy.stats.bootstrap(..., paired=True)`), or with
    paired=False each sample on its own (then a and b may differ in length). One pair gives
    [ratio, ratio]; a degenerate resampling (e.g. all pairs equal) gives an interval of width 0."""
    if (paired and len(a) != len(b)) or not a or not b:
        raise ValueError(f"need {'equally many paired' if paired else 'some'} values, got {len(a)} and {len(b)}")
    if math.fsum(b) == 0:
        raise ValueError("the mean of B is 0: no ratio A / B")
    ratio = (math.fsum(a) / len(a)) / (math.fsum(b) / len(b))
    if max(len(a), len(b)) == 1:
        return ratio, ratio, ratio
    import inspect

    import numpy as np
    from scipy.stats import bootstrap

    gen = np.random.default_rng(seed)
    seed_kw = {"rng": gen} if "rng" in inspect.signature(bootstrap).parameters else {"random_state": gen}
    res = bootstrap((np.asarray(a, float), np.asarray(b, float)),
                    lambda x, y, axis: np.mean(x, axis=axis) / np.mean(y, axis=axis),
                    paired=paired, vectorized=True, confidence_level=0.95, n_resamples=n_resamples,
                    method="percentile", **seed_kw)
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        lo = hi = ratio
    return ratio, lo, hi


#: Fewest pairs (paired) or values on the smaller side (unpaired) for which `compare` computes
#: a bootstrap interval and gives a verdict: with fewer, a percentile bootstrap has only a few
#: distinct resamples and its "95%" interval is far narrower than the truth.
MIN_VERDICT_N = 5

#: What `Verdict.kind` may be. "undecided": the interval straddles a tolerance band's edge or a
#: reference ratio other than 1; "ran only": a policy that ran only the compared scheme's algorithm.
VERDICT_KINDS = ("better", "worse", "no difference", "within", "not within", "undecided", "too few", "ran only")


@dataclass(frozen=True)
class Verdict:
    """The outcome of `compare`: `text` is what tables and pages print, e.g. "no difference
    (ratio 0.97 [0.91, 1.04], n = 10)"; `ratio` = mean(A) / mean(B) (None without values);
    `interval` its 95% bootstrap interval (None below MIN_VERDICT_N); `n` the pairs (or the
    smaller sample) it rests on."""

    text: str
    kind: str
    ratio: Optional[float]
    interval: Optional[Tuple[float, float]]
    n: int

    @property
    def decided(self) -> bool:
        """Whether the interval settles the question (better, worse, within, not within)."""
        return self.kind in ("better", "worse", "within", "not within")

    def as_dict(self) -> dict:
        d = asdict(self)
        d["interval"] = list(self.interval) if self.interval else None
        return d


def _ratio_text(ratio: float, interval: Optional[Tuple[float, float]], n: int) -> str:
    ci = f" [{interval[0]:.2f}, {interval[1]:.2f}]" if interval else ""
    return f"ratio {ratio:.2f}{ci}, n = {n}"


def compare(a_values: Sequence[float], b_values: Sequence[float], *, lower_is_better: bool = True,
            paired: bool = True, tolerance: Optional[float] = None, reference: float = 1.0,
            ran_only: Optional[str] = None, min_n: int = MIN_VERDICT_N) -> Verdict:
    """A against B on the ratio of their means, mean(A) / mean(B), with its 95% bootstrap interval
    (`ratio_ci95`; paired: a_values[i] and b_values[i] are one pair, e.g. one repetition).

    - `ran_only` (the text of `ran_only_text`) makes that the verdict, kind "ran only": the
      policy ran what B runs, so any difference is noise and never a win.
    - fewer than `min_n` pairs: "n = 2: too few for an interval", kind "too few", no interval.
    - `tolerance` t (a fraction): "within 5%" when the interval lies inside [1 - t, 1 + t],
      "not within 5%" when it lies wholly outside, else "undecided".
    - otherwise A is "better" / "worse" when the interval lies wholly below / above `reference`
      (lower is better unless lower_is_better=False), else "no difference" (reference 1) or
      "undecided" (another reference, e.g. 0.82 for "cuts the mean by at least 18%").
    Raises ValueError on paired samples of different lengths or a zero mean of B."""
    a, b = [float(x) for x in a_values], [float(x) for x in b_values]
    if paired and len(a) != len(b):
        raise ValueError(f"compare: paired samples must be equally long, got {len(a)} and {len(b)}")
    n = len(a) if paired else min(len(a), len(b))
    ratio = None
    if a and b:
        if math.fsum(b) == 0:
            raise ValueError("compare: the mean of B is 0, so A / B has no ratio")
        ratio = (math.fsum(a) / len(a)) / (math.fsum(b) / len(b))
    if ran_only:
        return Verdict(ran_only, "ran only", ratio, None, n)
    if n < min_n or ratio is None:
        return Verdict(f"n = {n}: too few for an interval", "too few", ratio, None, n)
    _, lo, hi = ratio_ci95(a, b, paired=paired)
    interval = (lo, hi)
    figures = _ratio_text(ratio, interval, n)
    if tolerance is not None:
        band = f"{100 * tolerance:g}%"
        if 1 - tolerance <= lo and hi <= 1 + tolerance:
            return Verdict(f"within {band} ({figures})", "within", ratio, interval, n)
        if hi < 1 - tolerance or lo > 1 + tolerance:
            return Verdict(f"not within {band} ({figures})", "not within", ratio, interval, n)
        return Verdict(f"undecided whether within {band} ({figures})", "undecided", ratio, interval, n)
    against = "" if reference == 1 else f" than ratio {reference:g}"
    # a relative margin of 1e-9: a bootstrap of identical pairs returns 1 +- rounding, not a win
    below, above = hi < reference * (1 - 1e-9), lo > reference * (1 + 1e-9)
    if below or above:
        a_lower = below
        kind = "better" if a_lower == lower_is_better else "worse"
        return Verdict(f"{kind}{against} ({figures})", kind, ratio, interval, n)
    if reference == 1:
        return Verdict(f"no difference ({figures})", "no difference", ratio, interval, n)
    return Verdict(f"undecided against ratio {reference:g} ({figures})", "undecided", ratio, interval, n)


def ran_only_text(policy_rows: Iterable[dict], compared: str) -> Optional[str]:
    """"ran only bbr, as kernel:bbr does" when every counted transfer among `policy_rows` (one
    policy scheme's rows on one client) names the algorithms its flow ran (`algorithms`) and all
    ran only one algorithm X, and `compared` is kernel:X, ovs:X or native:X; else None."""
    runs = [r.get("algorithms") for r in policy_rows if counted(r)]
    if not runs or not all(runs):
        return None
    ran = {str(alg) for algs in runs for alg in algs}
    kind, _, alg = compared.partition(":")
    if len(ran) == 1 and kind in ("kernel", "ovs", "native") and alg in ran:
        return f"ran only {alg}, as {compared} does"
    return None


def is_policy_scheme(scheme: str) -> bool:
    return scheme.partition(":")[2].startswith("policy:")


def ratio_rows(rows: Iterable[dict], pairs: Sequence[Tuple[str, str]]) -> List[dict]:
    """For each cell (client, file_bytes; in first-seen order) and compared pair (A, B) that
    both ran there: the ratio of mean TCTs A / B with its bootstrap 95% interval and the verdict
    (`compare`). Repetitions alternate the schemes in time, so the successful transfers are
    paired by repetition number; a repetition that only one of the two completed is dropped.
    Returns dicts with client, file_bytes, a, b, n_pairs, ratio, lo, hi (None when no repetition
    pairs up, and lo/hi None below MIN_VERDICT_N pairs) and verdict (`Verdict.as_dict`)."""
    rows = list(rows)
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
            only = None
            if is_policy_scheme(a):
                only = ran_only_text([r for r in rows if (r["client"], r.get("file_bytes"), r["scheme"])
                                      == (client, size, a)], b)
            v = compare([cell[a][i] for i in reps], [cell[b][i] for i in reps], ran_only=only)
            if v.interval is None and v.n >= MIN_VERDICT_N and v.ratio is not None:
                # "ran only" skips the bootstrap; the table still shows the interval of the figures
                _, lo, hi = ratio_ci95([cell[a][i] for i in reps], [cell[b][i] for i in reps])
            else:
                lo, hi = v.interval or (None, None)
            out.append({"client": client, "file_bytes": size, "a": a, "b": b, "n_pairs": len(reps),
                        "ratio": v.ratio, "lo": lo, "hi": hi, "verdict": v.as_dict()})
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
    """The ratio rows as text: "client  A / B  ratio  [lo, hi]  n  verdict" (schemes by their
    display labels; no interval below MIN_VERDICT_N pairs); empty for no rows."""
    if not ratios:
        return ""
    head = ["client", "A / B", "ratio", "95% CI (bootstrap)", "n", "verdict"]
    lines = []
    for r in ratios:
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.3f}"
        ci = "-" if r["lo"] is None else f"[{r['lo']:.3f}, {r['hi']:.3f}]"
        lines.append([r["client"], f"{display_label(r['a'])} / {display_label(r['b'])}", ratio, ci,
                      str(r["n_pairs"]), verdict_word(r["verdict"])])
    title = (f"ratio of mean TCT, A / B (transfers paired by repetition; n = pairs; no interval and no "
             f"verdict below {MIN_VERDICT_N} pairs; A better or worse only when the interval excludes 1)")
    return title + "\n" + text_table(head, lines, right=range(2, len(head) - 1))


def verdict_word(verdict: dict) -> str:
    """A verdict for a table whose other columns already show the ratio and interval:
    "better", "no difference", "too few pairs", "ran only bbr, as kernel:bbr does"."""
    kind = verdict["kind"]
    if kind == "too few":
        return "too few pairs"
    if kind == "ran only":
        return verdict["text"]
    return verdict["text"].split(" (", 1)[0]


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
    return ("; ".join(parts) or "ok") + python_troubles(row)


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
        cells = [r["client"], display_label(r["scheme"]), str(r["n"]), med, mean, ci,
                 str(r["integrity_failures"]), str(r.get("errors", 0)), r.get("status") or cell_status(r)]
        if with_ended:
            cells.insert(-1, ended_on_text(r.get("ended_on")) if ":policy:" in r["scheme"] else "-")
        lines.append(cells)
    left = {0, 1, len(head) - 1} | ({len(head) - 2} if with_ended else set())  # words, not figures
    table = text_table(head, lines, right=[i for i in range(len(head)) if i not in left])
    metrics = format_metrics_table(summary)
    return table + "\n\n" + metrics if metrics else table


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


def _figure(x: Optional[float], digits: int) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def median_ci_text(med: Optional[float], ci: Optional[Sequence[float]], digits: int = 2) -> str:
    """"12.31 [11.90, 12.70]", "12.31" without an interval, "-" without a median."""
    if med is None:
        return "-"
    text = _figure(med, digits)
    return f"{text} [{_figure(ci[0], digits)}, {_figure(ci[1], digits)}]" if ci else text


#: Columns of the "throughput and delay" table: (summary key prefix, header, digits).
METRICS_TABLE = (("throughput_mbps", "throughput Mbit/s", 2), ("delay_p50_ms", "delay p50 ms", 1),
                 ("delay_p95_ms", "delay p95 ms", 1), ("delay_p99_ms", "delay p99 ms", 1),
                 ("retrans_segs", "retrans", 1), ("path_drops", "drops", 1))


def format_metrics_table(summary: List[dict]) -> str:
    """The second summary table, "throughput and delay": per (client, scheme) the median and
    [95% interval of the mean] of throughput, one-way delay p50/p95/p99, retransmitted
    segments and path drops; empty when no row carries any of them (runs older than the probe)."""
    if not any(r.get(f"{key}_median") is not None for r in summary for key, _, _ in METRICS_TABLE):
        return ""
    head = ["client", "scheme", "n"] + [title for _, title, _ in METRICS_TABLE]
    lines = [[r["client"], display_label(r["scheme"]), str(r["n"])]
             + [median_ci_text(r.get(f"{key}_median"), r.get(f"{key}_ci95"), digits) for key, _, digits in METRICS_TABLE]
             for r in summary]
    title = "throughput and delay (median [95% CI of the mean]; delay = one-way, per packet)"
    return title + "\n" + text_table(head, lines, right=range(2, len(head)))


def _decoded(value):
    """A row's `flows` / `workload` as a Python object (JSON text as some readers keep it)."""
    if isinstance(value, str):
        import json

        return json.loads(value)
    return value


def _pair_key(r: dict) -> tuple:
    return r.get("file_bytes"), r.get("repetition")


def competition_rows(rows: Iterable[dict]) -> List[dict]:
    """Per client with competing flows and scheme under test (first-seen order), over its
    counted units: each flow's median throughput and one-way delay p95 (by flow index, with its
    role and scheme), Jain's index median [95% CI of the mean], the shared interval's median,
    and the harm the scheme under test does to each competitor (Ware et al.; `paired_harm`):
    the reference is the unit of the same client whose scheme under test is the competitor's
    own scheme, paired by (file size, repetition); on throughput (more is better) and on delay
    p95 (less is better). Below HARM_MIN_PAIRS pairs the harm has no interval and `reason`
    says so; the reference scheme itself gets reason "the reference itself"."""
    from .measurements import paired_harm

    units = [r for r in rows if counted(r) and _decoded(r.get("flows")) and len(_decoded(r["flows"])) > 1]
    groups: Dict[tuple, List[dict]] = {}
    for r in units:
        groups.setdefault((r["client"], r["scheme"]), []).append(r)
    out = []
    for (client, scheme), group in groups.items():
        flows: Dict[int, dict] = {}
        for r in group:
            for f in _decoded(r["flows"]):
                cell = flows.setdefault(int(f["flow"]), {"flow": int(f["flow"]), "role": f.get("role"),
                                                         "scheme": f.get("scheme"), "tput": [], "delay": []})
                if f.get("throughput_mbps") is not None:
                    cell["tput"].append(float(f["throughput_mbps"]))
                if f.get("delay_p95_ms") is not None:
                    cell["delay"].append(float(f["delay_p95_ms"]))
        jain_med, jain_ci = median_and_ci95([float(r["jain"]) for r in group if r.get("jain") is not None])
        shared = [float(r["shared_s"]) for r in group if r.get("shared_s") is not None]
        row = {"client": client, "scheme": scheme, "n": len(group), "jain_median": jain_med, "jain_ci95": jain_ci,
               "shared_s_median": median(shared) if shared else None,
               "flows": [{"flow": c["flow"], "role": c["role"], "scheme": c["scheme"], "n": len(c["tput"]),
                          "throughput_mbps_median": median(c["tput"]) if c["tput"] else None,
                          "delay_p95_ms_median": median(c["delay"]) if c["delay"] else None}
                         for c in sorted(flows.values(), key=lambda c: c["flow"])],
               "harm": []}
        for c in row["flows"]:
            if c["role"] != "competitor":
                continue
            entry = {"flow": c["flow"], "competitor": c["scheme"], "throughput": None, "delay_p95": None,
                     "reason": None}
            reference = groups.get((client, c["scheme"]))
            if c["scheme"] == scheme:
                entry["reason"] = "the reference itself"
            elif not reference:
                entry["reason"] = f"no unit with {c['scheme']} under test"
            else:
                for metric, key, higher in (("throughput", "throughput_mbps", True), ("delay_p95", "delay_p95_ms", False)):
                    x, y = _flow_values(reference, c["flow"], key), _flow_values(group, c["flow"], key)
                    # a zero reference throughput (or zero delay with A) leaves harm undefined: not a pair
                    pairs = [k for k in x if k in y and (x[k] if higher else y[k]) > 0]
                    entry[metric] = paired_harm([x[k] for k in pairs], [y[k] for k in pairs], higher)
            row["harm"].append(entry)
        out.append(row)
    return out


def _flow_values(units: Sequence[dict], flow: int, key: str) -> Dict[tuple, float]:
    """{(file size, repetition): the value of `key` of flow `flow`} over units (first one wins)."""
    out: Dict[tuple, float] = {}
    for r in units:
        for f in _decoded(r["flows"]):
            if int(f["flow"]) == flow and f.get(key) is not None:
                out.setdefault(_pair_key(r), float(f[key]))
    return out


def _harm_text(h: Optional[dict]) -> str:
    if h is None:
        return "-"
    if h["harm"] is None:
        return h["reason"] or "-"
    text = median_ci_text(h["harm"], h["ci95"], 3)
    return f"{text} ({h['reason']})" if h["reason"] else text


def format_competition(rows: List[dict]) -> str:
    """competition_rows as text: the flows' medians, then Jain's index and harm per scheme."""
    if not rows:
        return ""
    flow_lines = [[r["client"], display_label(r["scheme"]), str(f["flow"]), f["role"] or "-",
                   display_label(f["scheme"] or "-"), str(f["n"]), _figure(f["throughput_mbps_median"], 2),
                   _figure(f["delay_p95_ms_median"], 1)] for r in rows for f in r["flows"]]
    flows = text_table(["client", "scheme under test", "flow", "role", "flow's scheme", "n", "throughput Mbit/s",
                        "delay p95 ms"], flow_lines, right=(2, 5, 6, 7))
    fair_lines = []
    for r in rows:
        harms = r["harm"] or [None]
        for h in harms:
            fair_lines.append([r["client"], display_label(r["scheme"]), str(r["n"]),
                               median_ci_text(r["jain_median"], r["jain_ci95"], 3), _figure(r["shared_s_median"], 1),
                               "-" if h is None else f"flow {h['flow']} ({display_label(h['competitor'] or '-')})",
                               "-" if h is None else (h["reason"] if h["throughput"] is None else _harm_text(h["throughput"])),
                               "-" if h is None else (h["reason"] if h["delay_p95"] is None else _harm_text(h["delay_p95"]))])
    fair = text_table(["client", "scheme under test", "n", "Jain", "shared s", "harm on", "throughput harm",
                       "delay p95 harm"], fair_lines, right=(2, 3, 4))
    return ("competing flows (medians over repetitions)\n" + flows + "\n\n"
            "fairness and harm (Jain: median [95% CI of the mean]; harm: median [bootstrap 95% CI], "
            "against the competitor's own scheme, paired by repetition)\n" + fair)


def workload_rows(rows: Iterable[dict]) -> List[dict]:
    """Per client and scheme with a web workload (first-seen order), over its counted units:
    requests, completed, failed (summed) and per size bucket the median over repetitions of
    each unit's FCT p50/p99 and slowdown p50/p99, with n (completed requests, summed) and
    `units` (the repetitions with figures in that bucket)."""
    from .measurements import SIZE_BUCKETS

    groups: Dict[tuple, List[dict]] = {}
    for r in rows:
        if counted(r) and _decoded(r.get("workload")):
            groups.setdefault((r["client"], r["scheme"]), []).append(_decoded(r["workload"]))
    out = []
    for (client, scheme), works in groups.items():
        row = {"client": client, "scheme": scheme, "units": len(works),
               "requests": sum(int(w.get("requests") or 0) for w in works),
               "completed": sum(int(w.get("completed") or 0) for w in works),
               "failed": sum(int(w.get("failed") or 0) for w in works), "buckets": {}}
        for b, _, _ in SIZE_BUCKETS:
            cell = {"n": sum(int(w.get(f"n_{b}") or 0) for w in works),
                    "units": sum(1 for w in works if w.get(f"fct_{b}_p50_s") is not None)}
            for out_key, key in (("fct_p50_s", f"fct_{b}_p50_s"), ("fct_p99_s", f"fct_{b}_p99_s"),
                                 ("slowdown_p50", f"slowdown_{b}_p50"), ("slowdown_p99", f"slowdown_{b}_p99")):
                values = [float(w[key]) for w in works if w.get(key) is not None]
                cell[out_key] = median(values) if values else None
            row["buckets"][b] = cell
        out.append(row)
    return out


def format_workload(rows: List[dict]) -> str:
    """workload_rows as text: one line per client, scheme and size bucket."""
    if not rows:
        return ""
    lines = [[r["client"], display_label(r["scheme"]), b, str(c["n"]), str(c["units"]), _figure(c["fct_p50_s"], 3),
              _figure(c["fct_p99_s"], 3), _figure(c["slowdown_p50"], 2), _figure(c["slowdown_p99"], 2)]
             for r in rows for b, c in r["buckets"].items()]
    head = ["client", "scheme", "size", "n", "reps", "FCT p50 s", "FCT p99 s", "slowdown p50", "slowdown p99"]
    return ("web workload: flow completion time by size (each repetition's percentile, median over repetitions; "
            "n = completed requests)\n" + text_table(head, lines, right=range(3, len(head))))


def power(throughput_mbps: Optional[float], delay_p95_ms: Optional[float]) -> Optional[float]:
    """Kleinrock's power of a flow: throughput / delay (Mbit/s per ms of one-way delay p95)."""
    if throughput_mbps is None or not delay_p95_ms:
        return None
    return throughput_mbps / delay_p95_ms


def phase_rows(rows: Iterable[dict]) -> List[dict]:
    """Per client whose path follows a schedule, per phase (the time between two of its steps):
    each scheme's median throughput, one-way delay p95 and power over its counted units, the
    best scheme by median power and whether it beats the runner-up (`compare`, paired by
    repetition; "too few" below MIN_VERDICT_N pairs)."""
    cells: Dict[tuple, Dict[str, Dict[tuple, dict]]] = {}
    for r in rows:
        phases = _decoded(r.get("phases"))
        if not phases or not counted(r):
            continue
        for k, ph in enumerate(phases):
            cells.setdefault((r["client"], k), {}).setdefault(r["scheme"], {})[_pair_key(r)] = ph
    out = []
    for (client, k), by_scheme in cells.items():
        schemes = []
        for scheme, units in by_scheme.items():
            first = next(iter(units.values()))
            powers = {key: power(ph.get("throughput_mbps"), ph.get("delay_p95_ms")) for key, ph in units.items()}
            vals = lambda key_: [ph[key_] for ph in units.values() if ph.get(key_) is not None]  # noqa: E731
            schemes.append({"scheme": scheme, "n": len(units), "at_s": first["at_s"],
                            "throughput_mbps": median(vals("throughput_mbps")) if vals("throughput_mbps") else None,
                            "delay_p95_ms": median(vals("delay_p95_ms")) if vals("delay_p95_ms") else None,
                            "power": median([p for p in powers.values() if p is not None])
                            if any(p is not None for p in powers.values()) else None,
                            "_powers": powers})
        ranked = sorted((x for x in schemes if x["power"] is not None), key=lambda x: -x["power"])
        verdict = None
        if len(ranked) >= 2:
            a, b = ranked[0]["_powers"], ranked[1]["_powers"]
            keys = sorted(k_ for k_ in a if k_ in b and a[k_] is not None and b[k_] is not None)
            v = compare([a[k_] for k_ in keys], [b[k_] for k_ in keys], lower_is_better=False)
            verdict = {"against": ranked[1]["scheme"], "text": v.text, "kind": v.kind}
        for x in schemes:
            x.pop("_powers")
        out.append({"client": client, "phase": k, "at_s": schemes[0]["at_s"], "schemes": schemes,
                    "best": ranked[0]["scheme"] if ranked else None, "best_vs_runner_up": verdict})
    return out


def format_phases(rows: List[dict]) -> str:
    """phase_rows as text: a line per client, phase and scheme, then the best of each phase."""
    if not rows:
        return ""
    lines = [[r["client"], f"{r['phase']} (from {r['at_s']:g} s)", display_label(x["scheme"]), str(x["n"]),
              _figure(x["throughput_mbps"], 2), _figure(x["delay_p95_ms"], 1), _figure(x["power"], 3)]
             for r in rows for x in r["schemes"]]
    head = ["client", "phase", "scheme", "n", "throughput Mbit/s", "delay p95 ms", "power"]
    best = [f"{r['client']} phase {r['phase']}: best {display_label(r['best'])}"
            + (f", against {display_label(r['best_vs_runner_up']['against'])}: {r['best_vs_runner_up']['text']}"
               if r["best_vs_runner_up"] else "") for r in rows if r["best"]]
    return ("paths that change: each phase of the schedule (medians over repetitions; power = throughput / "
            "delay p95)\n" + text_table(head, lines, right=range(3, len(head))) + "\n" + "\n".join(best))


def transfer_costs(rows: Sequence[dict], objective: str) -> List[Optional[float]]:
    """Each transfer's cost under an objective (learner/objectives.py; lower is better), None
    where it has none (it failed, or a figure the objective reads is missing). Per transfer,
    without a competitor: a scenario may not name `harm` (scenario.py refuses it)."""
    from ..learner import objectives

    table = {"tct_x": [r.get("tct_s") if counted(r) else None for r in rows],
             "thr_x": [r.get("throughput_mbps") for r in rows], "dp95_x": [r.get("delay_p95_ms") for r in rows]}
    table = {k: [float("nan") if v is None else float(v) for v in vals] for k, vals in table.items()}
    cost = objectives.cost_matrix(table, ["x"], objective)[:, 0]
    return [None if math.isnan(c) else float(c) for c in cost]


def objective_rows(rows: Iterable[dict], objective: str) -> List[dict]:
    """Per client and scheme, the objective's cost: median and 95% interval; and per client, each
    policy scheme against the fixed scheme with the least median cost there (`compare` on the
    costs, paired by repetition when both have every repetition; "ran only X" when the policy
    ran what that scheme runs)."""
    rows = list(rows)
    out = []
    for client in dict.fromkeys(r["client"] for r in rows):
        mine = [r for r in rows if r["client"] == client]
        by_scheme: Dict[str, Dict[int, float]] = {}
        for r, c in zip(mine, transfer_costs(mine, objective)):
            if c is not None:
                by_scheme.setdefault(r["scheme"], {})[int(r.get("repetition") or 0)] = c
        entries = []
        for scheme, costs in by_scheme.items():
            med, ci = median_and_ci95(list(costs.values()))
            entries.append({"client": client, "scheme": scheme, "n": len(costs), "cost_median": med, "ci95": ci})
        fixed = [e for e in entries if not is_policy_scheme(e["scheme"])]
        best = min(fixed, key=lambda e: e["cost_median"])["scheme"] if fixed else None
        for e in entries:
            e["best_fixed"] = e["scheme"] == best
            if is_policy_scheme(e["scheme"]):
                e["ran"] = [run_text(r) for r in mine if r["scheme"] == e["scheme"] and counted(r)]
            if best and is_policy_scheme(e["scheme"]):
                a, b = by_scheme[e["scheme"]], by_scheme[best]
                reps = sorted(set(a) & set(b))
                paired = len(reps) == len(a) == len(b)
                v = compare([a[k] for k in reps] if paired else list(a.values()),
                            [b[k] for k in reps] if paired else list(b.values()), paired=paired,
                            ran_only=ran_only_text([r for r in mine if r["scheme"] == e["scheme"]], best))
                e["against"] = best
                e["verdict"] = v.as_dict()
        out += entries
    return out


def run_text(row: dict) -> str:
    """What a policy's flow ran and when it changed: "bbr > vegas at 0.4 s > bbr at 2.3 s"."""
    algs = row.get("algorithms") or []
    if not algs:
        return "-"
    parts = [str(algs[0])]
    for h in row.get("handover_events") or []:
        parts.append(f"{h.get('to')} at {h['t_s']:.1f} s" if h.get("t_s") is not None else str(h.get("to")))
    return " > ".join(parts)


def format_objective(rows: List[dict], objective: str) -> str:
    lines = [[r["client"], display_label(r["scheme"]), str(r["n"]), median_ci_text(r["cost_median"], r["ci95"], 4),
              "best fixed" if r["best_fixed"] else (f"vs {display_label(r['against'])}: {r['verdict']['text']}"
                                                    if r.get("verdict") else "")] for r in rows]
    ran = [f"  {r['client']} {display_label(r['scheme'])} ran: {'; '.join(r['ran'])}" for r in rows if r.get("ran")]
    return (f"objective {objective} (cost per transfer, lower is better; learner/README.md, \"Objectives\")\n"
            + text_table(["client", "scheme", "n", "median cost [95% CI]", "verdict"], lines)
            + ("\n" + "\n".join(ran) if ran else ""))


def summary_sections(rows: Iterable[dict], objective: Optional[str] = None) -> Tuple[dict, str]:
    """The summary parts beyond the per-cell table, for whatever the rows contain: ({"competition":
    competition_rows, "workload": workload_rows, ...} (only the non-empty ones) for summary.json,
    and their text for summary.txt ("" when there is none); with the scenario's `objective`,
    its costs and verdicts too."""
    rows = list(rows)
    doc, parts = {}, []
    if objective:
        built = objective_rows(rows, objective)
        if built:
            doc["objective"] = {"name": objective, "rows": built}
            parts.append(format_objective(built, objective))
    for key, build, fmt in (("competition", competition_rows, format_competition),
                            ("workload", workload_rows, format_workload),
                            ("phases", phase_rows, format_phases)):
        built = build(rows)
        if built:
            doc[key] = built
            parts.append(fmt(built))
    return doc, "\n\n".join(parts)
