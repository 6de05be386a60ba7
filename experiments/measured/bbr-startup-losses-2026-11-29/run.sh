#!/bin/sh
# ss of the server's port 8080 every ~10 ms while SCENARIO runs, alone under the experiment lock.
# Usage: run.sh FROZEN_BINARIES OUT SCENARIO
set -e
frozen=$1 out=$2 scenario=$3
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
mkdir -p "$out"
flock -x /tmp/ccswitch-experiment.lock sh -c "
  bash experiments/measured/bbr-long-term-bw-2026-11-27/ss-diagnosis/ss-sampler.sh $out/ss.txt &
  sampler=\$!
  CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch run $scenario --out $out/run > $out/run.log 2>&1
  wait \$sampler"
