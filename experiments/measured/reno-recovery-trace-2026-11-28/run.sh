#!/bin/sh
# The scenario under a system-wide trace of the kernel's TCP congestion state changes
# (tcp:tcp_cong_state_set) and of each ACK the sender takes (tcp:tcp_probe: cwnd, ssthresh,
# srtt), alone under the experiment lock. Then, off the lock:
# perf script -i OUT/perf.data -F time,event,trace > OUT/trace.txt; episodes.py OUT.
# Usage: run.sh BINS OUT [SCENARIO, default this folder's scenario.toml]
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.." || exit 1
mkdir -p "$2"
flock -x /tmp/ccswitch-experiment.lock env CCSWITCH_BIN_DIR="$1" \
  perf record -a -e tcp:tcp_cong_state_set -e tcp:tcp_probe -o "$2/perf.data" -- \
  .venv/bin/ccswitch run "${3:-$here/scenario.toml}" --out "$2/run" > "$2/run.log" 2>&1
