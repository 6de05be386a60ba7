#!/bin/sh
# The urgent lane's wake-ups at 10k flows x 100 kbit/s and 1% loss: the head against the
# same build with urgent records submitted without a wake-up (nowake.patch, a diagnostic:
# the shim then reads them only when awake for other reasons). Alternated, resumable.
# Usage: run.sh HEAD_BINS NOWAKE_BINS ROUNDS
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../scale-head-2026-11-28/scale-run.sh
load="--flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1"
for i in $(seq 1 "$3"); do
  sh "$run" "$here" "head-loss1-$i" "$1" $load
  sh "$run" "$here" "nowake-loss1-$i" "$2" $load
done
