#!/bin/sh
# After the change: the shims' default (SCHED_FIFO 10, passed by the harness) against
# `--realtime-priority 0` (the normal scheduler), alternated for $3 rounds, on load A (10k x
# 100 kbit/s), load B (A at 1% loss), B-own (B with --own-cpu) and the ovs datapath at A.
# $1 frozen binaries, $2 output folder.
set -e
frozen=$1 out=$2 rounds=$3
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
base="--flows 10000 --rate-kbps 100 --delay-ms 0"
for r in $(seq 1 "$rounds"); do
  # one round of each load per round, so that the loads alternate as well as the arms
  sh "$here/arms.sh" "$frozen" "$out/round" 1 A $base
  sh "$here/arms.sh" "$frozen" "$out/round" 1 B $base --loss-pct 1
  sh "$here/arms.sh" "$frozen" "$out/round" 1 Bown $base --loss-pct 1 --own-cpu
  sh "$here/arms.sh" "$frozen" "$out/round" 1 ovs $base --datapath ovs
  for f in "$out"/round/*-1.json "$out"/round/*-1.txt; do
    b=$(basename "$f"); mv "$f" "$out/${b%-1.*}-$r.${b##*.}"
  done
  rmdir "$out/round"
done
rm -rf /tmp/scale-runs
