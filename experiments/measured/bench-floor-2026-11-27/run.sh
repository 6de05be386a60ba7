#!/bin/sh
# `ccswitch bench overhead` alternated, 8 rounds: base = a015d4e frozen in /tmp/frozen-floor, lines =
# a015d4e with cold-lines-stats-config.patch frozen in /tmp/frozen-lines. Output in $OUT (resumable).
cd "$(dirname "$0")/../../.."
for round in 1 2 3 4 5 6 7 8; do
  for arm in base lines; do
    [ $arm = base ] && bins=/tmp/frozen-floor || bins=/tmp/frozen-lines
    out=${OUT:-/tmp/lines-runs}/$arm-$round
    [ -f $out.json ] && continue
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench overhead --json --out $out > $out.json.tmp 2> $out.txt
    mv $out.json.tmp $out.json
  done
done
