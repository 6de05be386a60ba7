#!/bin/bash
# Alternates, per repetition: build "main" (native:bbr and kernel:bbr) and build "sample" (kernel:bbr).
cd /work/main
for rep in $(seq 1 ${REPS:-8}); do
  for side in main sample; do
    out=/tmp/rs/runs/$side-$rep
    [ -f $out/summary.json ] && continue
    rm -rf $out
    schemes=kernel:bbr; [ $side = main ] && schemes=native:bbr,kernel:bbr
    CCSWITCH_BIN_DIR=/tmp/frozen-$side flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch run scenario.toml --schemes $schemes --repetitions 1 --out $out > /tmp/rs/runs/$side-$rep.log 2>&1
    echo "$(date +%T) $side $rep rc=$?"
  done
done
