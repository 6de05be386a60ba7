#!/bin/sh
# ovs-pairs.sh BEFORE_BINS AFTER_BINS OUT FIRST LAST: load ovs alone, before and after in
# alternated pairs for rounds FIRST..LAST (the order flips each round, as in ab.sh), into
# OUT/{before,after}-ovs-ROUND.json; resumable. Run from the repository's root, alone.
set -e
. "$(dirname "$0")/one.sh"
before=$1 after=$2 out=$3 first=$4 last=$5
mkdir -p "$out"
for r in $(seq "$first" "$last"); do
  if [ $((r % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for side in $order; do
    case $side in before) bins=$before ;; after) bins=$after ;; esac
    one "$out" "$side-ovs-$r" "$bins" --flows 10000 --rate-kbps 100 --delay-ms 0 --datapath ovs
  done
done
rm -rf /tmp/scale-runs
