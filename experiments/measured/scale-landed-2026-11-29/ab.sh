#!/bin/sh
# ab.sh BEFORE_BINS AFTER_BINS OUT ROUNDS: the landing's before/after on loads ovs, A, B and D850, in
# alternated pairs (the order flips each round), into OUT/{before,after}-LOAD-ROUND.json; a run
# already recorded is skipped, so a stopped run resumes. Run from the repository's root, alone.
set -e
. "$(dirname "$0")/one.sh"
before=$1 after=$2 out=$3 rounds=$4
mkdir -p "$out"
A="--flows 10000 --rate-kbps 100 --delay-ms 0"
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) = 1 ]; then order="before after"; else order="after before"; fi
  for load in ovs A B D850; do
    case $load in
      ovs) args="$A --datapath ovs" ;; A) args="$A" ;; B) args="$A --loss-pct 1" ;;
      D850) args="--flows 10000 --rate-kbps 85 --delay-ms 25" ;;
    esac
    for side in $order; do
      case $side in before) bins=$before ;; after) bins=$after ;; esac
      one "$out" "$side-$load-$r" "$bins" $args
    done
  done
done
rm -rf /tmp/scale-runs
echo "$(date -u +%T) done" >&2
