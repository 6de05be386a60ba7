#!/bin/sh
# fidelity.toml per repetition with the shims' default (SCHED_FIFO 10) and then with
# CCSWITCH_SHIM_REALTIME_PRIORITY=0 (the normal scheduler), each alone under the experiment
# lock, into RUNS/{fifo,normal}-REP. Resumable. $1 frozen binaries, $2 RUNS, $3 repetitions.
bins=$1 runs=$2 reps=$3
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
mkdir -p "$runs"
for rep in $(seq 1 "$reps"); do
  for side in fifo normal; do
    out=$runs/$side-$rep
    [ -f "$out/summary.json" ] && continue
    rm -rf "$out"
    case $side in fifo) prio=10 ;; normal) prio=0 ;; esac
    CCSWITCH_BIN_DIR=$bins CCSWITCH_SHIM_REALTIME_PRIORITY=$prio flock -x /tmp/ccswitch-experiment.lock \
      .venv/bin/ccswitch run "$here/fidelity.toml" --out "$out" > "$out.log" 2>&1
    echo "$(date -u +%T) $side $rep rc=$?"
  done
done
