#!/bin/sh
# rates.sh BINS OUT ROUNDS: 10k flows through the 50-ms delay shell at 750 and 800 Mbit/s
# (75 and 80 kbit/s a flow), the shims' default, alternated; resumable as ab.sh.
set -e
bins=$1 out=$2 rounds=$3
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for kbps in 75 80; do
    name=D$((kbps * 10))-$r
    if [ -s "$out/$name.json" ]; then continue; fi
    echo "$(date -u +%T) $name" >&2
    CCSWITCH_BIN_DIR=$bins .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps $kbps --delay-ms 25 \
      --seconds 20 --json --out /tmp/scale-runs/$name > "$out/$name.json.part" 2> "$out/$name.txt"
    mv "$out/$name.json.part" "$out/$name.json"
  done
done
rm -rf /tmp/scale-runs
