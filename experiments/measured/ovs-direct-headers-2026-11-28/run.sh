#!/bin/sh
# The ovs datapath at 10k flows x 100 kbit/s: BASE's port programs against the change that
# reads headers straight from the packet (ovs.bpf.c load_header), alternated, resumable.
# Usage: run.sh BASE_BINS CHANGE_BINS ROUNDS
here=$(cd "$(dirname "$0")" && pwd)
run=$here/../scale-head-2026-11-28/scale-run.sh
load="--datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20"
for i in $(seq 1 "$3"); do
  sh "$run" "$here" "base-ovs-$i" "$1" $load
  sh "$run" "$here" "direct-ovs-$i" "$2" $load
done
