#!/bin/sh
cd /work/main
P=/tmp/prof-ovs2
CCSWITCH_BIN_DIR=/tmp/frozen-main .venv/bin/ccswitch bench scale --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 --json --out $P/out > $P/ovs.json 2> $P/ovs.txt &
pid=$!
until grep -q 'flows at' $P/ovs.txt 2>/dev/null; do sleep 0.5; done
sleep 8
shim=$(pgrep -f 'frozen-main/ccswitch-ovs' | head -1); echo "shim $shim" > $P/pids
perf record --call-graph dwarf,16384 -F 2000 -p $shim -o $P/perf.data -- sleep 3 2> $P/perf.err
wait $pid
