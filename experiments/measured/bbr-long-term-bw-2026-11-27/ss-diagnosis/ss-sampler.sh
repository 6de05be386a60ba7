#!/bin/bash
# ss-sampler.sh OUT: once a ccsw-srv-* namespace exists, sample ss -ti of port 8080 every 10 ms into OUT until it goes.
out=$1
while :; do ns=$(ip netns list | grep -o '^ccsw-srv-[0-9]*' | head -1); [ -n "$ns" ] && break; sleep 0.2; done
ip netns exec $ns bash -c "while [ -e /run/netns/$ns ]; do echo T \$(date +%s.%N); ss -tinHa '( sport = :8080 )'; sleep 0.01; done" > $out 2>/dev/null
