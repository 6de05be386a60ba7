#!/bin/sh
# The routine-read promise ($1) against it with the flow state's third line fetched early
# ($2), frozen binaries, alternated one run of each per round, $3 rounds (3 if not given), at
# 10k flows x 100 kbit/s clean and at 1% loss. Each run alone under the experiment lock; a
# finished run is skipped (resumable), a failed one is not recorded.
base=$1 prefetch=$2 rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
run() { sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "$@"; }
for i in $(seq 1 "$rounds"); do
  for arm in base prefetch; do
    [ $arm = base ] && bins=$base || bins=$prefetch
    run $arm-clean-$i "$bins" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
    run $arm-loss1-$i "$bins" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
  done
done
