#!/bin/sh
# `ccswitch bench overhead` on two frozen builds, alternated, one sample of each per round,
# each run alone under the experiment lock; a finished run is skipped (resumable).
# $1 base binaries, $2 other binaries, $3 the other arm's name, $4 output folder, $5 rounds.
base=$1 other=$2 name=$3 out=$4 rounds=${5:-8}
cd "$(dirname "$0")/../../.."
for round in $(seq 1 "$rounds"); do
  for arm in base "$name"; do
    [ "$arm" = base ] && bins=$base || bins=$other
    run=$out/$arm-$round
    [ -f "$run.json" ] && continue
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench overhead --json \
      --out "$run" > "$run.json.tmp" 2> "$run.txt"
    mv "$run.json.tmp" "$run.json"
  done
done
