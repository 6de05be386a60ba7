#!/bin/sh
# Alternates, per repetition, build "main" (main.toml on /tmp/frozen-new) and build "sample"
# (sample.toml on /tmp/frozen-sample: the same tree with Linux's rate sample in the kernel fold,
# sample.patch), each alone under the experiment lock, into RUNS/SIDE-REP. Resumable: a run
# with a summary.json is kept. $1 RUNS, $2 repetitions.
runs=$1 reps=$2
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
mkdir -p "$runs"
for rep in $(seq 1 "$reps"); do
  for side in main sample; do
    out=$runs/$side-$rep
    [ -f "$out/summary.json" ] && continue
    rm -rf "$out"
    case $side in main) bins=/tmp/frozen-new ;; sample) bins=/tmp/frozen-sample ;; esac
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock \
      .venv/bin/ccswitch run "$here/$side.toml" --out "$out" > "$out.log" 2>&1
    echo "$(date -u +%T) $side $rep rc=$?"
  done
done
