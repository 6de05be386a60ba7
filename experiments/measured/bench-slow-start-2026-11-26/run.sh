#!/bin/bash
# Alternated: make bench's overhead (2 rounds), then bench scale 10k x 100 kbit/s clean (3 rounds).
cd /work/main
for round in 1 2; do
  for b in base ss; do
    flock -x /tmp/ccswitch-experiment.lock env CCSWITCH_BIN_DIR=/tmp/frozen-$b .venv/bin/ccswitch bench overhead --json > /tmp/exp/bench/overhead-$b-$round.json 2> /tmp/exp/bench/overhead-$b-$round.err
  done
done
for round in 1 2 3; do
  for b in base ss; do
    flock -x /tmp/ccswitch-experiment.lock env CCSWITCH_BIN_DIR=/tmp/frozen-$b .venv/bin/ccswitch bench scale --json --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 > /tmp/exp/bench/scale-$b-$round.json 2> /tmp/exp/bench/scale-$b-$round.err
  done
done
echo done > /tmp/exp/bench/done
