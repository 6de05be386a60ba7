#!/bin/sh
# Issue 21's kernel scale targets on the evening's final build: 10k x 100 kbit/s clean and at
# 1% loss, twice each, alternated, then 100k flows once. $1 the frozen binaries. Each run
# alone under the experiment lock; a finished run is skipped (resumable).
bins=$1
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
run() {
  name=$1; shift
  [ -f "$here/$name.json" ] && return
  echo "$(date -u +%T) $name"
  CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale --json "$@" \
    --out "/tmp/scale-final-runs/$name" > "$here/$name.json.tmp" 2> "$here/$name.txt"
  mv "$here/$name.json.tmp" "$here/$name.json"
}
for i in 1 2; do
  run kernel-10k-clean-$i --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20
  run kernel-10k-loss1-$i --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 --loss-pct 1
done
run kernel-100k-1 --flows 100000 --rate-kbps 1 --delay-ms 0
# 16 client-side aborts in kernel-100k-1: the stop's start (its second argument), then the
# final build again, to tell the build from the machine.
[ -n "$2" ] && bins=$2 run kernel-100k-before-2 --flows 100000 --rate-kbps 1 --delay-ms 0 && bins=$1 run kernel-100k-3 --flows 100000 --rate-kbps 1 --delay-ms 0
