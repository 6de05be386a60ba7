#!/bin/sh
# The urgent lane's wake-ups at 10k flows x 100 kbit/s and 1% loss: the head against the
# same build with urgent records submitted without a wake-up (nowake.patch, a diagnostic:
# the shim then reads them only when awake for other reasons). Alternated, resumable.
# Usage: run.sh HEAD_BINS NOWAKE_BINS ROUNDS
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/../scale-head-2026-11-28/alternate.sh" "$here" loss1 "$3" head "$1" nowake "$2" \
  --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
