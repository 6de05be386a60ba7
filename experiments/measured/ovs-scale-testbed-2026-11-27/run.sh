#!/bin/sh
# The ovs datapath at 10k flows x 100 kbit/s on three testbeds, alternated per round:
#   before: Open vSwitch's packet sockets at 8 MiB, the shim's default slab (65,536 slots);
#   slab:   8 MiB, 16 slab slots per flow;
#   after:  64 MiB, 16 slab slots per flow (this commit's harness).
# $1 frozen binaries, $2 output folder, $3 rounds; harness trees for before/slab: $HARNESS_BEFORE,
# $HARNESS_SLAB (this tree's python/ with before-testbed.patch / slab-only.patch applied).
set -e
frozen=$1 out=$2 rounds=${3:-3}
cd "$(dirname "$0")/../../.."
for round in $(seq 1 "$rounds"); do
  for arm in before slab after; do
    run=$out/$arm-$round
    [ -f "$run.json" ] && continue   # resumable
    case $arm in before) py=$HARNESS_BEFORE;; slab) py=$HARNESS_SLAB;; after) py=$PWD/python;; esac
    echo "$(date -u +%T) $arm, round $round"
    PYTHONPATH=$py CCSWITCH_BIN_DIR=$frozen flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale \
      --json --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 --out "$run" > "$run.json.tmp" 2> "$run.txt"
    mv "$run.json.tmp" "$run.json"
  done
done
