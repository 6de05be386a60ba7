#!/bin/sh
# Alternates, per repetition, build "main" (main.toml on $3) and build "own-window"
# (own-window.toml on $4: the same tree with recover_or_restore counting in flight up to the
# agent's own window), each alone under the experiment lock, into RUNS/SIDE-REP. Resumable: a
# run with a summary.json is kept. Usage: ab.sh RUNS REPETITIONS MAIN_BINS OWN_WINDOW_BINS
runs=$1 reps=$2 main=$3 own=$4
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
mkdir -p "$runs"
for rep in $(seq 1 "$reps"); do
  for side in main own-window; do
    out=$runs/$side-$rep
    [ -f "$out/summary.json" ] && continue
    rm -rf "$out"
    case $side in main) bins=$main ;; own-window) bins=$own ;; esac
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock \
      .venv/bin/ccswitch run "$here/$side.toml" --out "$out" > "$out.log" 2>&1
    echo "$(date -u +%T) $side $rep rc=$?"
  done
done
