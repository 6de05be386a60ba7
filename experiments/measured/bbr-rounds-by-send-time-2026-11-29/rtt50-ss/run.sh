#!/bin/sh
# ss of the server's port 8080 every ~10 ms (../../bbr-long-term-bw-2026-11-27/ss-diagnosis/ss-sampler.sh)
# while rtt50.toml runs. $1 frozen binaries, $2 output folder.
set -e
frozen=$1 out=$2
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.."
mkdir -p "$out"
bash experiments/measured/bbr-long-term-bw-2026-11-27/ss-diagnosis/ss-sampler.sh "$out/ss.txt" &
sampler=$!
CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch run "$here/rtt50.toml" --out "$out/run" > "$out/run.log" 2>&1
wait $sampler
