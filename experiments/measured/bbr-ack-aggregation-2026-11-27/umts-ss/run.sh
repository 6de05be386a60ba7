#!/bin/bash
# run.sh OUT BIN_DIR: umts.toml under the experiment lock, with ss -tinHa of port 8080 in each
# transfer's server namespace every ~10 ms (the sampler of ../../bbr-long-term-bw-2026-11-27/ss-diagnosis)
# into OUT/ss-N.txt.
here=$(cd "$(dirname "$0")" && pwd)
out=$1; bins=$2
mkdir -p "$out"
cd /work/main
CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch run "$here/umts.toml" --out "$out/run" > "$out/run.log" 2>&1 &
run=$!
n=0
while kill -0 $run 2>/dev/null; do
  ns=$(ip netns list | grep -o '^ccsw-srv-[0-9]*' | head -1)
  if [ -z "$ns" ]; then sleep 0.1; continue; fi
  n=$((n + 1))
  ip netns exec "$ns" bash -c "while [ -e /run/netns/$ns ]; do echo T \$(date +%s.%N); ss -tinHa '( sport = :8080 )'; sleep 0.01; done" > "$out/ss-$n.txt" 2>/dev/null
done
wait $run
