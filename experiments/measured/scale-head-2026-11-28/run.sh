#!/bin/sh
# Issue 21's scale targets on one frozen build ($1), on this session's machine: through the
# 50-ms delay shell at 300 and 400 Mbit/s (10k x 30 and 40 kbit/s) three times each, 10k x
# 100 kbit/s clean and at 1% loss twice each, 100k flows twice and the ovs datapath at 10k x
# 100 kbit/s three times. Each run alone under the experiment lock; a finished run is skipped
# (resumable), a failed one is not recorded. $2, if given, prefixes the runs' names.
bins=$1 tag=${2:+$2-}
here=$(cd "$(dirname "$0")" && pwd)
run() { name=$1; shift; sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "$tag$name" "$bins" "$@"; }
for i in 1 2 3; do
  run delay300-$i --flows 10000 --rate-kbps 30 --delay-ms 25 --seconds 20
  run delay400-$i --flows 10000 --rate-kbps 40 --delay-ms 25 --seconds 20
done
for i in 1 2; do
  run kernel-10k-clean-$i --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
  run kernel-10k-loss1-$i --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
done
for i in 1 2 3; do
  run ovs-$i --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
done
for i in 1 2; do
  run kernel-100k-$i --flows 100000 --rate-kbps 1 --delay-ms 0
done
