#!/bin/sh
# run.sh BINS OUT: the scale loads on this session's machine (kernel 6.18.44-fc-v669), one after
# another, each skipped if its result is already there (a stopped run resumes): A, B and
# B --own-cpu alternated x2, ovs x3, the delay shell at 750 and 850 Mbit/s x1, E x1.
# Run from the repository's root, alone: flock -x /tmp/ccswitch-experiment.lock sh .../run.sh ...
set -e
. "$(dirname "$0")/../scale-landed-2026-11-29/one.sh"
bins=$1 out=$2
mkdir -p "$out"
A="--flows 10000 --rate-kbps 100 --delay-ms 0"
for r in 1 2; do
  one "$out" A-$r "$bins" $A
  one "$out" B-$r "$bins" $A --loss-pct 1
  one "$out" Bown-$r "$bins" $A --loss-pct 1 --own-cpu
done
for r in 1 2 3; do one "$out" ovs-$r "$bins" $A --datapath ovs; done
one "$out" D750-1 "$bins" --flows 10000 --rate-kbps 75 --delay-ms 25
one "$out" D850-1 "$bins" --flows 10000 --rate-kbps 85 --delay-ms 25
one "$out" E-1 "$bins" --flows 100000 --rate-kbps 1 --delay-ms 0
rm -rf /tmp/scale-runs
echo "$(date -u +%T) done" >&2
