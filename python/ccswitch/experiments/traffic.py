"""The traffic of one transfer (unit): which downloads its client makes, and what they gave.

A unit is one scheme on one client at one file size and repetition. Its client carries:
- one flow of the scheme under test (a scenario client without `flows` or `workload`);
- several flows on the same bottleneck (`flows`): flows of the scheme under test, fetched from
  the run's server, and competing `native:ALG` flows, each fetched from a server namespace of
  its own whose default congestion control is ALG, each with its start offset;
- or a web workload (`workload`): requests at Poisson times with heavy-tailed sizes, all from
  the run's server (byte ranges of one served file, so any size needs no file of its own).

`jobs_for_unit` turns that into the jobs of the client driver (client_driver.py); `flow_rows`
and `workload_requests` read the driver's result back, one dict per flow or request, with
curl's own timings and whether the bytes arrived intact.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .measurements import ideal_fct_s
from .scenario import Client, Scheme

#: What a driver result line of curl holds (client_driver.CURL_FORMAT, after its mark).
CURL_FIELDS = ("tct_s", "ttfb_s", "connect_s", "bytes", "http_code", "client_port")
#: The one file a workload's requests take byte ranges of.
WORKLOAD_FILE = "workload.bin"


@dataclass(frozen=True)
class Job:
    """One download of the unit: `flow` numbers the flows (requests of a workload are flows
    too), `role` is "test" (the scheme under test) or "competitor"."""

    flow: int
    role: str
    scheme: str
    start_s: float
    size: int
    url: str
    ranged: bool = False


def server_key(scheme: Optional[Scheme]) -> Optional[str]:
    """Which server a flow is fetched from: None = the run's server (the scheme under test),
    else the native congestion control of a competitor's own server namespace."""
    return None if scheme is None else scheme.algorithm


def competitor_ccs(clients: Sequence[Client]) -> List[str]:
    """The native congestion controls that competing flows of the scenario need a server for."""
    out: List[str] = []
    for c in clients:
        for f in c.flows:
            if f.scheme is not None and f.scheme.algorithm not in out:
                out.append(f.scheme.algorithm)
    return out


def jobs_for_unit(client: Client, scheme: Scheme, size: int, rep: int,
                  url: Callable[[Optional[str], str], str]) -> List[Job]:
    """The unit's downloads in flow order. `url(server_key, path)` names a file on a server."""
    if client.workload is not None:
        return [Job(i, "test", scheme.label, t, s, url(None, "/" + WORKLOAD_FILE), ranged=True)
                for i, (t, s) in enumerate(client.workload.sample(client.workload.seed + rep))]
    if not client.flows:
        return [Job(0, "test", scheme.label, 0.0, size, url(None, f"/f-{size}.bin"))]
    jobs: List[Job] = []
    for f in client.flows:
        nbytes = f.file_bytes or size
        for _ in range(f.count):
            own = f.scheme is None
            jobs.append(Job(len(jobs), "test" if own else "competitor", scheme.label if own else f.scheme.label,
                            f.start_s, nbytes, url(server_key(f.scheme), f"/f-{nbytes}.bin")))
    return jobs


def served_sizes(client: Client) -> List[int]:
    """Sizes of the files the client's units download whole (a workload takes ranges of one)."""
    if client.workload is not None:
        return []
    sizes = list(client.file_sizes)
    sizes += [f.file_bytes for f in client.flows if f.file_bytes]
    return sizes


def driver_spec(jobs: Sequence[Job], work: str, max_time_s: float) -> dict:
    """The client driver's jobs; each downloads to its own file in `work`."""
    return {"jobs": [{"i": j.flow, "t_s": j.start_s, "url": j.url, "out": os.path.join(work, f"job-{j.flow}.bin"),
                      "max_time_s": max_time_s, "range": [0, j.size - 1] if j.ranged else None} for j in jobs]}


def parse_curl_line(line: str) -> Optional[dict]:
    """curl's -w line of the driver (mark, then CURL_FIELDS)."""
    f = line.split()
    if len(f) != len(CURL_FIELDS) + 1:
        return None
    try:
        return {"tct_s": float(f[1]), "ttfb_s": float(f[2]), "connect_s": float(f[3]), "bytes": int(float(f[4])),
                "http_code": int(f[5]), "client_port": int(f[6])}
    except ValueError:
        return None


class PrefixHashes:
    """SHA-256 of the first n bytes of a served file, for ranged downloads (cached by n)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._cache: Dict[int, str] = {}

    def __call__(self, n: int) -> str:
        if n not in self._cache:
            h = hashlib.sha256()
            with open(self.path, "rb") as f:
                left = n
                while left:
                    chunk = f.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    h.update(chunk)
                    left -= len(chunk)
            self._cache[n] = h.hexdigest()
        return self._cache[n]


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def job_results(jobs: Sequence[Job], result: Optional[dict], spec: dict,
                expected_sha: Callable[[Job], str]) -> List[dict]:
    """One dict per job: the job, curl's timings, its error (curl's message, an HTTP status
    other than 200/206, or "no result"), whether the downloaded bytes hashed as served. The
    downloaded files are deleted."""
    by_i = {j["i"]: j for j in (result or {}).get("jobs", [])}
    outs = {j["i"]: j["out"] for j in spec["jobs"]}
    t0 = (result or {}).get("t0")
    rows = []
    for job in jobs:
        d = {"flow": job.flow, "role": job.role, "scheme": job.scheme, "start_s": job.start_s,
             "file_bytes": job.size, "tct_s": None, "ttfb_s": None, "connect_s": None, "bytes": None,
             "http_code": None, "client_port": None, "sha256_ok": False, "error": None, "curl_exit": None,
             "started_s": None}
        got = by_i.get(job.flow)
        out = outs[job.flow]
        if got is None:
            d["error"] = "no result from the client driver"
        else:
            d["started_s"] = None if t0 is None else round(got["started"] - t0, 4)
            parsed = parse_curl_line(got["curl"]) if got["curl"] else None
            if parsed:
                d.update(parsed)
            if got["exit"] != 0:
                d["curl_exit"] = got["exit"]
                msg = got["stderr"].strip().splitlines()
                d["error"] = msg[-1] if msg else f"curl exit {got['exit']}"
            elif not parsed:
                d["error"] = f"no curl timing output: {got['curl'][:200]}"
            elif parsed["http_code"] not in (200, 206):
                d["error"] = f"HTTP {parsed['http_code']}"
        if os.path.exists(out):
            if d["error"] is None:
                d["sha256_ok"] = sha256_file(out) == expected_sha(job)
            os.unlink(out)
        if d["error"] is not None:
            for k in ("tct_s", "ttfb_s", "connect_s"):
                d[k] = None
        rows.append(d)
    return rows


def read_result(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def workload_requests(results: Sequence[dict], rtt_s: float, rate_mbps: Optional[float]) -> List[dict]:
    """The request file's lines (experiments/README.md, "Web workloads")."""
    out = []
    for r in results:
        ideal = ideal_fct_s(r["file_bytes"], rtt_s, rate_mbps) if rate_mbps else None
        ok = r["error"] is None and r["sha256_ok"]
        fct = r["tct_s"] if ok else None
        out.append({"i": r["flow"], "t_s": r["start_s"], "size": r["file_bytes"], "fct_s": fct, "ttfb_s": r["ttfb_s"],
                    "ideal_s": ideal, "slowdown": (fct / ideal) if fct is not None and ideal else None, "ok": ok,
                    "error": r["error"] if r["error"] is not None else (None if ok else "SHA-256 mismatch"),
                    "client_port": r["client_port"]})
    return out
