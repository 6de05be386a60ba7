#!/bin/sh
# 80 runs of the ovs datapath at 10k flows x 100 kbit/s on one frozen build, one after another
# (resumable: scale-run.sh skips a run whose JSON exists). Each run's bulky output folder is
# removed once its JSON is in. Usage: loop.sh BINS [COUNT]
bins=$1 count=${2:-80}
here=$(cd "$(dirname "$0")" && pwd)
for i in $(seq 1 "$count"); do
  sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here/runs" "main-ovs-$i" "$bins" \
    --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
  rm -rf "/tmp/scale-runs/runs/main-ovs-$i"
done
