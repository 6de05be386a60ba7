#!/bin/sh
# Load E (100k flows x 1 kbit/s), with the shims' default (real-time) and then with
# `--realtime-priority 0`, $3 rounds: a real-time shim must not starve the load it serves when
# the machine saturates. $1 frozen binaries, $2 output folder.
set -e
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
sh "$here/arms.sh" "$1" "$2" "$3" E --flows 100000 --rate-kbps 1 --delay-ms 0
rm -rf /tmp/scale-runs
