#!/bin/sh
# The urgent p99 with the shim on a CPU of its own, with and without a real-time priority,
# alternated, 2 rounds; each run alone under the experiment lock; resumable. $1 binaries.
bins=$1 out=experiments/measured/urgent-own-cpu-2026-11-27
cd "$(dirname "$0")/../../.."
for round in 1 2; do
  for arm in own-cpu own-cpu-fifo10; do
    run=$out/$arm-$round
    [ -f "$run.json" ] && continue
    extra=""
    [ "$arm" = own-cpu-fifo10 ] && extra="--realtime-priority 10"
    echo "$(date -u +%T) $arm $round"
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale --flows 10000 \
      --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1 --own-cpu $extra --json --out "/tmp/own-cpu/$arm-$round" \
      > "$run.json.tmp" 2> "$run.txt"
    mv "$run.json.tmp" "$run.json"
  done
done
