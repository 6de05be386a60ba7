#!/bin/sh
# The ovs shim at 10k flows x 100 kbit/s with three floors of its retransmission timer's
# variance term, alternated. $1: frozen binaries with floor10 = bin (the default), floor40,
# floor100 (wrappers adding --rto-variance-floor-ms); $2: output folder; $3: rounds.
set -e
frozen=$1 out=$2 rounds=${3:-2}
cd "$(dirname "$0")/../../../.."
for round in $(seq 1 "$rounds"); do
  for floor in 10 40 100; do
    bins=$frozen/floor$floor; [ "$floor" = 10 ] && bins=$frozen/bin
    run=$out/floor$floor-$round
    [ -f "$run.json" ] && continue   # resumable
    echo "$(date -u +%T) floor $floor ms, round $round"
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale --json \
      --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 --out "$run" > "$run.json.tmp" 2> "$run.txt"
    mv "$run.json.tmp" "$run.json"
  done
done
