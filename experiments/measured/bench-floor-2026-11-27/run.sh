#!/bin/sh
# make bench alternated: base (a015d4e) and lines (stats and config read with the cold lines)
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
