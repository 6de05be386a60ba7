#!/bin/sh
# `ccswitch bench scale` through the 50-ms delay shell, 10k flows, at several offered rates
# and delay-shell queues; each run alone under the experiment lock; a finished run is skipped
# (resumable). $1 frozen binaries, $2 rounds, $3 the queue (packets each way; 500 is
# mahimahi's own, "sized" the harness's default), then the rates (kbit/s per flow).
bins=$1 rounds=$2 queue=$3
shift 3
out=$(cd "$(dirname "$0")" && pwd)
cd "$out/../../.."
[ "$queue" = sized ] && arm=sized || arm=queue$queue
for round in $(seq 1 "$rounds"); do
  for rate in "$@"; do
    run=$out/$arm-$rate-$round
    [ -f "$run.json" ] && continue
    echo "$(date -u +%T) $arm, $rate kbit/s, round $round"
    [ "$queue" = sized ] && q="" || q="--delay-queue-packets $queue"
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale --json \
      --flows 10000 --rate-kbps "$rate" --delay-ms 25 --seconds 20 $q \
      --out "/tmp/kernel-runs/$arm-$rate-$round" > "$run.json.tmp" 2> "$run.txt"
    mv "$run.json.tmp" "$run.json"
  done
done
