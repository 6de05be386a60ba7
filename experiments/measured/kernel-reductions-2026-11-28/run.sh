#!/bin/sh
# A scenario of this folder on the base's frozen binaries and on the change's, alternated
# arm by arm over ROUNDS rounds (change first), each run alone under the experiment lock, into
# OUT/<arm>-<round> (a finished run is skipped, so a stopped batch resumes).
# Usage: run.sh BASE_BINS CHANGE_BINS OUT SCENARIO [ROUNDS, default 1]
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.." || exit 1
rounds=${5:-1}
mkdir -p "$3"
for round in $(seq "$rounds"); do
  for arm in change base; do
    bins=$1; [ $arm = change ] && bins=$2
    out="$3/$arm-$round"
    [ -f "$out/summary.txt" ] && continue
    echo "$(date -u +%T) $arm round $round"
    flock -x /tmp/ccswitch-experiment.lock env CCSWITCH_BIN_DIR="$bins" \
      .venv/bin/ccswitch run "$here/$4" --out "$out" > "$out.log" 2>&1
  done
done
