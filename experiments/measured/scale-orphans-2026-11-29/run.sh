#!/bin/sh
# run.sh OUT ARM FROZEN...: for each ARM=FROZEN pair, alone under the experiment lock, one
# `ccswitch bench scale` of 10k flows at 85 kbit/s through the 50-ms delay shell (850 Mbit/s,
# the most the shell sustains here: ../delay-shell-rate-2026-11-29), then /proc/net/sockstat's
# TCP line every 2 s while three 2 MB transfers run (probe.toml), and on for 240 s in all.
# Usage: run.sh OUT old=/tmp/frozen-head new=/tmp/frozen-fix
set -e
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../.."
out=$1
shift
mkdir -p "$out"
for pair in "$@"; do
  arm=${pair%%=*} frozen=${pair#*=}
  flock -x /tmp/ccswitch-experiment.lock sh -c "
    echo \"\$(date -u +%T) $arm: scale\" >&2
    CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch bench scale --flows 10000 --rate-kbps 85 --delay-ms 25 --seconds 20 \
      --json --out /tmp/scale-runs/orphans-$arm > $out/$arm-scale.json 2> $out/$arm-scale.txt
    end=\$((\$(date +%s) + 240))
    (while [ \$(date +%s) -lt \$end ]; do echo \"\$(date -u +%T) \$(grep '^TCP:' /proc/net/sockstat)\"; sleep 2; done) > $out/$arm-sockstat.txt &
    sampler=\$!
    CCSWITCH_BIN_DIR=$frozen .venv/bin/ccswitch run $here/probe.toml --out /tmp/scale-runs/orphans-probe-$arm > $out/$arm-probe.log 2>&1
    cp /tmp/scale-runs/orphans-probe-$arm/transfers.jsonl $out/$arm-probe.jsonl
    wait \$sampler"
done
rm -rf /tmp/scale-runs
