#!/bin/sh
# The ovs datapath at 10k flows x 100 kbit/s on the final build ($1) and with the egress
# program's flow-entry and directive lines read up front ($2), both built as `make build`
# builds them, alternated, $3 rounds (3 if not given). Runs named base-ovs-N/lines-ovs-N.
base=$1 lines=$2 rounds=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
run() { name=$1 bins=$2; shift 2; sh "$here/../scale-head-2026-11-28/scale-run.sh" "$here" "$name" "$bins" "$@"; }
for i in $(seq 1 "$rounds"); do
  run base-ovs-$i "$base" --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
  run lines-ovs-$i "$lines" --datapath ovs --flows 10000 --rate-kbps 100 --delay-ms 0
done
