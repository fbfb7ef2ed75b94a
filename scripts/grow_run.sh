#!/usr/bin/env bash
# Grow a `udcg validate` run in chunks of questions, across sessions and machines.
#
#   scripts/grow_run.sh CONFIG LIMIT [LIMIT ...]      e.g. scripts/grow_run.sh configs/nq-qwen0.5b.yaml 10 20 30
#
# The run folder is runs/<name> (name from the config). Before the first chunk, a run folder without
# a cache gets the published caches back from docs/results/<name>/cache/*.jsonl.gz; after every
# chunk, the run is published to docs/results/<name> (scripts/publish_run.py: report, tables, data/,
# and the caches gzipped), so committing that folder keeps every finished model call. A chunk is `udcg validate CONFIG --set data.limit=LIMIT`: a larger
# limit keeps the smaller one's questions (data.select first, or a seeded permutation cut), so only
# the new questions cost model time. Data: $UDCG_DATA_DIR (default ../shared/data). Threads: $UDCG_THREADS (default: torch's choice). Stop between
# chunks: touch runs/<name>/STOP. With GROW_COMMIT=1 each published chunk is committed at once
# (only docs/results/<name>), so finished questions survive the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export UDCG_DATA_DIR=${UDCG_DATA_DIR:-../shared/data}  # the shared data sets the published configs name
config=$1; shift
name=$(.venv/bin/python -c "import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))['name'])" "$config")
run=runs/$name
saved=docs/results/$name/cache
mkdir -p "$run/cache"
if [ -d "$saved" ] && [ -z "$(ls -A "$run/cache")" ]; then
  for f in "$saved"/*.jsonl.gz "$saved"/*.json; do
    [ -e "$f" ] || continue
    case $f in *.gz) gunzip -c "$f" > "$run/cache/$(basename "${f%.gz}")" ;; *) cp "$f" "$run/cache/" ;; esac
  done
  echo "restored $(ls "$run/cache" | wc -l) cache files from $saved"
fi
threads=()
[ -n "${UDCG_THREADS:-}" ] && threads=(--set "reader.threads=$UDCG_THREADS")
for limit in "$@"; do
  [ -e "$run/STOP" ] && { echo "stopped by $run/STOP"; exit 0; }
  echo "=== $(date +%T) $name: data.limit=$limit"
  HF_HUB_OFFLINE=1 .venv/bin/udcg validate "$config" -o "$run" --set "data.limit=$limit" "${threads[@]}" --no-progress
  .venv/bin/python scripts/publish_run.py "$run" "docs/results/$name"
  echo "=== $(date +%T) $name: $limit questions done; published in docs/results/$name"
  if [ "${GROW_COMMIT:-0}" = 1 ]; then
    git add -- "docs/results/$name"
    for try in 1 2 3 4 5 6; do  # another git command may hold the index for a moment
      git commit -q -m "$name: grown to $limit questions (scripts/grow_run.sh)" -- "docs/results/$name" && break
      sleep 10
    done
  fi
done
