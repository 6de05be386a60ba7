#!/bin/sh
# Head 38cde68 ($1) against the promise started only for a stream of routine records ($2),
# both built as `make build` builds them, clean and at 1% loss at 10k flows x 100 kbit/s,
# $3 rounds (3 if not given), alternated. Runs named head-*/stream-*.
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/../scale-head-2026-11-28/alternate-clean-loss1.sh" "$here" "${3:-3}" head "$1" stream "$2"
