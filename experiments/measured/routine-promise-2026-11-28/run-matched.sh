#!/bin/sh
# The same comparison on matched builds: both from `cargo build --release` of the whole
# workspace, as `make build` builds them ($1 the head 38cde68, $2 the change d38ff0c), clean
# and at 1% loss, $3 rounds (3 if not given), alternated. Runs named head-*/change-*.
head=$1 change=$2 rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
run() { name=$1 bins=$2; shift 2; sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "$name" "$bins" "$@"; }
for i in $(seq 1 "$rounds"); do
  for arm in head change; do
    [ $arm = head ] && bins=$head || bins=$change
    run $arm-clean-$i "$bins" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
    run $arm-loss1-$i "$bins" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
  done
done
