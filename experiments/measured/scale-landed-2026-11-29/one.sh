# Sourced by run.sh, ab.sh and rates.sh, run from the repository's root.
# one OUT NAME BINS SCALE_ARGS...: one `ccswitch bench scale` run on the binaries BINS, into
# OUT/NAME.{json,txt}; skipped if OUT/NAME.json is there (a stopped run resumes).
one() {
  out=$1 name=$2 bins=$3; shift 3
  if [ -s "$out/$name.json" ]; then return; fi
  echo "$(date -u +%T) $name" >&2
  CCSWITCH_BIN_DIR=$bins .venv/bin/ccswitch bench scale "$@" --seconds 20 --json \
    --out /tmp/scale-runs/$name > "$out/$name.json.part" 2> "$out/$name.txt"
  mv "$out/$name.json.part" "$out/$name.json"
}
