"""The client side of one transfer: run inside the client's mahimahi shells, as user mmuser.

    runuser -u mmuser -- mm-delay ... mm-link ... -- /usr/bin/python3 client_driver.py SPEC.json

Every transfer of `ccswitch run` goes through this driver, whether it is one download, several
competing downloads with start offsets, or a web workload of many requests at Poisson times.
It exists so that nothing is sent before the harness is ready to measure: the driver first
writes its PID to `ready_file` (the harness then attaches its packet probe to the ingress of
this innermost mahimahi namespace, found through /proc/PID/ns/net, and starts the clock of a
path schedule), waits for `go_file`, and only then starts curl at each job's offset. Each job is
a real curl process whose own timings (`-w`) are kept; the downloaded files are left for the
harness to hash.

It needs nothing but the Python standard library and curl: it runs with the system's
python3 as an unprivileged user, outside the venv and the package.

SPEC.json: {"ready_file", "go_file", "result_file", "go_timeout_s",
            "jobs": [{"i", "t_s", "url", "out", "max_time_s", "range": null | [first, last]}]}
Result: {"t0": CLOCK_MONOTONIC seconds at go, "jobs": [{"i", "started", "ended", "exit",
          "curl": the -w line, "stderr": its last 300 characters}]}
"""

import json
import os
import subprocess
import sys
import time

#: traffic.CURL_FIELDS names the fields after the mark.
CURL_MARK = "CCSWITCH-CURL"
CURL_FORMAT = (CURL_MARK + " %{time_total} %{time_starttransfer} %{time_connect} %{size_download} "
               "%{http_code} %{local_port}\\n")
POLL_S = 0.002


def write_atomic(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


def curl_command(job):
    cmd = ["curl", "-sS", "--noproxy", "*", "--max-time", "%g" % job["max_time_s"], "-o", job["out"],
           "-w", CURL_FORMAT]
    if job.get("range"):
        cmd += ["-r", "%d-%d" % tuple(job["range"])]
    return cmd + [job["url"]]


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    write_atomic(spec["ready_file"], str(os.getpid()))
    deadline = time.monotonic() + spec.get("go_timeout_s", 60)
    while not os.path.exists(spec["go_file"]):
        if time.monotonic() > deadline:
            print("client driver: no go from the harness within %gs" % spec.get("go_timeout_s", 60),
                  file=sys.stderr)
            return 3
        time.sleep(POLL_S)
    t0 = time.monotonic()
    running, done = [], []
    for job in sorted(spec["jobs"], key=lambda j: j["t_s"]):
        wait = t0 + job["t_s"] - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        out = open(job["out"] + ".w", "w")
        err = open(job["out"] + ".err", "w")
        started = time.monotonic()
        proc = subprocess.Popen(curl_command(job), stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        running.append((job, proc, started, out, err))
        # reap what has finished so that its end time is close to the truth
        running = reap(running, block=False, done=done)
    reap(running, block=True, done=done)
    jobs = []
    for job, rc, started, ended in sorted(done, key=lambda d: d[0]["i"]):
        jobs.append({"i": job["i"], "started": started, "ended": ended, "exit": rc,
                     "curl": read_text(job["out"] + ".w").strip(),
                     "stderr": read_text(job["out"] + ".err")[-300:]})
        for suffix in (".w", ".err"):
            try:
                os.unlink(job["out"] + suffix)
            except OSError:
                pass
    write_atomic(spec["result_file"], json.dumps({"t0": t0, "jobs": jobs}))
    return 0



def reap(running, block, done):
    """Collect finished curls (all of them if `block`), recording when each ended."""
    left = []
    while True:
        left = []
        for job, proc, started, out, err in running:
            rc = proc.poll()
            if rc is None:
                left.append((job, proc, started, out, err))
            else:
                out.close()
                err.close()
                done.append((job, rc, started, time.monotonic()))
        if not block or not left:
            return left
        running = left
        time.sleep(POLL_S)


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
