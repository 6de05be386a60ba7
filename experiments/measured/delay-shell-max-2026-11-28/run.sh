#!/bin/sh
# How far the 50-ms delay shell carries 10k flows on this machine: one run at each rate per
# flow given after $1 (kbit/s), on frozen binaries $1. Each run alone under the experiment lock;
# a finished run is skipped (resumable), a failed one is not recorded.
bins=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
for kbps in "$@"; do
  name=rate$kbps
  [ -f "$here/$name.json" ] && continue
  echo "$(date -u +%T) $name"
  CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale --json \
    --flows 10000 --rate-kbps "$kbps" --delay-ms 25 --seconds 20 \
    --out "/tmp/delay-shell-max-runs/$name" > "$here/$name.json.tmp" 2> "$here/$name.txt" &&
    mv "$here/$name.json.tmp" "$here/$name.json"
done
