#!/bin/sh
# 10k flows through the 50-ms delay shell at $4 kbit/s each (default 100: load D1000, 1 Gbit/s;
# runs are named by the aggregate, D<Mbit/s>), with the shims' default (real-time) and then with
# `--realtime-priority 0`, $3 rounds. $1 frozen binaries, $2 output folder.
set -e
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
kbps=${4:-100}
sh "$here/arms.sh" "$1" "$2" "$3" "D$((kbps * 10))" --flows 10000 --rate-kbps "$kbps" --delay-ms 25
rm -rf /tmp/scale-runs
