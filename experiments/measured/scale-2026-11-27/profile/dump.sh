#!/bin/sh
cd /work/main
CCSWITCH_BIN_DIR=/tmp/frozen-main .venv/bin/ccswitch bench overhead --json --out /tmp/prof/out2 > /tmp/prof/overhead2.json 2> /tmp/prof/overhead2.txt &
pid=$!
sleep 8
id=$(bpftool prog show | awk -F: '/ccsw_cong_control/{print $1; exit}')
python3 /tmp/prof/jitinfo.py $id /tmp/prof/jit
bpftool prog dump xlated id $id linum > /tmp/prof/xlated.txt 2>&1
bpftool prog show id $id > /tmp/prof/prog.txt
wait $pid
