#!/bin/sh
# make bench's lone flow (24 Mbit/s, RTT 50 ms, 10 MB), profiled system-wide while
# `ccswitch bench overhead` runs SCENARIO's transfers; the program's JIT line map is taken
# once it is loaded. Then, off the lock: perf script -F comm,ip,sym,symoff -i $2/perf.data >
# $2/script.txt; ../kernel-bpf-loss-profile-2026-11-28/callers.py $2.
# Usage: run.sh BINS SCRATCH SCENARIO
bins=$1 P=$2 scenario=$3
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
mkdir -p "$P"
CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock sh -c "
  .venv/bin/ccswitch bench overhead --scenario $scenario --out $P/out > $P/bench.txt 2>&1 &
  pid=\$!
  until bpftool prog show | grep -q ccsw_cong_control; do sleep 0.2; done
  sleep 1
  id=\$(bpftool prog show | awk -F: '/ccsw_cong_control/{print \$1; exit}')
  python3 experiments/measured/scale-2026-11-27/profile/jitinfo.py \$id $P/jit
  bpftool prog dump xlated id \$id linum > $P/xlated.txt 2>&1
  bpftool prog show id \$id > $P/prog.txt
  perf record -a -g -e cpu-clock -F 20000 -o $P/perf.data -- sh -c \"while kill -0 \$pid 2>/dev/null; do sleep 0.5; done\" 2> $P/perf.err
  wait \$pid"
