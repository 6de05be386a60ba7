#!/bin/sh
# base = 48173e7 frozen in /tmp/frozen-base, likely = 48173e7 with branch-hints.patch frozen in
# /tmp/frozen-likely; 8 rounds, output in $OUT.
exec "$(dirname "$0")/../bench-floor-2026-11-27/alternate.sh" /tmp/frozen-base /tmp/frozen-likely likely "${OUT:-/tmp/likely-runs}" 8
