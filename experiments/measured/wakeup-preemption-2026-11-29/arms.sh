#!/bin/sh
# arms.sh FROZEN OUT ROUNDS NAME SCALE_ARGS...: `ccswitch bench scale SCALE_ARGS --seconds 20`
# with the shims' default (real-time) and then with `--realtime-priority 0`, for ROUNDS rounds,
# into OUT/NAME-{default,normal}-ROUND.{json,txt}. Run from the repository's root.
set -e
frozen=$1 out=$2 rounds=$3 name=$4
shift 4
mkdir -p "$out"
for r in $(seq 1 "$rounds"); do
  for arm in default normal; do
    case $arm in default) extra= ;; normal) extra="--realtime-priority 0" ;; esac
    echo "$(date -u +%T) round $r $name $arm" >&2
    CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale "$@" --seconds 20 $extra --json \
      --out /tmp/scale-runs/$name-$arm-$r > "$out/$name-$arm-$r.json" 2> "$out/$name-$arm-$r.txt"
  done
done
