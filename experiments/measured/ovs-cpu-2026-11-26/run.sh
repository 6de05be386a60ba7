#!/bin/bash
# usage: run.sh NAME BINDIR [pcap|profile]
# One `bench scale` run at 10k x 100 kbit/s on the ovs datapath. Over the measurement window
# it also snapshots the client's (root namespace's) TcpExt counters, ovs-vswitchd's CPU time
# and the bridge namespace's packet sockets (drops); `pcap` adds a capture of ~1/1024 of the
# flows (client ports with the low 10 bits zero) at the client and at the server port,
# `profile` adds that and `perf record` of the shim for 8 s.
set -u
name=$1; bindir=$2; mode=${3:-}
out=/tmp/ovs-cpu-runs/$name
rm -rf $out; mkdir -p $out
cd /work/ovs-cpu
export CCSWITCH_BIN_DIR=$bindir PYTHONPATH=/work/ovs-cpu/python
( /work/main/.venv/bin/ccswitch bench scale --json --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0 --out $out/logs > $out/scale.json 2> $out/stderr.txt; echo $? > $out/rc ) &
bench=$!
for i in $(seq 1 240); do
  pid=$(pgrep -n -f "^$bindir/ccswitch-ovs run" || true)
  [ -n "$pid" ] && break; sleep 0.5
done
echo "shim pid $pid" > $out/prof-info.txt
# the window starts 6 s (ramp 5 s + 1 s) after this line
while ! grep -qs "kbit/s each" $out/stderr.txt && [ ! -e $out/rc ]; do sleep 0.2; done
sleep 7
ns=$(grep -o "bridge netns [^:]*" $out/stderr.txt | awk '{print $3}')
srvport=$(grep -o "server port [^,]*" $out/stderr.txt | awk '{print $3}')
ovspid=$(grep -o "ovs-vswitchd pid [0-9]*" $out/stderr.txt | awk '{print $3}')
snap() {
  grep -h "^TcpExt:" /proc/net/netstat > $out/netstat-client-$1.txt
  [ -n "$ovspid" ] && { date +%s.%N; cat /proc/$ovspid/stat; } > $out/ovs-vswitchd-stat-$1.txt
  [ -n "$ns" ] && ip netns exec $ns ss -f link -anm > $out/packet-sockets-$1.txt 2>&1
}
snap start
filt='tcp and host 198.18.0.2 and ((tcp dst port 9000 and (tcp[0:2] & 0x3ff) = 0) or (tcp src port 9000 and (tcp[2:2] & 0x3ff) = 0))'
if [ -n "$mode" ]; then
  [ -n "$ns" ] && timeout 9 ip netns exec $ns tcpdump -i $srvport -n -s 128 -w $out/port.pcap "$filt" 2> $out/tcpdump-port.err &
  timeout 9 tcpdump -i any -n -s 128 -w $out/sample.pcap "$filt" 2> $out/tcpdump.err &
fi
if [ "$mode" = profile ]; then perf record -g -F 999 -p $pid -o $out/perf.data -- sleep 8 > $out/perf.out 2>&1; else sleep 8; fi
snap end
wait $bench
cat $out/rc
