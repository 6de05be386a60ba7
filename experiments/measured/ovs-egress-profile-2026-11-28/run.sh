#!/bin/sh
# The ovs datapath at 10k flows x 100 kbit/s under a system-wide profile, alone under the
# experiment lock: the port programs' JIT line maps and xlated dumps once the flows are open,
# then `perf record -a -g -e cpu-clock -F 10000` for 8 s. Then, off the lock:
# perf script -F comm,ip,sym,symoff -i $2/perf.data > $2/script.txt and
# ../ovs-profile-2026-11-27/shares.py $2. Usage: run.sh BINS SCRATCH
bins=$1 P=$2
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.." || exit 1
mkdir -p "$P"
flock -x /tmp/ccswitch-experiment.lock sh -c "
  CCSWITCH_BIN_DIR=$bins .venv/bin/ccswitch bench scale --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 \
    --seconds 20 --json --out $P/out > $P/ovs.json 2> $P/ovs.txt &
  pid=\$!
  until grep -q 'flows at' $P/ovs.txt 2>/dev/null; do sleep 0.5; done
  sleep 10
  for prog in ccsw_egress ccsw_ingress; do
    id=\$(bpftool prog show | awk -F: \"/\$prog/{print \\\$1; exit}\")
    [ -n \"\$id\" ] && python3 experiments/measured/scale-2026-11-27/profile/jitinfo.py \$id $P/jit-\$prog &&
      bpftool prog dump xlated id \$id linum > $P/xlated-\$prog.txt 2>&1
  done
  perf record -a -g -e cpu-clock -F 10000 -o $P/perf.data -- sleep 8 2> $P/perf.err
  wait \$pid"
