#!/bin/sh
# The same comparison on matched builds: both from `cargo build --release` of the whole
# workspace, as `make build` builds them ($1 the head 38cde68, $2 the change d38ff0c), clean
# and at 1% loss, $3 rounds (3 if not given), alternated. Runs named head-*/change-*.
here=$(cd "$(dirname "$0")" && pwd)
sh "$here/../scale-head-2026-11-28/alternate-clean-loss1.sh" "$here" "${3:-3}" head "$1" change "$2"
