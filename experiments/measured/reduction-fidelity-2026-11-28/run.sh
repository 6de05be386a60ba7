#!/bin/sh
# The scenario on the head's frozen binaries, then on the change's, each alone under the
# experiment lock, into OUT/head and OUT/change (a finished arm is skipped).
# Usage: run.sh HEAD_BINS CHANGE_BINS OUT [SCENARIO, default scenario.toml]
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.." || exit 1
scenario=${4:-scenario.toml}
for arm in change head; do
  bins=$1; [ $arm = change ] && bins=$2
  [ -f "$3/$arm/summary.txt" ] && continue
  echo "$(date -u +%T) $arm"
  flock -x /tmp/ccswitch-experiment.lock env CCSWITCH_BIN_DIR="$bins" \
    .venv/bin/ccswitch run "$here/$scenario" --out "$3/$arm" > "$3/$arm.log" 2>&1
done
