#!/bin/sh
cd /work/main
P=/tmp/prof-k2
CCSWITCH_BIN_DIR=/tmp/frozen-alloc .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps 10 --delay-ms 25 --seconds 20 --json --out $P/out > $P/scale.json 2> $P/scale.txt &
pid=$!
until grep -q 'flows at' $P/scale.txt 2>/dev/null; do sleep 0.5; done
sleep 10
shim=$(pgrep -f 'frozen-alloc/ccswitch-kernel' | head -1); echo "shim $shim" > $P/pids
perf record --call-graph dwarf,16384 -F 2000 -p $shim -o $P/perf.data -- sleep 5 2> $P/perf.err
wait $pid
