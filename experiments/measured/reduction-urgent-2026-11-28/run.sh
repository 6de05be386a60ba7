#!/bin/sh
# 10k flows x 100 kbit/s at 1% loss, the head against the change that sends a window
# reduction's later loss reports through the routine lane, alternated, resumable.
# Usage: run.sh HEAD_BINS CHANGE_BINS ROUNDS
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../scale-head-2026-11-28/scale-run.sh
load="--flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1"
for i in $(seq 1 "$3"); do
  sh "$run" "$here" "head-loss1-$i" "$1" $load
  sh "$run" "$here" "change-loss1-$i" "$2" $load
done
