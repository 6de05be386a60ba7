#!/bin/sh
# Why a sleeping thread wakes at p99 ~4 ms beside the urgent-p99 load (../wakeup-floor-2026-11-27):
# the same probe (../wakeup-floor-2026-11-27/wakeup.c, built to /tmp/wakeup), sleeper pinned to
# CPU 0 and waker to CPU 1, as SCHED_OTHER and as SCHED_FIFO 50, first beside a user-mode spinner
# on CPU 0 (control), then beside `ccswitch bench scale` at 10k flows x 100 kbit/s and 1% loss.
# A third probe under the load runs with CPU 0's scheduler, softirq and IRQ events traced
# (tracefs, both CPUs: a wake-up is recorded where it is made), for trace.py. $1 frozen binaries, $2 output folder.
set -e
frozen=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
mkdir -p "$out"

# Control: CPU 0 busy in user mode.
taskset -c 0 sh -c 'while :; do :; done' &
spin=$!
/tmp/wakeup 0 1 3000 2000 | sed 's/^{/{"load": "user-spinner", "policy": "other", /' >> "$out/probe.jsonl"
chrt -f 50 /tmp/wakeup 0 1 3000 2000 | sed 's/^{/{"load": "user-spinner", "policy": "fifo", /' >> "$out/probe.jsonl"
kill $spin

CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 40 \
  --loss-pct 1 --json --out /tmp/wakeup-runs/preempt > "$out/scale.json" 2> "$out/scale.txt" &
pid=$!
until grep -q 'flows at' "$out/scale.txt" 2>/dev/null; do sleep 0.5; done
sleep 8
/tmp/wakeup 0 1 3000 2000 | sed 's/^{/{"load": "scale-loss1", "policy": "other", /' >> "$out/probe.jsonl"
chrt -f 50 /tmp/wakeup 0 1 3000 2000 | sed 's/^{/{"load": "scale-loss1", "policy": "fifo", /' >> "$out/probe.jsonl"

sh "$here/tracing.sh" on
chrt -f 50 /tmp/wakeup 0 1 1500 2000 | sed 's/^{/{"load": "scale-loss1", "policy": "fifo", "traced": true, /' >> "$out/probe.jsonl"
sh "$here/tracing.sh" off "$out/trace-fifo-cpu0.txt.xz"
wait $pid
rm -rf /tmp/wakeup-runs
