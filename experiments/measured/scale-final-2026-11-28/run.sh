#!/bin/sh
# Issue 21's scale targets on the session's final build ($1, frozen binaries): through the
# 50-ms delay shell at 1,000 Mbit/s (10k x 100 kbit/s, the most it sustains here,
# ../delay-shell-max-2026-11-28) and at 400, 10k x 100 kbit/s without a shell clean and at 1%
# loss, the ovs datapath at 10k x 100 kbit/s, three runs each, and 100k flows twice. Each run
# alone under the experiment lock; a finished run is skipped (resumable), a failed one is not
# recorded. Into FOLDER ($2, default this folder); with OWNCPU ($3 = owncpu) each round also
# runs the 1% loss load with the shim on a CPU of its own (../scale-final-2026-11-28-b).
bins=$1
here=${2:-$(cd "$(dirname "$0")" && pwd)}
runner=$(cd "$(dirname "$0")" && pwd)/../scale-head-2026-11-28/scale-run.sh
run() { name=$1; shift; sh "$runner" "$here" "$name" "$bins" "$@"; }
for i in 1 2 3; do
  run delay1000-$i --flows 10000 --rate-kbps 100 --delay-ms 25 --seconds 20
  run kernel-10k-clean-$i --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
  run kernel-10k-loss1-$i --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
  run delay400-$i --flows 10000 --rate-kbps 40 --delay-ms 25 --seconds 20
  run ovs-$i --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
  [ "$3" = owncpu ] &&
    run kernel-10k-loss1-owncpu-$i --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1 --own-cpu
done
for i in 1 2; do
  run kernel-100k-$i --flows 100000 --rate-kbps 1 --delay-ms 0
done
