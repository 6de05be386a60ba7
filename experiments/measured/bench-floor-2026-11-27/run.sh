#!/bin/sh
# base = a015d4e frozen in /tmp/frozen-floor, lines = a015d4e with cold-lines-stats-config.patch
# frozen in /tmp/frozen-lines; 8 rounds, output in $OUT.
exec "$(dirname "$0")/alternate.sh" /tmp/frozen-floor /tmp/frozen-lines lines "${OUT:-/tmp/lines-runs}" 8
