#!/bin/sh
# 10k flows x 100 kbit/s at 1% loss, the head against the change that sends a window
# reduction's later loss reports through the routine lane, alternated, resumable.
# Usage: run.sh HEAD_BINS CHANGE_BINS ROUNDS
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/../scale-head-2026-11-28/alternate.sh" "$here" loss1 "$3" head "$1" change "$2" \
  --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
