#!/bin/sh
# How far the 50-ms delay shell carries 10k flows on this machine: one run at each rate per
# flow given after $1 (kbit/s), on frozen binaries $1. Each run alone under the experiment lock;
# a finished run is skipped (resumable), a failed one is not recorded.
bins=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
for kbps in "$@"; do
  sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "rate$kbps" "$bins" \
    --flows 10000 --rate-kbps "$kbps" --delay-ms 25 --seconds 20
done
