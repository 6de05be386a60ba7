#!/bin/bash
# usage: run.sh NAME BINDIR [profile]
# One `bench scale` run at 10k x 100 kbit/s on the ovs datapath (after ovs-cpu-2026-11-26's
# run.sh). Over the measurement window it snapshots the client's (root namespace's) TcpExt
# counters, ovs-vswitchd's CPU time and the bridge namespace's packet sockets; `profile` adds
# `perf record -g` of the shim and a system-wide `perf record` (the port programs' JITed
# symbols) for 8 s.
set -u
name=$1; bindir=$2; mode=${3:-}
out=/tmp/ovs-shim-copies-runs/$name
rm -rf $out; mkdir -p $out
repo=$(cd "$(dirname "$0")/../../.." && pwd)
export CCSWITCH_BIN_DIR=$bindir PYTHONPATH=$repo/python
( /work/main/.venv/bin/ccswitch bench scale --json --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 --out $out/logs > $out/scale.json 2> $out/stderr.txt; echo $? > $out/rc ) &
bench=$!
pid=
for i in $(seq 1 240); do
  pid=$(pgrep -n -f "^$bindir/ccswitch-ovs run" || true)
  [ -n "$pid" ] && break; sleep 0.5
done
echo "shim pid $pid" > $out/prof-info.txt
# the window starts 6 s (ramp 5 s + 1 s) after this line
while ! grep -qs "kbit/s each" $out/stderr.txt && [ ! -e $out/rc ]; do sleep 0.2; done
sleep 7
ns=$(grep -o "bridge netns [^:]*" $out/stderr.txt | awk '{print $3}')
ovspid=$(pgrep -n ovs-vswitchd || true)
snap() {
  grep -h "^TcpExt:" /proc/net/netstat > $out/netstat-client-$1.txt
  [ -n "$ovspid" ] && { date +%s.%N; cat /proc/$ovspid/stat; } > $out/ovs-vswitchd-stat-$1.txt
  [ -n "$ns" ] && ip netns exec $ns ss -f link -anm > $out/packet-sockets-$1.txt 2>&1
}
snap start
if [ "$mode" = profile ]; then
  perf record -a -g -F 499 -o $out/perf-all.data -- sleep 8 > $out/perf-all.out 2>&1 &
  perf record -g -F 999 -p $pid -o $out/perf.data -- sleep 8 > $out/perf.out 2>&1
  sleep 1
else
  sleep 8
fi
snap end
wait $bench
cat $out/rc
