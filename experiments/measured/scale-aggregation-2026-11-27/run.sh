#!/bin/bash
# Alternates base (b0641b7) and new (7873070) frozen builds at 10k flows x 100 kbit/s, no delay,
# clean and with 1% loss, ROUNDS rounds; each run alone under the experiment lock. Resumable.
out=${OUT:-/tmp/scale-agg}
mkdir -p "$out"
cd /work/main
for path in clean loss1; do
  loss=(); [ $path = loss1 ] && loss=(--loss-pct 1)
  for round in $(seq 1 "${ROUNDS:-2}"); do
    for side in base new; do
      name=$side-k10k-100kbps-$path-$round
      [ -f "$out/$name.json" ] && continue
      CCSWITCH_BIN_DIR=/tmp/frozen-$side flock -x /tmp/ccswitch-experiment.lock \
        .venv/bin/ccswitch bench scale --json --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 "${loss[@]}" \
        --out "$out/$name" > "$out/$name.json" 2> "$out/$name.txt"
      echo "$(date +%T) $name rc=$?"
    done
  done
done
