#!/bin/sh
# make bench's transfers under a system-wide profile
cd /work/main
CCSWITCH_BIN_DIR=/tmp/frozen-main .venv/bin/ccswitch bench overhead --json --out /tmp/prof/out > /tmp/prof/overhead.json 2> /tmp/prof/overhead.txt &
pid=$!
sleep 6
perf record -a -g -e cpu-clock -F 20000 -o /tmp/prof/perf.data -- sleep 20 2> /tmp/prof/perf.err
wait $pid
