#!/bin/bash
# traced.sh OUT.trace CMD...: run CMD with the tcp:tcp_probe and tcp_cong_state_set tracepoints
# recorded (server port only) into OUT.trace, in a tracing instance of its own.
set -u
out=$1; shift
T=/sys/kernel/tracing/instances/renofid
mkdir -p $T
echo 0 > $T/tracing_on
echo mono > $T/trace_clock
echo 32768 > $T/buffer_size_kb
echo "sport == 8080" > $T/events/tcp/tcp_probe/filter
echo 1 > $T/events/tcp/tcp_probe/enable
echo 1 > $T/events/tcp/tcp_cong_state_set/enable
echo 1 > $T/events/tcp/tcp_retransmit_skb/enable
cat $T/trace_pipe > "$out" &
catpid=$!
echo 1 > $T/tracing_on
"$@"
rc=$?
echo 0 > $T/tracing_on
sleep 1
kill $catpid
echo 0 > $T/events/tcp/tcp_probe/enable
echo 0 > $T/events/tcp/tcp_cong_state_set/enable
echo 0 > $T/events/tcp/tcp_retransmit_skb/enable
rmdir $T
exit $rc
