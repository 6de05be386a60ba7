"""The client side of a unit: the jobs of its driver, the driver itself against a local HTTP
server, and what its results become."""

import hashlib
import http.server
import json
import os
import subprocess
import sys
import threading
import time

import pytest

from ccswitch.experiments import client_driver, traffic
from ccswitch.experiments.scenario import loads_scenario

DRIVER = client_driver.__file__

BASE = """
name = "t"
schemes = ["kernel:bbr"]
[[clients]]
name = "a"
delay_ms = 20
link = { mbps = 24 }
queue_packets = 40
"""


def url(server, path):
    return f"http://{server or 'main'}{path}"


def test_a_lone_flow_is_one_job_of_the_scheme_under_test():
    sc = loads_scenario(BASE + "file_bytes = 1000\n", check_files=False)
    (job,) = traffic.jobs_for_unit(sc.clients[0], sc.schemes[0], 1000, 0, url)
    assert (job.flow, job.role, job.scheme, job.start_s, job.size, job.url) == (0, "test", "kernel:bbr", 0.0, 1000,
                                                                               "http://main/f-1000.bin")


def test_competing_flows_come_from_their_algorithms_servers_with_their_offsets():
    sc = loads_scenario(BASE + 'file_bytes = 1000\nflows = [{ scheme = "native:cubic", start_s = 0 }, '
                               '{ start_s = 2, count = 2 }]\n', check_files=False)
    jobs = traffic.jobs_for_unit(sc.clients[0], sc.schemes[0], 1000, 0, url)
    assert [(j.flow, j.role, j.scheme, j.start_s, j.url) for j in jobs] == [
        (0, "competitor", "native:cubic", 0.0, "http://cubic/f-1000.bin"),
        (1, "test", "kernel:bbr", 2.0, "http://main/f-1000.bin"),
        (2, "test", "kernel:bbr", 2.0, "http://main/f-1000.bin")]
    assert traffic.competitor_ccs(sc.clients) == ["cubic"]


def test_a_workload_is_the_same_requests_for_every_scheme_of_a_repetition_and_others_in_the_next():
    sc = loads_scenario(BASE + 'workload = { kind = "poisson", load = 0.5, duration_s = 5, sizes = "pareto" }\n',
                        check_files=False)
    c = sc.clients[0]
    a = traffic.jobs_for_unit(c, sc.schemes[0], 0, 0, url)
    b = traffic.jobs_for_unit(c, sc.schemes[0], 0, 0, url)
    other = traffic.jobs_for_unit(c, sc.schemes[0], 0, 1, url)
    assert a == b and a != other
    assert all(j.ranged and j.url == "http://main/" + traffic.WORKLOAD_FILE for j in a)
    assert all(0 <= j.start_s < 5 for j in a)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    """Serves files and, as nginx does, `Range: bytes=FIRST-LAST` with 206."""

    def log_message(self, *a):
        pass

    def do_GET(self):
        rng = self.headers.get("Range")
        path = self.translate_path(self.path)
        if not rng or not os.path.isfile(path):
            return super().do_GET()
        first, last = (int(x) for x in rng.split("=", 1)[1].split("-"))
        with open(path, "rb") as f:
            f.seek(first)
            body = f.read(last - first + 1)
        self.send_response(206)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def web(tmp_path):
    www = tmp_path / "www"
    www.mkdir()
    data = os.urandom(300_000)
    (www / "f.bin").write_bytes(data)
    handler = lambda *a, **k: _Quiet(*a, directory=str(www), **k)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", data
    srv.shutdown()


def test_the_driver_waits_for_go_then_runs_every_job_at_its_offset_and_reports_curls_timings(tmp_path, web):
    base, data = web
    jobs = [traffic.Job(0, "test", "x", 0.0, len(data), base + "/f.bin"),
            traffic.Job(1, "competitor", "native:cubic", 0.3, 1000, base + "/f.bin", ranged=True),
            traffic.Job(2, "test", "x", 0.0, 10, base + "/missing.bin")]
    spec = traffic.driver_spec(jobs, str(tmp_path), 10)
    spec.update(ready_file=str(tmp_path / "ready"), go_file=str(tmp_path / "go"),
                result_file=str(tmp_path / "result.json"), go_timeout_s=10)
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    p = subprocess.Popen([sys.executable, DRIVER, str(tmp_path / "spec.json")])
    deadline = time.monotonic() + 10
    while not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.01)
    assert int((tmp_path / "ready").read_text()) == p.pid
    time.sleep(0.2)
    assert not (tmp_path / "job-0.bin").exists()  # nothing before go
    (tmp_path / "go").touch()
    assert p.wait(timeout=20) == 0
    result = traffic.read_result(str(tmp_path / "result.json"))
    prefix = {1000: hashlib.sha256(data[:1000]).hexdigest(), len(data): hashlib.sha256(data).hexdigest()}
    rows = traffic.job_results(jobs, result, spec, lambda j: prefix.get(j.size, "none"))
    ok, ranged, missing = rows
    assert ok["error"] is None and ok["sha256_ok"] and ok["bytes"] == len(data) and ok["http_code"] == 200
    assert ok["client_port"] > 0 and ok["tct_s"] > 0
    assert ranged["error"] is None and ranged["sha256_ok"] and ranged["http_code"] == 206
    assert ranged["started_s"] >= 0.3
    assert missing["error"] == "HTTP 404" and not missing["sha256_ok"] and missing["tct_s"] is None
    assert not any((tmp_path / f"job-{i}.bin").exists() for i in range(3))


def test_a_driver_that_never_gets_go_gives_up_and_says_so(tmp_path):
    spec = {"jobs": [], "ready_file": str(tmp_path / "r"), "go_file": str(tmp_path / "g"),
            "result_file": str(tmp_path / "res"), "go_timeout_s": 0.2}
    (tmp_path / "s.json").write_text(json.dumps(spec))
    cp = subprocess.run([sys.executable, DRIVER, str(tmp_path / "s.json")], capture_output=True, text=True, timeout=10)
    assert cp.returncode == 3 and "no go" in cp.stderr
