#!/bin/sh
# After the change: the shims' default (SCHED_FIFO 10, passed by the harness) against
# `--realtime-priority 0` (the normal scheduler), alternated for $3 rounds, on load A (10k x
# 100 kbit/s), load B (A at 1% loss), B-own (B with --own-cpu) and the ovs datapath at A. $1 frozen binaries, $2 output folder.
set -e
frozen=$1 out=$2 rounds=$3
cd "$(dirname "$0")/../../.."
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for load in A B Bown ovs; do
    case $load in
      A) args= ;;
      B) args="--loss-pct 1" ;;
      Bown) args="--loss-pct 1 --own-cpu" ;;
      ovs) args="--datapath ovs" ;;
    esac
    for arm in default normal; do
      case $arm in
        default) extra= ;;
        normal) extra="--realtime-priority 0" ;;
      esac
      echo "$(date -u +%T) round $r $load $arm" >&2
      CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 \
        $args $extra --json --out /tmp/scale-runs/$load-$arm-$r > "$out/$load-$arm-$r.json" 2> "$out/$load-$arm-$r.txt"
    done
  done
done
rm -rf /tmp/scale-runs
