#!/bin/sh
# The kernel shim under the normal scheduler, under SCHED_FIFO 10, and under SCHED_FIFO 10 on
# its own CPU, at 10k flows x 100 kbit/s and 1% loss (load B), alternated for $3 rounds.
# $1 frozen binaries, $2 output folder.
set -e
frozen=$1 out=$2 rounds=$3
cd "$(dirname "$0")/../../.."
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for arm in normal fifo fifo-own; do
    case $arm in
      normal) extra= ;;
      fifo) extra="--realtime-priority 10" ;;
      fifo-own) extra="--realtime-priority 10 --own-cpu" ;;
    esac
    echo "$(date -u +%T) round $r $arm" >&2
    CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 \
      --loss-pct 1 $extra --json --out /tmp/scale-runs/$arm-$r > "$out/$arm-$r.json" 2> "$out/$arm-$r.txt"
  done
done
rm -rf /tmp/scale-runs
