#!/bin/sh
# run.sh's traced probe again with the sleeper under the normal scheduler (SCHED_OTHER), beside
# the same load: what holds CPU 0 during the waits of ~4 ms. $1 frozen binaries, $2 output folder.
set -e
frozen=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 30 \
  --loss-pct 1 --json --out /tmp/wakeup-runs/other > /dev/null 2> "$out/traced-other-scale.txt" &
pid=$!
until grep -q 'flows at' "$out/traced-other-scale.txt" 2>/dev/null; do sleep 0.5; done
sleep 8
sh "$here/tracing.sh" on
/tmp/wakeup 0 1 1500 2000 | sed 's/^{/{"load": "scale-loss1", "policy": "other", "traced": true, /' >> "$out/probe.jsonl"
sh "$here/tracing.sh" off "$out/trace-other-cpu0.txt.xz"
wait $pid
rm -rf /tmp/wakeup-runs
