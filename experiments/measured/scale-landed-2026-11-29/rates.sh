#!/bin/sh
# rates.sh BINS OUT ROUNDS: 10k flows through the 50-ms delay shell at 750 and 800 Mbit/s
# (75 and 80 kbit/s a flow), the shims' default, alternated; resumable as ab.sh.
set -e
. "$(dirname "$0")/one.sh"
bins=$1 out=$2 rounds=$3
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for kbps in 75 80; do
    one "$out" D$((kbps * 10))-$r "$bins" --flows 10000 --rate-kbps $kbps --delay-ms 25
  done
done
rm -rf /tmp/scale-runs
