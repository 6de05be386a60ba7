#!/bin/sh
# Two builds at 10k flows x 100 kbit/s, clean and at 1% loss, for ROUNDS rounds: each round
# A-clean-i, A-loss1-i, B-clean-i, B-loss1-i into FOLDER (scale-run.sh: resumable, a failed
# run not recorded). Usage: alternate-clean-loss1.sh FOLDER ROUNDS A A_BINS B B_BINS
here=$1 rounds=$2 a=$3 a_bins=$4 b=$5 b_bins=$6
run=$(dirname "$0")/scale-run.sh
load="--flows 10000 --rate-kbps 100 --delay-ms 0 --seconds 20"
for i in $(seq 1 "$rounds"); do
  for arm in a b; do
    if [ $arm = a ]; then name=$a bins=$a_bins; else name=$b bins=$b_bins; fi
    sh "$run" "$here" "$name-clean-$i" "$bins" $load
    sh "$run" "$here" "$name-loss1-$i" "$bins" $load --loss-pct 1
  done
done
