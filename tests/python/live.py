"""Shared by the tests that drive the real harness pieces (root, mahimahi, Rust binaries)."""

import contextlib
import os

import pytest

from ccswitch.experiments import environment, runner, scenario
from ccswitch.topology.daemons import CcswitchDaemons
from test_integration import require_machine


def require_machine_and_binaries():
    """Root, mahimahi and the rest of the machine (`require_machine`), and the Rust binaries a
    kernel-datapath run starts; fails (never skips) without them."""
    require_machine()
    missing = CcswitchDaemons.missing_binaries(environment.bin_dir())
    if missing:
        pytest.fail(f"Rust binaries not built (make build): {missing}")


@contextlib.contextmanager
def agents_log_debug():
    """Agents started meanwhile log at debug level: every report they answer, with what they
    answered (CCSWITCH_LOG_LEVEL, restored on exit)."""
    saved = os.environ.get("CCSWITCH_LOG_LEVEL")
    os.environ["CCSWITCH_LOG_LEVEL"] = "debug"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("CCSWITCH_LOG_LEVEL", None)
        else:
            os.environ["CCSWITCH_LOG_LEVEL"] = saved


@contextlib.contextmanager
def set_up_runner(tmp_path, scenario_text, before_scheme=lambda r: None):
    """A Runner whose topology is up and whose first scheme is prepared; torn down on exit.
    `before_scheme(r)` runs between the topology and the scheme (e.g. to interpose a proxy)."""
    require_machine_and_binaries()
    path = tmp_path / "scenario.toml"
    path.write_text(scenario_text)
    sc = scenario.load_scenario(str(path))
    r = runner.Runner(sc, str(tmp_path / "out"), quiet=True)
    try:
        r.setup()
        before_scheme(r)
        r.prepare_scheme(sc.schemes[0])
        yield r
    finally:
        r.teardown.run()
