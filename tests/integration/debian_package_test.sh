#!/usr/bin/env bash
# The Debian package as an administrator uses it: tools/build_deb.sh packs the
# build, `apt-get install ./fanout_*.deb` installs it, and the installed /usr/bin/fanout runs the
# shipped example job from /usr/share/doc/fanout/examples; the man pages and bash completion are
# where man and bash look. The package is removed at the end, also on failure.
# Usage: debian_package_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
if [ "$(id -u)" -ne 0 ]; then echo "SKIP: installing a .deb needs root" >&2; exit 77; fi
# The package is made from a build without the test hooks (tools/build_deb.sh refuses a test
# build); CI runs this script on its release build.
hooks=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"]=="test_hooks"), False))')
if [ "$hooks" = True ]; then
  echo "SKIP: $build has -Dtest_hooks=true; the package comes from a build without it (.ci/run runs this on build-release)" >&2
  exit 77
fi
if dpkg-query -W -f='${Status}' fanout 2>/dev/null | grep "install ok installed" >/dev/null; then
  echo "SKIP: a fanout package is already installed here; this test would replace it" >&2; exit 77
fi
work=$(mktemp -d)
installed=0
cleanup() {
  [ "$installed" = 1 ] && dpkg --purge fanout >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# A pipe into grep reads all of its input (no -q): under pipefail, grep -q leaving at the first
# match could fail the writer with SIGPIPE, and the check with it.

deb=$(bash "$src/tools/build_deb.sh" "$build" "$work")
echo "built $deb"
dpkg-deb -I "$deb" | grep 'Depends:.*libzmq5' >/dev/null || fail "the package does not depend on libzmq5"
installed=1
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$deb" >/dev/null ||
  fail "apt-get install $deb failed"
dpkg-query -W -f='${Status}' fanout | grep "install ok installed" >/dev/null || fail "fanout is not installed"

# The installed programs, not the build tree's: a clean PATH and no FANOUT_* pointers.
env_clean=(env -i HOME="$work/home" PATH=/usr/bin:/bin LANG=C.UTF-8)
mkdir -p "$work/home"
[ "$("${env_clean[@]}" fanout --version)" = "$(meson introspect "$build" --projectinfo |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')" ] || fail "fanout --version"

cp -r /usr/share/doc/fanout/examples/file-scoring "$work/job"
rm -rf "$work/job/out"
(cd "$work/job" && "${env_clean[@]}" fanout run job.yaml --db "$work/store.db" --python /usr/bin/python3) \
  > "$work/run.log" 2>&1 || { cat "$work/run.log" >&2; fail "fanout run from the package failed"; }
grep -q "succeeded" "$work/run.log" || { cat "$work/run.log" >&2; fail "the job did not succeed"; }
files=$(find "$work/job/data" -type f | wc -l)
rows=$(wc -l < "$work/job/out/word_counts.txt")
[ "$rows" -eq "$files" ] || fail "$rows rows for $files input files"
echo "installed fanout ran file-scoring: $rows rows for $files files"

# The Python package: on Debian's system Python's path, and what `fanout python` imports.
got=$("${env_clean[@]}" /usr/bin/python3 -c 'import fanout; print(fanout.__file__)')
[ "$got" = /usr/lib/python3/dist-packages/fanout/__init__.py ] || fail "import fanout gave: $got"
got=$("${env_clean[@]}" fanout python -c 'import fanout, os; print(fanout.__file__, os.environ["FANOUT_BIN"])')
[ "$got" = "/usr/lib/python3/dist-packages/fanout/__init__.py /usr/bin/fanout" ] ||
  fail "fanout python imported: $got"
[ -f /usr/share/fanout/python-sdk/README.md ] || fail "the SDK folder is not installed"

for m in fanout fanout-interchange fanout-pool; do
  zcat "/usr/share/man/man1/$m.1.gz" | grep '^\.SH OPTIONS' >/dev/null || fail "man page $m.1 has no OPTIONS"
done
zcat /usr/share/man/man1/fanout.1.gz | grep '^\.SS "fanout run"' >/dev/null || fail "fanout.1 lacks fanout run"
got=$("${env_clean[@]}" bash -c 'source /usr/share/bash-completion/completions/fanout
  COMP_WORDS=(fanout re); COMP_CWORD=1; _fanout; echo "${COMPREPLY[*]}"
  COMP_WORDS=(fanout run --prefe); COMP_CWORD=2; _fanout; echo "${COMPREPLY[*]}"')
[ "$got" = $'resume report\n--prefetch' ] || fail "bash completion gave: $got"
echo "PASS: package built, installed, ran a job; man pages and completion in place"
