#!/bin/sh
# Head 38cde68 ($1), the promise on any pass that found a routine record ($2, d38ff0c) and the
# promise for a stream only ($3), all built as `make build` builds them, at 10k flows x
# 100 kbit/s clean, $4 rounds (3 if not given), the three alternated. Runs named
# three-{head,promise,stream}-clean-N.
head=$1 promise=$2 stream=$3 rounds=${4:-3}
here=$(cd "$(dirname "$0")" && pwd)
run() { name=$1 bins=$2; shift 2; sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "$name" "$bins" "$@"; }
for i in $(seq 1 "$rounds"); do
  run three-head-clean-$i "$head" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
  run three-promise-clean-$i "$promise" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
  run three-stream-clean-$i "$stream" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
done
