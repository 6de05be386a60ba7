#!/bin/sh
# `ccswitch bench overhead` alternated, 8 rounds: base = 48173e7 frozen in /tmp/frozen-base,
# likely = 48173e7 with branch-hints.patch frozen in /tmp/frozen-likely. Output in $OUT (resumable).
cd "$(dirname "$0")/../../.."
for round in 1 2 3 4 5 6 7 8; do
  for arm in base likely; do
    [ $arm = base ] && bins=/tmp/frozen-base || bins=/tmp/frozen-likely
    out=${OUT:-/tmp/likely-runs}/$arm-$round
    [ -f $out.json ] && continue
    CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench overhead --json --out $out > $out.json.tmp 2> $out.txt
    mv $out.json.tmp $out.json
  done
done
