#!/bin/bash
# Alternates, per repetition, build "main" (native:bbr, kernel:bbr, kernel:bbr:ack_aggregation=1)
# and build "sample" (the same commit with Linux's rate sample in the kernel fold:
# kernel:bbr:ack_aggregation=1). Frozen binaries in /tmp/frozen-agg-{main,sample}; resumable.
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/alternate.sh" "$here/scenario.toml" "${RUNS:-/tmp/agg/runs}" "${REPS:-8}" /tmp/frozen-agg \
  main=native:bbr,kernel:bbr,kernel:bbr:ack_aggregation=1 sample=kernel:bbr:ack_aggregation=1
