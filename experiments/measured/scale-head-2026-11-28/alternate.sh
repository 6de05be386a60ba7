#!/bin/sh
# Two builds on one `ccswitch bench scale` load, alternated for ROUNDS rounds, into
# FOLDER/A-TAG-i and FOLDER/B-TAG-i (scale-run.sh: resumable, a failed run not recorded).
# Usage: alternate.sh FOLDER TAG ROUNDS A A_BINS B B_BINS [bench scale arguments]
here=$1 tag=$2 rounds=$3 a=$4 a_bins=$5 b=$6 b_bins=$7
shift 7
run=$(dirname "$0")/scale-run.sh
for i in $(seq 1 "$rounds"); do
  sh "$run" "$here" "$a-$tag-$i" "$a_bins" "$@"
  sh "$run" "$here" "$b-$tag-$i" "$b_bins" "$@"
done
