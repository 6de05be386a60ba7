#!/bin/sh
# Alternates, per repetition, the builds given as SIDE=BINS: SIDE.toml here (or in $TOMLS) runs on
# BINS, each alone under the experiment lock, into RUNS/SIDE-REP. Resumable: a run with a
# summary.json is kept. Usage: [TOMLS=DIR] ab.sh RUNS REPETITIONS SIDE=BINS...
runs=$1 reps=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
tomls=$(cd "${TOMLS:-$here}" && pwd)
cd "$here/../../.."
mkdir -p "$runs"
for rep in $(seq 1 "$reps"); do
  for pair in "$@"; do
    side=${pair%%=*} bins=${pair#*=}
    out=$runs/$side-$rep
    [ -f "$out/summary.json" ] && continue
    rm -rf "$out"
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock \
      .venv/bin/ccswitch run "$tomls/$side.toml" --out "$out" > "$out.log" 2>&1
    echo "$(date -u +%T) $side $rep rc=$?"
  done
done
