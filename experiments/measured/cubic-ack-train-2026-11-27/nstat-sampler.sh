#!/bin/bash
# nstat-sampler.sh OUT: once a ccsw-srv-* namespace exists, append its HyStart counters (absolute) every 0.5 s until it goes.
out=$1
while :; do ns=$(ip netns list | grep -o '^ccsw-srv-[0-9]*' | head -1); [ -n "$ns" ] && break; sleep 0.2; done
while [ -e /run/netns/$ns ]; do echo "T $(date +%s.%N) $(ip netns exec $ns nstat -az 2>/dev/null | grep -i hystart | awk '{printf "%s=%s ", $1, $2}')" >> $out; sleep 0.5; done
