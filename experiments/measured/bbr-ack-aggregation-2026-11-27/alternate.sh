#!/bin/bash
# alternate.sh SCENARIO RUNS REPS BIN_PREFIX SIDE=SCHEMES... : per repetition 1..REPS, each SIDE
# in turn runs SCENARIO's clients with SCHEMES (comma-separated; empty: the scenario's own) on
# the frozen binaries BIN_PREFIX-SIDE, alone under the experiment lock, into RUNS/SIDE-REP.
# Resumable: a run with a summary.json is kept.
scenario=$1; runs=$2; reps=$3; bins=$4; shift 4
mkdir -p "$runs"
cd /work/main
for rep in $(seq 1 "$reps"); do
  for pair in "$@"; do
    side=${pair%%=*}; schemes=${pair#*=}
    out=$runs/$side-$rep
    [ -f "$out/summary.json" ] && continue
    rm -rf "$out"
    CCSWITCH_BIN_DIR=$bins-$side flock -x /tmp/ccswitch-experiment.lock \
      .venv/bin/ccswitch run "$scenario" ${schemes:+--schemes "$schemes"} --repetitions 1 --out "$out" > "$out.log" 2>&1
    echo "$(date +%T) $side $rep rc=$?"
  done
done
