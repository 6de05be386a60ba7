#!/bin/sh
# 100k flows (1 kbit/s each, no shell) on the matched builds of run-matched.sh, alternated,
# $3 rounds (2 if not given). Runs named head-100k-*/change-100k-*.
head=$1 change=$2 rounds=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
run() { name=$1 bins=$2; shift 2; sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "$name" "$bins" "$@"; }
for i in $(seq 1 "$rounds"); do
  run head-100k-$i "$head" --flows 100000 --rate-kbps 1 --delay-ms 0
  run change-100k-$i "$change" --flows 100000 --rate-kbps 1 --delay-ms 0
done
