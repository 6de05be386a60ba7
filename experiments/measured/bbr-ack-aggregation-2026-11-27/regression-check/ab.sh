#!/bin/bash
# Alternates, per repetition, build "base" (b0641b7) and build "new" (7873070), each running
# scenario.toml's native:bbr and kernel:bbr. Frozen binaries in /tmp/frozen-{base,new}; resumable.
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/../alternate.sh" "$here/scenario.toml" "${RUNS:-/tmp/regr/runs}" "${REPS:-6}" /tmp/frozen base= new=
