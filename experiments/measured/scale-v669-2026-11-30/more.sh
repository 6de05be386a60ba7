#!/bin/sh
# more.sh BINS OUT: after run.sh, 4 more rounds of A, ovs and B alternated, resumable as run.sh.
set -e
. "$(dirname "$0")/../scale-landed-2026-11-29/one.sh"
bins=$1 out=$2
A="--flows 10000 --rate-kbps 100 --delay-ms 0"
for r in 3 4 5 6; do
  one "$out" A-$r "$bins" $A
  one "$out" ovs-$((r + 1)) "$bins" $A --datapath ovs
  one "$out" B-$r "$bins" $A --loss-pct 1
done
rm -rf /tmp/scale-runs
echo "$(date -u +%T) done" >&2
