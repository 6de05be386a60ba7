#!/bin/sh
# rates.sh BINS OUT: 10k flows through the 50-ms delay shell at 850, 950 and 1,000 Mbit/s
# (85, 95 and 100 kbit/s a flow), the shims' default; resumable as run.sh.
set -e
. "$(dirname "$0")/../scale-landed-2026-11-29/one.sh"
bins=$1 out=$2
mkdir -p "$out"
for kbps in 85 95 100; do
  one "$out" D$((kbps * 10))-2 "$bins" --flows 10000 --rate-kbps $kbps --delay-ms 25
done
rm -rf /tmp/scale-runs
echo "$(date -u +%T) done" >&2
