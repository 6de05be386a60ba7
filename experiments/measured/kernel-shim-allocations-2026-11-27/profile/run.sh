#!/bin/sh
# A DWARF profile of the kernel shim (with its agent) through the delay shell, 10 s into the
# window, for 5 s. $1 frozen binaries, $2 scratch folder, $3 kbit/s per flow (10 if not given).
# `profile/` ran with /tmp/frozen-opts /tmp/prof-k, `profile-after/` with /tmp/frozen-alloc
# /tmp/prof-k2; ../delay-shell-rates-2026-11-27/profile with rate 30.
bins=$1 P=$2 rate=${3:-10}
cd "$(dirname "$0")/../../../.."
mkdir -p "$P"
CCSWITCH_BIN_DIR=$bins .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps "$rate" --delay-ms 25 --seconds 20 --json --out $P/out > $P/scale.json 2> $P/scale.txt &
pid=$!
until grep -q 'flows at' $P/scale.txt 2>/dev/null; do sleep 0.5; done
sleep 10
shim=$(pgrep -f "$bins/ccswitch-kernel" | head -1); echo "shim $shim" > $P/pids
perf record --call-graph dwarf,16384 -F 2000 -p $shim -o $P/perf.data -- sleep 5 2> $P/perf.err
wait $pid
