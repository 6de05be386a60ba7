#!/bin/sh
# Every scale target of issue 21 on one build, each run alone under the experiment lock,
# round after round (resumable: a finished run is skipped). $1 frozen binaries, $2 output
# folder, $3 rounds (the 100k and delay-shell runs only in round 1).
set -e
frozen=$1 out=$2 rounds=${3:-2}
cd "$(dirname "$0")/../../.."
run() {  # name, then bench arguments
  name=$1; shift
  [ -f "$out/$name.json" ] && return 0
  echo "$(date -u +%T) $name"
  CCSWITCH_BIN_DIR=$frozen flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench "$@" --json \
    --out "$out/$name" > "$out/$name.json.tmp" 2> "$out/$name.txt"
  mv "$out/$name.json.tmp" "$out/$name.json"
}
for round in $(seq 1 "$rounds"); do
  run kernel-10k-clean-$round scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
  run kernel-10k-loss1-$round scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
  run ovs-10k-$round scale --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
  run overhead-$round overhead
  if [ "$round" = 1 ]; then
    run kernel-10k-rtt50-1 scale --flows 10000 --rate-kbps 10 --delay-ms 25 --seconds 20
    run kernel-100k-1 scale --flows 100000 --rate-kbps 1 --delay-ms 0
  fi
done
