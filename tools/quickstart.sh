#!/usr/bin/env bash
# The README's first command: installs what is missing, builds, and runs the shipped example job
# on the embedded default (a private interchange and a local pool), then shows the result.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash tools/install-deps.sh
bash tools/build.sh --programs
example=docs/examples/file-scoring
db=${FANOUT_DB:-$top/runs/fanout.db}
rm -f "$example/out/word_counts.txt"
echo "== fanout run $example/job.yaml --db $db --run-dir $(dirname "$db")"
build/client/fanout run "$example/job.yaml" --db "$db" --run-dir "$(dirname "$db")" \
  --python "${FANOUT_PYTHON:-python3}"
echo "== first rows of $example/out/word_counts.txt"
head -n 5 "$example/out/word_counts.txt"
echo "== fanout history --db $db"
build/client/fanout history --db "$db" --limit 5
echo "== sqlite3 $db 'select id, name, state from jobs order by id desc limit 3'"
sqlite3 "$db" 'select id, name, state from jobs order by id desc limit 3'
