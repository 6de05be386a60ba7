#!/bin/sh
# run.sh FROZEN OUT: the scale loads not yet run on the landed BBR build (daf73c5's fold), one
# after another, each skipped if its result is already there (a stopped run resumes):
# ovs (A on the ovs datapath) x3, A and B alternated x2, D850 real-time and normal x2, E x1.
# Run from the repository's root, alone: flock -x /tmp/ccswitch-experiment.lock sh .../run.sh ...
set -e
. "$(dirname "$0")/one.sh"
frozen=$1 out=$2
mkdir -p "$out"
A="--flows 10000 --rate-kbps 100 --delay-ms 0"
for r in 1 2 3; do one "$out" ovs-$r "$frozen" $A --datapath ovs; done
for r in 1 2; do one "$out" A-$r "$frozen" $A; one "$out" B-$r "$frozen" $A --loss-pct 1; done
for r in 1 2; do
  one "$out" D850-default-$r "$frozen" --flows 10000 --rate-kbps 85 --delay-ms 25
  one "$out" D850-normal-$r "$frozen" --flows 10000 --rate-kbps 85 --delay-ms 25 --realtime-priority 0
done
one "$out" E-1 "$frozen" --flows 100000 --rate-kbps 1 --delay-ms 0
rm -rf /tmp/scale-runs
echo "$(date -u +%T) done" >&2
