#!/bin/bash
# Alternates, per repetition, build "main" (native:bbr, kernel:bbr, kernel:bbr:ack_aggregation=1)
# and build "sample" (the same commit with Linux's rate sample in the kernel fold:
# kernel:bbr:ack_aggregation=1). Frozen binaries in /tmp/frozen-agg-{main,sample}; resumable.
here=$(cd "$(dirname "$0")" && pwd)
runs=${RUNS:-/tmp/agg/runs}
mkdir -p "$runs"
cd /work/main
for rep in $(seq 1 "${REPS:-8}"); do
  for side in main sample; do
    out=$runs/$side-$rep
    [ -f "$out/summary.json" ] && continue
    rm -rf "$out"
    schemes=kernel:bbr:ack_aggregation=1
    [ "$side" = main ] && schemes=native:bbr,kernel:bbr,kernel:bbr:ack_aggregation=1
    CCSWITCH_BIN_DIR=/tmp/frozen-agg-$side flock -x /tmp/ccswitch-experiment.lock \
      .venv/bin/ccswitch run "$here/scenario.toml" --schemes "$schemes" --repetitions 1 --out "$out" > "$out.log" 2>&1
    echo "$(date +%T) $side $rep rc=$?"
  done
done
