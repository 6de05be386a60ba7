#!/bin/sh
# ccswitch ($1, frozen binaries) against the floor (`--floor`: the same load under ccsw_floor,
# no shim, no agent) at 10k flows x 100 kbit/s, clean and at 1% loss, alternated, $2 rounds
# (3 if not given). Each run alone under the experiment lock; a finished run is skipped
# (resumable), a failed one is not recorded.
bins=$1 rounds=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
run() { name=$1; shift; sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "$name" "$bins" "$@"; }
for i in $(seq 1 "$rounds"); do
  for load in clean loss1; do
    [ $load = loss1 ] && loss="--loss-pct 1" || loss=
    run floor-$load-$i --floor --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 $loss
    run ccswitch-$load-$i --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 $loss
  done
done
