#!/bin/sh
# Issue 21's scale targets on this stop's final build: the ovs datapath alternated with the
# stop's start, then the kernel datapath's runs. Each run alone under the experiment lock;
# a finished run is skipped (resumable). $1 the start's binaries, $2 the final build's.
set -e
start=$1 final=$2 out=experiments/measured/scale-final-2026-11-27
cd "$(dirname "$0")/../../.."
run() {  # name, binaries, then bench arguments
  name=$1 bins=$2; shift 2
  [ -f "$out/$name.json" ] && return 0
  echo "$(date -u +%T) $name"
  CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench "$@" --json \
    --out "/tmp/scale-final/$name" > "$out/$name.json.tmp" 2> "$out/$name.txt"
  mv "$out/$name.json.tmp" "$out/$name.json"
}
for round in 1 2 3 4; do
  run ovs-start-$round "$start" scale --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
  run ovs-final-$round "$final" scale --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
done
for round in 1 2; do
  run kernel-10k-clean-$round "$final" scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
  run kernel-10k-loss1-$round "$final" scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
  run overhead-$round "$final" overhead
done
run kernel-100k-1 "$final" scale --flows 100000 --rate-kbps 1 --delay-ms 0
# Added after kernel-100k-1 showed 5,622 flows silent in the window (0 at the stop's start):
# the start's build and the final one again, alternated.
run kernel-100k-start-2 "$start" scale --flows 100000 --rate-kbps 1 --delay-ms 0
run kernel-100k-2 "$final" scale --flows 100000 --rate-kbps 1 --delay-ms 0
