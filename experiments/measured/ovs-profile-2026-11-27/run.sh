#!/bin/sh
# ovs 10k x 100 kbit/s under a system-wide profile; the port programs' JIT maps dumped mid-run
cd /work/main
P=/tmp/prof-ovs
CCSWITCH_BIN_DIR=/tmp/frozen-main .venv/bin/ccswitch bench scale --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 --json --out $P/out > $P/ovs.json 2> $P/ovs.txt &
pid=$!
# wait until the flows are open: the shim exists and the bench has run a while
until grep -q 'flows at' $P/ovs.txt 2>/dev/null; do sleep 0.5; done
sleep 8
for prog in ccsw_egress ccsw_ingress; do
  id=$(bpftool prog show | awk -F: "/$prog/{print \$1; exit}")
  [ -n "$id" ] && python3 experiments/measured/scale-2026-11-27/profile/jitinfo.py $id $P/jit-$prog && bpftool prog dump xlated id $id linum > $P/xlated-$prog.txt 2>&1
done
shim=$(pgrep -f ccswitch-ovs | head -1); echo "shim $shim" > $P/pids
perf record -a -g -e cpu-clock -F 10000 -o $P/perf.data -- sleep 8 2> $P/perf.err
wait $pid
