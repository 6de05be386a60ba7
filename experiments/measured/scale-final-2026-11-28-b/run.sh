#!/bin/sh
# ../scale-final-2026-11-28's batch on the session's final build ($1, frozen binaries), into
# this folder, with the 1% loss load also run with the shim on a CPU of its own.
here=$(cd "$(dirname "$0")" && pwd)
exec sh "$here/../scale-final-2026-11-28/run.sh" "$1" "$here" owncpu
