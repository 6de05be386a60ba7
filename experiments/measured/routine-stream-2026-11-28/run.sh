#!/bin/sh
# Head 38cde68 ($1) against the promise started only for a stream of routine records ($2),
# both built as `make build` builds them, clean and at 1% loss at 10k flows x 100 kbit/s,
# $3 rounds (3 if not given), alternated. Runs named head-*/stream-*.
head=$1 stream=$2 rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
run() { name=$1 bins=$2; shift 2; sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "$name" "$bins" "$@"; }
for i in $(seq 1 "$rounds"); do
  for arm in head stream; do
    [ $arm = head ] && bins=$head || bins=$stream
    run $arm-clean-$i "$bins" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
    run $arm-loss1-$i "$bins" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
  done
done
