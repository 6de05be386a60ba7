#!/bin/bash
# A/B: kernel:reno on main (545f5bd) vs Reno per-ACK in slow start (variant), native:reno alongside; alternated per repetition.
cd /work/main
for rep in $(seq 1 ${REPS:-8}); do
  for side in main variant; do
    out=/tmp/exp/ab/$side-$rep
    [ -f $out/summary.json ] && continue
    rm -rf $out
    schemes=kernel:reno; [ $side = main ] && schemes=native:reno,kernel:reno
    CCSWITCH_BIN_DIR=/tmp/frozen-$side flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch run /tmp/exp/loss1.toml --schemes $schemes --repetitions 1 --out $out > /tmp/exp/ab/$side-$rep.log 2>&1
    echo "$(date +%T) $side $rep rc=$?"
  done
done
