#!/bin/sh
# The routine-read promise ($1) against it with the flow state's third line fetched early
# ($2), frozen binaries, alternated one run of each per round, $3 rounds (3 if not given), at
# 10k flows x 100 kbit/s clean and at 1% loss. Each run alone under the experiment lock; a
# finished run is skipped (resumable), a failed one is not recorded.
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/../scale-head-2026-11-28/alternate-clean-loss1.sh" "$here" "${3:-3}" base "$1" prefetch "$2"
