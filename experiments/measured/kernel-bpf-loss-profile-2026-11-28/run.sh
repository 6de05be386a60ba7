#!/bin/sh
# A system-wide profile of `bench scale` at 10k flows x 100 kbit/s (the rest of the arguments,
# e.g. --loss-pct 1), 8 s into the window, for 8 s, with ccsw_cong_control's JIT line map and
# xlated dump taken just before. $1 frozen binaries, $2 scratch folder. Then, off the
# experiment lock: perf script -F comm,ip,sym,symoff -i $2/perf.data > $2/script.txt and
# ../scale-2026-11-27/profile/split.py $2 TAG (TAG: the program's tag, $2/prog.txt).
bins=$1 P=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
mkdir -p "$P"
CCSWITCH_BIN_DIR=$bins .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20 \
  --json --out "$P/out" "$@" > "$P/scale.json" 2> "$P/scale.txt" &
pid=$!
until grep -q 'flows at' "$P/scale.txt" 2>/dev/null; do sleep 0.5; done
sleep 12
id=$(bpftool prog show | awk -F: '/ccsw_cong_control/{print $1; exit}')
python3 experiments/measured/scale-2026-11-27/profile/jitinfo.py "$id" "$P/jit"
bpftool prog dump xlated id "$id" linum > "$P/xlated.txt" 2>&1
bpftool prog show id "$id" > "$P/prog.txt"
perf record -a -g -e cpu-clock -F 10000 -o "$P/perf.data" -- sleep 8 2> "$P/perf.err"
wait $pid
