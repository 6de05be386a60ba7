#!/bin/sh
# The guard's cost per report: the example Python Reno through the agent's report path,
# handed to the Python worker (guarded) or called on the agent's thread (--python-unguarded),
# alternated, ROUNDS rounds; back to back (GAP 0) and with 1 ms between reports (the worker
# has gone to sleep). Prints one JSON line per measurement.
# Usage: bench.sh BIN_DIR REPO [ROUNDS]
set -eu
BIN=$1/ccswitch-agent
export PYTHONPATH=$2/python
ROUNDS=${3:-6}
ALG=py:ccswitch.authoring.examples.reno:Reno
for round in $(seq 1 "$ROUNDS"); do
  for gap in 0 1000; do
    if [ "$gap" = 0 ]; then n=20000; else n=3000; fi
    for mode in guarded unguarded; do
      flag=""; [ "$mode" = unguarded ] && flag=--python-unguarded
      "$BIN" --algorithm "$ALG" --bench-reports "$n" --bench-report-gap-us "$gap" $flag 2>/dev/null |
        python3 -c "import json,sys; d=json.load(sys.stdin); d.update(round=$round, mode='$mode'); print(json.dumps(d))"
    done
  done
done
