#!/bin/sh
# The ovs datapath at 10k flows x 100 kbit/s: BASE's port programs against the change that
# reads headers straight from the packet (ovs.bpf.c load_header), alternated, resumable.
# Usage: run.sh BASE_BINS CHANGE_BINS ROUNDS
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/../scale-head-2026-11-28/alternate.sh" "$here" ovs "$3" base "$1" direct "$2" \
  --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
