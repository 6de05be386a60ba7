"""What a run needs from the machine, checked before anything is set up: root, the tools
(mahimahi, nginx, curl, ss, ip, runuser), the unprivileged user mahimahi runs as, the Rust
binaries (`bin_dir`: $CCSWITCH_BIN_DIR or the repository's target/release), and the agent's
own verdict on every agent scheme of the scenario (`check_agent_schemes`)."""

from __future__ import annotations

import os
import pwd
import shutil
from typing import Callable, List, Optional

from ..topology.daemons import CcswitchDaemons, agent_check_env, check_agent_spec
from ..topology.namespaces import log
from .errors import RunError
from ..topology import bridges as _ovs, schedule as _schedule
from ..topology.probe import PROBE_BIN
from .scenario import Scenario, check_schemes


MM_USER = "mmuser"


REQUIRED_TOOLS = ("ip", "runuser", "nginx", "curl", "ss", "mm-delay", "mm-link", "mm-loss")


def repo_root() -> str:
    """The repository this package lives in (python/ccswitch/experiments -> repo)."""
    return os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))


def bin_dir() -> str:
    """Where the Rust binaries are: $CCSWITCH_BIN_DIR or <repo>/target/release."""
    env = os.environ.get("CCSWITCH_BIN_DIR")
    if env:
        return env
    candidates = [os.path.join(repo_root(), "target", "release"), os.path.join(os.getcwd(), "target", "release")]
    for c in candidates:
        if os.access(os.path.join(c, "ccswitch-agent"), os.X_OK):
            return c
    return candidates[0]


def check_environment(scenario: Scenario, measure: bool = True) -> Optional[str]:
    """Raise RunError if the machine cannot run the scenario; returns the binary dir."""
    if os.geteuid() != 0:
        raise RunError("ccswitch run must run as root (it creates network namespaces and sets sysctls)")
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        raise RunError(f"missing tools: {', '.join(missing)} (mahimahi, nginx, curl, iproute2 are needed; "
                       "see scripts/setup.sh)")
    try:
        pwd.getpwnam(MM_USER)
    except KeyError:
        raise RunError(f"user {MM_USER!r} does not exist (mahimahi refuses to run as root; "
                       f"create it with: useradd -m {MM_USER})") from None
    bridge = scenario.bridge_kind
    if scenario.uses_ovs and bridge == "none":
        raise RunError("ovs: schemes need a bridge; set bridge = \"ovs\" or \"linux\" in the scenario")
    missing = [t for t in _ovs.BRIDGE_TOOLS[bridge] if shutil.which(t) is None]
    if missing:
        raise RunError(f"bridge = {bridge!r} needs {', '.join(missing)} (openvswitch-switch, ethtool; "
                       "see scripts/setup.sh)")
    if bridge == "ovs" and not os.path.exists(_ovs.OVS_SCHEMA):
        raise RunError(f"bridge = 'ovs': the OVS database schema {_ovs.OVS_SCHEMA} is missing")
    bdir = None
    if scenario.uses_agent:
        bdir = bin_dir()
        names = ["ccswitch-agent"]
        names += ["ccswitch-kernel"] if scenario.uses_kernel else []
        names += [_ovs.OVS_BIN] if scenario.uses_ovs else []
        missing = CcswitchDaemons.missing_binaries(bdir, names)
        if missing:
            raise RunError(f"scheme(s) {', '.join(s.label for s in scenario.schemes if s.uses_agent)} "
                           f"need the Rust binaries, not found or not executable: {', '.join(missing)} "
                           "(build them with `cargo build --release`, or set CCSWITCH_BIN_DIR)")
    tools = [PROBE_BIN] if measure else []
    tools += [_schedule.BINARY_NAME] if any(c.schedule for c in scenario.clients) else []
    missing = CcswitchDaemons.missing_binaries(bin_dir(), tools)
    if missing:
        raise RunError(f"the measurements and path schedules need {', '.join(missing)}, not found or not executable "
                       "(build them with `cargo build --release`, or set CCSWITCH_BIN_DIR)")
    return bdir


def scenario_python_path(scenario: Scenario) -> List[str]:
    """What the agents of a run get on PYTHONPATH before the package: the scenario's directory."""
    return [os.path.dirname(os.path.abspath(scenario.source))] if scenario.source else []


def check_agent_schemes(scenario: Scenario, bdir: Optional[str] = None) -> None:
    """Before anything runs: let the agent judge every agent scheme's algorithm, parameters,
    `py:` class (imported in a trial agent, with the scenario's directory on PYTHONPATH as
    at run time) and policy. Raises ScenarioError naming the scheme and the agent's reason;
    RunError if there is no agent binary to ask."""
    if not scenario.uses_agent:
        return
    agent = os.path.join(bdir or bin_dir(), "ccswitch-agent")
    if not os.access(agent, os.X_OK):
        raise RunError(f"scheme(s) {', '.join(s.label for s in scenario.schemes if s.uses_agent)} need "
                       f"{agent}, not found or not executable (build it with `cargo build --release`, "
                       "or set CCSWITCH_BIN_DIR)")
    env = agent_check_env(scenario_python_path(scenario))
    check_schemes(scenario, lambda algorithm, policy: check_agent_spec(agent, algorithm, policy, env))


def checked_here(check: Callable[[], None], distributed: bool) -> bool:
    """Run the agent's check of the schemes here; on a cluster whose client has no agent
    binary, leave it to each unit's worker (returns False then)."""
    try:
        check()
        return True
    except RunError as e:
        if not distributed or "not found or not executable" not in str(e):
            raise
        log(f"note: {e}; each worker checks the schemes before its unit instead")
        return False
