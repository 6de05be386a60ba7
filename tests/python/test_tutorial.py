"""docs/authoring.md, executed: every ```sh block of the tutorial runs, in order, in one bash
with -e, from the repository's root and with HOME in a temporary directory, as a newcomer
would type it (so the tutorial cannot rot). Then what the tutorial promises is checked: both
runs delivered every file intact, the algorithm never raised, the comparison figures exist,
and the one-line change took effect (the window kept at a loss went from 1/2 to 4/5).
Needs root, mahimahi, nginx and the Rust binaries, as `ccswitch run` does; it fails rather
than skips without them."""

import glob
import json
import os
import re
import subprocess

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TUTORIAL = os.path.join(ROOT, "docs", "authoring.md")


def shell_blocks(markdown: str):
    return re.findall(r"^```sh\n(.*?)^```$", markdown, re.S | re.M)


def test_the_tutorials_blocks_are_found_in_order():
    blocks = shell_blocks(open(TUTORIAL).read())
    assert len(blocks) == 5
    assert blocks[0].startswith("mkdir -p ~/cc-tutorial\ncat > ~/cc-tutorial/aimd.py <<'EOF'\n")
    assert blocks[-1].splitlines()[0].startswith("sed -i 's/^DECREASE = 0.5/DECREASE = 0.8/'")
    # the algorithm is the promised twenty-odd lines
    algorithm = re.search(r"<<'EOF'\n(.*?)^EOF$", blocks[0], re.S | re.M).group(1)
    assert len(algorithm.strip().splitlines()) <= 25


def kept_at_losses(run_dir: str, client: str):
    """Window after / window before at every report of the Python flow on `client` whose
    window fell without a timeout (a congestion event's cut)."""
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "transfers.jsonl"))]
    row, = [r for r in rows if r["client"] == client and r["scheme"] == "kernel:py:aimd:Aimd"]
    reports = [e for e in map(json.loads, open(os.path.join(run_dir, row["events"]))) if e["event"] == "report"]
    return [b["cwnd_bytes"] / a["cwnd_bytes"] for a, b in zip(reports, reports[1:])
            if b["cwnd_bytes"] < a["cwnd_bytes"] and not b["timeout"]]


def test_the_tutorial_runs_as_written(tmp_path):
    script = "set -euo pipefail\n" + "\n".join(shell_blocks(open(TUTORIAL).read()))
    env = dict(os.environ, HOME=str(tmp_path))
    cp = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert cp.returncode == 0, f"stdout:\n{cp.stdout[-4000:]}\nstderr:\n{cp.stderr[-4000:]}"
    work = tmp_path / "cc-tutorial"
    for run in ("run1", "run2"):
        rows = [json.loads(line) for line in open(work / run / "transfers.jsonl")]
        assert sorted((r["client"], r["scheme"]) for r in rows) == [
            ("clean", "kernel:py:aimd:Aimd"), ("clean", "kernel:reno"),
            ("lossy", "kernel:py:aimd:Aimd"), ("lossy", "kernel:reno")]
        assert all(r["sha256_ok"] and not r["error"] for r in rows), rows
        assert all(not r.get("on_report_errors") for r in rows), rows
        assert sorted(os.path.basename(p) for p in glob.glob(str(work / run / "flows" / "compare-*.png"))) == [
            "compare-clean.png", "compare-lossy.png"]
        assert os.path.getsize(work / run / "flows" / "compare-lossy.png") > 10_000
    # the change: each congestion event kept half the window, then four fifths (slow start's
    # growth before a cut can only raise the ratio; the 2-segment floor too)
    for run, kept in (("run1", 0.5), ("run2", 0.8)):
        ratios = kept_at_losses(str(work / run), "lossy")
        assert ratios, f"{run}: no loss cut the window on the lossy path"
        assert min(ratios) >= kept - 0.01, (run, ratios)
        assert any(abs(r - kept) < 0.01 for r in ratios), (run, ratios)
    # compare printed both runs' figures, path by path
    assert "lossy" in cp.stdout and "clean" in cp.stdout
