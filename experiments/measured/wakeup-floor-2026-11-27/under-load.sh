#!/bin/sh
# The wake-up probe beside a kernel-datapath scale run at 1% loss (the run whose urgent p99 is
# the read wait): the probe starts once the flows are open and takes 5,000 samples, pinned
# (sleeper CPU 0, waker CPU 1) and then left to the scheduler, as the shim is. $1 frozen
# binaries, $2 output folder, $3 the run's name.
set -e
frozen=$1 out=$2 name=$3
cd "$(dirname "$0")/../../.."
mkdir -p "$out"
CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 \
  --loss-pct 1 --json --out "/tmp/wakeup-runs/$name" > "$out/$name-scale.json" 2> "$out/$name-scale.txt" &
pid=$!
until grep -q 'flows at' "$out/$name-scale.txt" 2>/dev/null; do sleep 0.5; done
sleep 8
/tmp/wakeup 0 1 5000 2000 > "$out/$name-probe.jsonl"
/tmp/wakeup -1 -1 5000 2000 >> "$out/$name-probe.jsonl"
wait $pid
