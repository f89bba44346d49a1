#!/usr/bin/env bash
# The README's first command: installs what is missing, builds the programs as they ship, and
# runs the shipped example job on the embedded default (a private interchange and a local pool),
# then shows the result.
# The programs go to build-release/ (the folder tools/build_deb.sh packs, README), built without
# the test hooks (-Dtest_hooks stays off) and without the tests: ./build is the test build
# (tools/build.sh), whose programs carry the failure-injection hooks the integration tests use,
# which what users run must not.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash tools/install-deps.sh
out=build-release
if [ ! -f "$out/build.ninja" ]; then
  meson setup "$out" --wrap-mode=nofallback --buildtype=release -Dtests=disabled -Dtest_hooks=false
fi
# The man pages (help2man, from tools/deps-debian.txt), and $out/bin: links to the programs beside
# $out/share/man, so one PATH entry gives both `fanout` and `man fanout` (man-db looks for
# ../share/man next to each folder on PATH). Nothing is installed outside the clone, and running
# this again (or `ninja -C build-release`) updates what PATH finds.
ninja -C "$out" client/fanout interchange/fanout-interchange pool/fanout-pool pool/fanout-worker \
  tools/packaging/fanout.1 tools/packaging/fanout-interchange.1 tools/packaging/fanout-pool.1
mkdir -p "$out/bin" "$out/share/man/man1"
for p in client/fanout interchange/fanout-interchange pool/fanout-pool pool/fanout-worker; do
  ln -sfn "../$p" "$out/bin/$(basename "$p")"
done
for m in fanout fanout-interchange fanout-pool; do
  ln -sfn "../../../tools/packaging/$m.1" "$out/share/man/man1/$m.1"
done
example=docs/examples/file-scoring
db=${FANOUT_DB:-$top/runs/fanout.db}
rm -f "$example/out/word_counts.txt"
echo "== fanout run $example/job.yaml --db $db --run-dir $(dirname "$db")"
"$out/client/fanout" run "$example/job.yaml" --db "$db" --run-dir "$(dirname "$db")" \
  --python "${FANOUT_PYTHON:-python3}"
echo "== first rows of $example/out/word_counts.txt"
head -n 5 "$example/out/word_counts.txt"
echo "== fanout history --db $db"
"$out/client/fanout" history --db "$db" --limit 5
echo "== sqlite3 $db 'select id, name, state from jobs order by id desc limit 3'"
sqlite3 "$db" 'select id, name, state from jobs order by id desc limit 3'
echo "== next: put the programs on PATH (add the line to ~/.bashrc to keep it), then"
echo "   \`fanout --help\`, \`man fanout\` and the README's commands work from any folder:"
echo "   export PATH=\"$top/$out/bin:\$PATH\""
