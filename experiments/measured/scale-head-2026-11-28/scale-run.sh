#!/bin/sh
# One `ccswitch bench scale --json` run on frozen binaries, alone under the experiment lock,
# into FOLDER/NAME.json (its log FOLDER/NAME.txt): skipped if that exists (resumable), not
# recorded if the run fails. Usage: scale-run.sh FOLDER NAME BINS [bench scale arguments]
here=$1 name=$2 bins=$3
shift 3
[ -f "$here/$name.json" ] && exit 0
echo "$(date -u +%T) $name"
cd "$(dirname "$0")/../../.." || exit 1
CCSWITCH_BIN_DIR=$bins flock -x /tmp/ccswitch-experiment.lock .venv/bin/ccswitch bench scale --json "$@" \
  --out "/tmp/scale-runs/$(basename "$here")/$name" > "$here/$name.json.tmp" 2> "$here/$name.txt" &&
  mv "$here/$name.json.tmp" "$here/$name.json"
