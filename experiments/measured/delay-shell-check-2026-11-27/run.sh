#!/bin/sh
# 10k flows x 10 kbit/s through mm-delay 25 ms: stop 29's build (cfcd25c, which measured 2.95%
# of a core) against main's (730db6f, 6.75% in scale-2026-11-27), alternated, this tree's
# harness for both. $1 frozen cfcd25c, $2 frozen main, $3 output folder, $4 rounds.
set -e
old=$1 new=$2 out=$3 rounds=${4:-2}
cd "$(dirname "$0")/../../.."
for round in $(seq 1 "$rounds"); do
  for arm in old new; do
    [ $arm = old ] && bins=$old || bins=$new
    run=$out/$arm-$round
    [ -f "$run.json" ] && continue
    echo "$(date -u +%T) $arm $round"
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale --json \
      --flows 10000 --rate-kbps 10 --delay-ms 25 --seconds 20 --out "$run" > "$run.json.tmp" 2> "$run.txt"
    mv "$run.json.tmp" "$run.json"
  done
done
