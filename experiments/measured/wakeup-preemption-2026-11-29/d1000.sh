#!/bin/sh
# 10k flows through the 50-ms delay shell at $4 kbit/s each (default 100: load D1000, 1 Gbit/s;
# runs are named by the aggregate, D<Mbit/s>), with the shims' default (real-time) and then with
# `--realtime-priority 0`, $3 rounds. $1 frozen binaries, $2 output folder.
set -e
frozen=$1 out=$2 rounds=$3 kbps=${4:-100}
load=D$((kbps * 10))
cd "$(dirname "$0")/../../.."
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for arm in default normal; do
    case $arm in default) extra= ;; normal) extra="--realtime-priority 0" ;; esac
    echo "$(date -u +%T) round $r $load $arm" >&2
    CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps "$kbps" --delay-ms 25 --seconds 20 \
      $extra --json --out /tmp/scale-runs/$load-$arm-$r > "$out/$load-$arm-$r.json" 2> "$out/$load-$arm-$r.txt"
  done
done
rm -rf /tmp/scale-runs
