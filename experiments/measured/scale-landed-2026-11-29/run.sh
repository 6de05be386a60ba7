#!/bin/sh
# run.sh FROZEN OUT: the scale loads not yet run on the landed BBR build (daf73c5's fold), one
# after another, each skipped if its result is already there (a stopped run resumes):
# ovs (A on the ovs datapath) x3, A and B alternated x2, D850 real-time and normal x2, E x1.
# Run from the repository's root, alone: flock -x /tmp/ccswitch-experiment.lock sh .../run.sh ...
set -e
frozen=$1 out=$2
mkdir -p "$out"
one() {  # one NAME SCALE_ARGS...
  name=$1; shift
  if [ -s "$out/$name.json" ]; then return; fi
  echo "$(date -u +%T) $name" >&2
  CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale "$@" --seconds 20 --json \
    --out /tmp/scale-runs/$name > "$out/$name.json.part" 2> "$out/$name.txt"
  mv "$out/$name.json.part" "$out/$name.json"
}
A="--flows 10000 --rate-kbps 100 --delay-ms 0"
for r in 1 2 3; do one ovs-$r $A --datapath ovs; done
for r in 1 2; do one A-$r $A; one B-$r $A --loss-pct 1; done
for r in 1 2; do
  one D850-default-$r --flows 10000 --rate-kbps 85 --delay-ms 25
  one D850-normal-$r --flows 10000 --rate-kbps 85 --delay-ms 25 --realtime-priority 0
done
one E-1 --flows 100000 --rate-kbps 1 --delay-ms 0
rm -rf /tmp/scale-runs
echo "$(date -u +%T) done" >&2
