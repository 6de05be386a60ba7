#!/bin/sh
# Load E (100k flows x 1 kbit/s), with the shims' default (real-time) and then with
# `--realtime-priority 0`, $3 rounds: a real-time shim must not starve the load it serves when
# the machine saturates. $1 frozen binaries, $2 output folder.
set -e
frozen=$1 out=$2 rounds=$3
cd "$(dirname "$0")/../../.."
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for arm in default normal; do
    case $arm in default) extra= ;; normal) extra="--realtime-priority 0" ;; esac
    echo "$(date -u +%T) round $r E $arm" >&2
    CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale --flows 100000 --rate-kbps 1 --delay-ms 0 --seconds 20 \
      $extra --json --out /tmp/scale-runs/E-$arm-$r > "$out/E-$arm-$r.json" 2> "$out/E-$arm-$r.txt"
  done
done
rm -rf /tmp/scale-runs
