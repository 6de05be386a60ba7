#!/bin/bash
# Alternates, per repetition, build "base" (b0641b7) and build "new" (7873070), each running
# native:bbr and kernel:bbr. Frozen binaries in /tmp/frozen-{base,new}; resumable.
here=$(cd "$(dirname "$0")" && pwd)
runs=${RUNS:-/tmp/regr/runs}
mkdir -p "$runs"
cd /work/main
for rep in $(seq 1 "${REPS:-6}"); do
  for side in base new; do
    out=$runs/$side-$rep
    [ -f "$out/summary.json" ] && continue
    rm -rf "$out"
    CCSWITCH_BIN_DIR=/tmp/frozen-$side flock -x /tmp/ccswitch-experiment.lock \
      .venv/bin/ccswitch run "$here/scenario.toml" --repetitions 1 --out "$out" > "$out.log" 2>&1
    echo "$(date +%T) $side $rep rc=$?"
  done
done
