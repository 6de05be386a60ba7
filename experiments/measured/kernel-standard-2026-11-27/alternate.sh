#!/bin/sh
# `ccswitch bench scale` on two frozen builds, alternated, one run of each per
# round, each alone under the experiment lock; a finished run is skipped (resumable).
# $1 base binaries, $2 other binaries, $3 the other arm's name, $4 output folder, $5 rounds,
# then the scale arguments.
base=$1 other=$2 name=$3 out=$4 rounds=$5
shift 5
cd "$(dirname "$0")/../../.."
for round in $(seq 1 "$rounds"); do
  for arm in base "$name"; do
    [ "$arm" = base ] && bins=$base || bins=$other
    run=$out/$arm-$round
    [ -f "$run.json" ] && continue
    echo "$(date -u +%T) $arm $round"
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale "$@" --json \
      --out "/tmp/kernel-runs/$arm-$round" > "$run.json.tmp" 2> "$run.txt"
    mv "$run.json.tmp" "$run.json"
  done
done
