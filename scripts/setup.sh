#!/usr/bin/env bash
# ccswitch machine setup (run as root by `make setup`).
#
# Idempotent: every step checks first and only acts when something is missing,
# so a second run takes seconds and changes nothing. `apt-get update` runs only
# when a Debian package (or the iptables downgrade) is actually needed.
#
# Installs: the BPF toolchain and test tools from bookworm; mahimahi and its
# traces from bullseye (pinned low) plus bullseye's iptables 1.8.7 on the legacy
# backend (bookworm's 1.8.9 refuses to run setuid, which mahimahi needs);
# openvswitch-switch (+ ethtool, tcpdump) and nginx with their system services
# stopped/disabled (the harness starts private OVS instances in its own namespaces); the
# non-root user `mmuser` for mahimahi shells; ip_forward=1; a Python venv at
# $REPO/.venv with the ccswitch package built into it by maturin.
# See /work/shared/ENVIRONMENT.md for why each piece is needed.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export DEBIAN_FRONTEND=noninteractive

INSTALLED=()   # what this run installed or changed
PRESENT=()     # what was already in place

log()  { printf '[setup] %s\n' "$*"; }
die()  { printf '[setup] ERROR: %s\n' "$*" >&2; exit 1; }
did()  { INSTALLED+=("$1"); log "installed/changed: $1"; }
had()  { PRESENT+=("$1"); }

[[ $(id -u) -eq 0 ]] || die "must run as root (it installs Debian packages and adds a user)"

# ---------------------------------------------------------------------------
# 0. Rust toolchain (cannot be downloaded here: it must already exist)
# ---------------------------------------------------------------------------
if ! command -v cargo >/dev/null 2>&1 && [[ -x /root/.cargo/bin/cargo ]]; then
    export PATH="/root/.cargo/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || die "cargo not found (looked in PATH and /root/.cargo/bin). \
A Rust toolchain cannot be downloaded on this machine; install rustup's toolchain first."
had "cargo ($(cargo --version 2>/dev/null))"

# ---------------------------------------------------------------------------
# 1. Debian packages
# ---------------------------------------------------------------------------
DEB_PKGS=(
    clang llvm bpftool libbpf-dev libelf-dev zlib1g-dev pkg-config make gcc
    nginx-light curl iproute2 ethtool procps kmod patchelf
    python3-dev                         # libpython + headers: the agent embeds Python (pyo3)
    openvswitch-switch                  # the harness runs private instances (python/ccswitch/topology/bridges.py)
    tcpdump                             # captures at the bridge port when debugging the ovs datapath
    linux-perf                          # the TCP-state traces of experiments/measured (perf record of tcp:tcp_probe)
    capnproto                           # compiles the agent's operator schema (agent/build.rs)
    mahimahi mahimahi-traces            # from bullseye, see the pin below
)
IPT_VER="1.8.7-1"
IPT_PKGS=(iptables libxtables12 libip4tc2 libip6tc2)

pkg_installed() {  # pkg_installed NAME -> 0 if dpkg says "install ok installed"
    [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == "install ok installed" ]]
}
pkg_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || true; }

# bullseye source + low pin, with the archive URI taken from this machine's own
# bookworm sources (never hard-code a registry host).
BULLSEYE_LIST=/etc/apt/sources.list.d/bullseye.list
BULLSEYE_PIN=/etc/apt/preferences.d/bullseye
SOURCES_CHANGED=0
ensure_bullseye_source() {
    local uri want_list want_pin
    uri=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    if [[ -z "$uri" ]]; then
        # fall back to a one-line-style sources.list
        uri=$(awk '$1=="deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
    fi
    [[ -n "$uri" ]] || die "cannot find the Debian archive URI in /etc/apt/sources.list.d/debian.sources"
    want_list="deb $uri bullseye main"
    want_pin=$'Package: *\nPin: release n=bullseye\nPin-Priority: 100'
    if [[ "$(cat "$BULLSEYE_LIST" 2>/dev/null)" != "$want_list" ]]; then
        echo "$want_list" > "$BULLSEYE_LIST"; SOURCES_CHANGED=1; did "apt source bullseye"
    fi
    if [[ "$(cat "$BULLSEYE_PIN" 2>/dev/null)" != "$want_pin" ]]; then
        printf '%s\n' "$want_pin" > "$BULLSEYE_PIN"; SOURCES_CHANGED=1; did "apt pin bullseye=100"
    fi
}
ensure_bullseye_source

MISSING=()
for p in "${DEB_PKGS[@]}"; do
    if pkg_installed "$p"; then :; else MISSING+=("$p"); fi
done
IPT_WRONG=()
for p in "${IPT_PKGS[@]}"; do
    [[ "$(pkg_version "$p")" == "$IPT_VER" ]] || IPT_WRONG+=("$p")
done

# Keep services from starting during installation (the harness runs nginx and
# OVS itself inside namespaces). Only add a policy-rc.d if none exists.
POLICY=/usr/sbin/policy-rc.d
POLICY_OURS=0
cleanup_policy() { if [[ $POLICY_OURS -eq 1 ]]; then rm -f "$POLICY"; fi; }
trap cleanup_policy EXIT

if (( ${#MISSING[@]} + ${#IPT_WRONG[@]} > 0 )) || [[ $SOURCES_CHANGED -eq 1 ]]; then
    if [[ ! -e $POLICY ]]; then
        printf '#!/bin/sh\nexit 101\n' > "$POLICY"; chmod 755 "$POLICY"; POLICY_OURS=1
    fi
    log "apt-get update (missing: ${MISSING[*]:-none}; iptables to $IPT_VER: ${IPT_WRONG[*]:-none})"
    apt-get update -q
fi

if (( ${#MISSING[@]} > 0 )); then
    # Held iptables packages (from a previous run) stay at 1.8.7.
    apt-get install -y -q --no-install-recommends "${MISSING[@]}"
    did "deb: ${MISSING[*]}"
else
    had "deb packages (${#DEB_PKGS[@]})"
fi

# iptables 1.8.7 from bullseye: bookworm's 1.8.9 exits 111 under setuid.
IPT_WRONG=()
for p in "${IPT_PKGS[@]}"; do
    [[ "$(pkg_version "$p")" == "$IPT_VER" ]] || IPT_WRONG+=("$p")
done
if (( ${#IPT_WRONG[@]} > 0 )); then
    apt-mark unhold "${IPT_PKGS[@]}" >/dev/null 2>&1 || true
    apt-get install -y -q --allow-downgrades -t bullseye \
        "${IPT_PKGS[@]/%/=$IPT_VER}"
    did "iptables $IPT_VER (bullseye)"
else
    had "iptables $IPT_VER"
fi
# never let apt "upgrade" them back
HELD=$(apt-mark showhold 2>/dev/null || true)
TO_HOLD=()
for p in "${IPT_PKGS[@]}"; do
    grep -qx "$p" <<<"$HELD" || TO_HOLD+=("$p")
done
if (( ${#TO_HOLD[@]} > 0 )); then
    apt-mark hold "${TO_HOLD[@]}" >/dev/null
    did "apt-mark hold ${TO_HOLD[*]}"
fi

# legacy backend for iptables (and ip6tables if that alternative exists)
set_alt() {  # set_alt NAME PATH
    local name=$1 path=$2 cur
    update-alternatives --query "$name" >/dev/null 2>&1 || return 0
    [[ -x $path ]] || return 0
    cur=$(update-alternatives --query "$name" | awk '/^Value:/ {print $2}')
    if [[ "$cur" != "$path" ]]; then
        update-alternatives --set "$name" "$path" >/dev/null
        did "alternative $name -> $path"
    else
        had "alternative $name=legacy"
    fi
}
set_alt iptables  /usr/sbin/iptables-legacy
set_alt ip6tables /usr/sbin/ip6tables-legacy

# ---------------------------------------------------------------------------
# 2. System services we install but must not leave running
# ---------------------------------------------------------------------------
quiet_service() {  # quiet_service NAME -> stopped and disabled at boot
    local svc=$1
    [[ -e /etc/init.d/$svc || -e /lib/systemd/system/$svc.service ]] || return 0
    if service "$svc" status >/dev/null 2>&1; then
        service "$svc" stop >/dev/null 2>&1 || true
        did "stopped system service $svc"
    fi
    if [[ -d /run/systemd/system ]]; then
        if systemctl is-enabled --quiet "$svc" 2>/dev/null; then
            systemctl disable --quiet "$svc" 2>/dev/null || true
            did "disabled $svc (systemd)"
        fi
    fi
    # SysV links: S* links in the runlevel dirs mean "enabled"
    if compgen -G "/etc/rc[2-5].d/S*$svc" >/dev/null; then
        update-rc.d "$svc" disable >/dev/null 2>&1 || true
        did "disabled $svc (rc.d)"
    fi
}
quiet_service nginx
quiet_service openvswitch-switch

# ---------------------------------------------------------------------------
# 3. mahimahi user and forwarding
# ---------------------------------------------------------------------------
if id -u mmuser >/dev/null 2>&1; then
    had "user mmuser"
else
    useradd -m mmuser
    did "user mmuser"
fi

if [[ "$(cat /proc/sys/net/ipv4/ip_forward)" != 1 ]]; then
    sysctl -q -w net.ipv4.ip_forward=1
    did "net.ipv4.ip_forward=1"
else
    had "ip_forward=1"
fi
SYSCTL_CONF=/etc/sysctl.d/60-ccswitch.conf
if [[ "$(cat "$SYSCTL_CONF" 2>/dev/null)" != "net.ipv4.ip_forward = 1" ]]; then
    echo "net.ipv4.ip_forward = 1" > "$SYSCTL_CONF"
    did "$SYSCTL_CONF"
fi

# ---------------------------------------------------------------------------
# 4. Python venv + the ccswitch package
# ---------------------------------------------------------------------------
VENV="$REPO/.venv"
PY_REQS=("maturin>=1.5,<2" pytest pyarrow matplotlib numpy "pycapnp>=2"
         # learner: training (scikit-learn >= 1.4 stores class fractions in tree_.value, which
         # the model file exports as they are) and executing the jupytext notebooks
         "scikit-learn>=1.4" pandas jupytext papermill nbclient ipykernel
         # statistics: t quantiles and the bootstrap of ratios of means (python/ccswitch/experiments/statistics.py)
         scipy
         # distributed execution of runs and sweeps (python/ccswitch/experiments/distributed.py)
         "dask[distributed]")
command -v python3 >/dev/null 2>&1 || die "python3 not found in PATH"

if [[ -x $VENV/bin/python ]] && "$VENV/bin/python" -c 'import sys, pip' >/dev/null 2>&1; then
    had "venv $VENV"
else
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    did "venv $VENV ($("$VENV/bin/python" --version))"
fi

# stamp: hash of the requirement list, pyproject.toml and the venv's python
STAMP="$VENV/.ccswitch-deps.sha256"
want_stamp=$( { printf '%s\n' "${PY_REQS[@]}"; cat "$REPO/pyproject.toml"; \
                "$VENV/bin/python" --version; } | sha256sum | cut -d' ' -f1)
deps_ok() {
    [[ "$(cat "$STAMP" 2>/dev/null)" == "$want_stamp" ]] &&
    "$VENV/bin/python" -c 'import pytest, pyarrow, matplotlib, numpy, capnp, sklearn, scipy, dask, distributed, pandas, jupytext, papermill, nbclient, ipykernel' >/dev/null 2>&1 &&
    "$VENV/bin/maturin" --version >/dev/null 2>&1
}
if deps_ok; then
    had "python deps"
else
    "$VENV/bin/python" -m pip install -q "${PY_REQS[@]}"
    echo "$want_stamp" > "$STAMP"
    did "pip: ${PY_REQS[*]}"
fi

# The Jupyter kernel the learner notebooks name (kernelspec `ccswitch`): the venv's Python,
# registered inside the venv so it never touches a system-wide Jupyter.
KERNEL_JSON="$VENV/share/jupyter/kernels/ccswitch/kernel.json"
if grep -qF "\"$VENV/bin/python\"" "$KERNEL_JSON" 2>/dev/null; then
    had "jupyter kernel ccswitch"
else
    # ipykernel stages the spec in a temporary directory it removes only the inside of.
    spec_tmp=$(mktemp -d)
    TMPDIR="$spec_tmp" "$VENV/bin/python" -m ipykernel install --sys-prefix --name ccswitch --display-name ccswitch >/dev/null
    rm -rf "$spec_tmp"
    did "jupyter kernel ccswitch ($KERNEL_JSON)"
fi

# Build the native extension and install the package (editable) into the venv.
# Always run: cargo decides whether anything needs rebuilding. When the package
# is already installed, only rebuild in place (no pip reinstall).
cd "$REPO"
if "$VENV/bin/python" -c 'import ccswitch._native' >/dev/null 2>&1 &&
   "$VENV/bin/python" -m pip show -q ccswitch >/dev/null 2>&1; then
    VIRTUAL_ENV="$VENV" "$VENV/bin/maturin" develop --release --skip-install
    "$VENV/bin/python" -c 'import ccswitch._native' || die "ccswitch._native no longer imports"
    had "ccswitch package (rebuilt in place if Rust changed)"
else
    VIRTUAL_ENV="$VENV" "$VENV/bin/maturin" develop --release
    "$VENV/bin/python" -c 'import ccswitch._native' || die "ccswitch._native does not import after maturin develop"
    did "ccswitch package (maturin develop --release)"
fi

# ---------------------------------------------------------------------------
# 5. Summary
# ---------------------------------------------------------------------------
echo
echo "== ccswitch setup summary =="
if (( ${#INSTALLED[@]} > 0 )); then
    echo "installed/changed:"; printf '  + %s\n' "${INSTALLED[@]}"
else
    echo "installed/changed: nothing"
fi
echo "already present:"; printf '  = %s\n' "${PRESENT[@]}"
echo "versions: $(clang --version | head -1); $(bpftool version | head -1);" \
     "iptables $(pkg_version iptables); mahimahi $(pkg_version mahimahi)"
