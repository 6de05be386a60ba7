#!/bin/sh
# Issue 21's scale targets on the night's final build ($2) against the stop's start ($1):
# through the 50-ms delay shell at 300 Mbit/s (10k x 30 kbit/s, the highest rate it sustains
# with its queues sized) alternated for 5 rounds, and twice at 400 on the final build; the ovs
# datapath at 10k x 100 kbit/s alternated for 3 rounds; on the final build 10k x 100 kbit/s
# clean and at 1% loss twice each, and 100k flows twice. Each run alone under the experiment
# lock; a finished run is skipped (resumable).
base=$1 final=$2
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
run() {
  name=$1 bins=$2; shift 2
  [ -f "$here/$name.json" ] && return
  echo "$(date -u +%T) $name"
  CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale --json "$@" \
    --out "/tmp/scale-final-runs/$name" > "$here/$name.json.tmp" 2> "$here/$name.txt"
  mv "$here/$name.json.tmp" "$here/$name.json"
}
for i in 1 2 3 4 5; do
  run delay-base-$i "$base" --flows 10000 --rate-kbps 30 --delay-ms 25 --seconds 20
  run delay-final-$i "$final" --flows 10000 --rate-kbps 30 --delay-ms 25 --seconds 20
done
for i in 1 2; do
  run delay400-final-$i "$final" --flows 10000 --rate-kbps 40 --delay-ms 25 --seconds 20
done
for i in 1 2 3; do
  run ovs-base-$i "$base" --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
  run ovs-final-$i "$final" --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
done
for i in 1 2; do
  run kernel-10k-clean-$i "$final" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
  run kernel-10k-loss1-$i "$final" --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
done
for i in 1 2; do
  run kernel-100k-$i "$final" --flows 100000 --rate-kbps 1 --delay-ms 0
done
# After the answer path (3fbab3b, $3): three runs at 400 Mbit/s.
[ -n "$3" ] && for i in 1 2 3; do
  run delay400-head-$i "$3" --flows 10000 --rate-kbps 40 --delay-ms 25 --seconds 20
done
