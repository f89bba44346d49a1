#!/usr/bin/env bash
# `pip install` as a Python user does it (pyproject.toml, meson-python; README, docs/python.md):
# a fresh venv, `pip install --no-build-isolation SOURCE`, then with the venv's bin/ first on
# PATH and nothing else of the tree: `fanout` and its three programs are the venv's, `import
# fanout` and `python -m fanout` work, `fanout run` runs docs/examples/file-scoring/job.yaml,
# fanout.Executor maps a function, `fanout python` finds the SDK-shaped modules, and the
# programs hold no failure-injection hook. The wheel and the source archive are checked for
# their contents too.
# Offline: Debian's python3-mesonpy through --system-site-packages, --no-index.
# Usage: pip_install_test.sh SOURCE_ROOT WORK_DIR
# WORK_DIR keeps meson-python's build folder between runs (--config-settings=builddir=), so a
# second run builds only what changed; the first is a whole release build (ccache helps).
set -euo pipefail
src=$1
work=$2
py=/usr/bin/python3

skip() {
  echo "SKIP: $*" >&2
  exit 77
}
[ -x "$py" ] || skip "$py is missing (Debian's python3)"
"$py" -c 'import mesonpy' 2>/dev/null ||
  skip "python3-mesonpy is not installed for $py (tools/deps-debian-test.txt)"
"$py" -c 'import ensurepip, venv' 2>/dev/null ||
  skip "python3-venv is not installed for $py (tools/deps-debian-test.txt)"
"$py" -m pip --version >/dev/null 2>&1 || skip "python3-pip is not installed for $py"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

mkdir -p "$work"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/fanout-pip-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The venv's path is fixed (meson-python writes it into the configuration of the kept build
# folder, which a venv elsewhere would make it configure anew); it is made fresh every run.
venv=$work/venv
rm -rf "$venv"
"$py" -m venv --system-site-packages "$venv"

start=$(date +%s)
"$venv/bin/pip" install --no-build-isolation --no-index --no-deps --disable-pip-version-check \
  --config-settings=builddir="$work/build" "$src" >"$tmp/pip.log" 2>&1 ||
  {
    tail -n 60 "$tmp/pip.log" >&2
    fail "pip install --no-build-isolation $src failed (log above)"
  }
echo "pip install: $(($(date +%s) - start)) s"

# From here on: the venv only (no build folder, no FANOUT_* of the test environment).
for v in $(env | grep -o '^FANOUT_[A-Z_]*' || true); do unset "$v"; done
export PATH="$venv/bin:/usr/bin:/bin"
export HOME="$tmp/home" FANOUT_DB="$tmp/home/fanout.db"
mkdir -p "$HOME"
cd "$tmp"

for prog in fanout fanout-interchange fanout-pool fanout-worker; do
  [ "$(command -v "$prog")" = "$venv/bin/$prog" ] ||
    fail "$prog on PATH is '$(command -v "$prog" || true)', not the venv's $venv/bin/$prog"
done
fanout --version

pkg=$(python -c 'import fanout, os; print(os.path.dirname(fanout.__file__))')
case "$pkg" in
  "$venv"/lib/python3*/site-packages/fanout) ;;
  *) fail "import fanout found $pkg, not the venv's site-packages" ;;
esac
found=$(python -c 'from fanout._cli import installed_fanout; print(installed_fanout())')
[ "$found" = "$venv/bin/fanout" ] || fail "the package finds '$found' as its fanout"
python -m fanout --version | grep -q . || fail "python -m fanout --version printed nothing"

# The README's first job, from a copy of the example (its outputs are written beside it).
cp -r "$src/docs/examples/file-scoring" "$tmp/file-scoring"
rm -rf "$tmp/file-scoring/out"
fanout run "$tmp/file-scoring/job.yaml" --quiet || fail "fanout run job.yaml exited $?"
rows=$(wc -l <"$tmp/file-scoring/out/word_counts.txt")
files=$(find "$tmp/file-scoring/data" -type f | wc -l)
[ "$rows" -eq "$files" ] || fail "word_counts.txt has $rows rows for $files input files"
echo "fanout run: $rows rows"

cat >"$tmp/executor_map.py" <<'EOF'
import fanout


def square(x):
    return x * x


if __name__ == "__main__":
    with fanout.Executor(2) as ex:
        got = list(ex.map(square, range(10)))
    assert got == [x * x for x in range(10)], got
    print("executor map:", got)
EOF
python "$tmp/executor_map.py" || fail "fanout.Executor map from the venv failed"

# meson's datadir: PREFIX/share/fanout, or PREFIX/fanout where meson-python 0.12's wheels put
# it; the programs look in both before anything else.
share=$venv/share/fanout
[ -d "$share" ] || share=$venv/fanout
[ -f "$share/python/fanout_worker.py" ] || fail "the worker shim is not in $venv/{share/,}fanout"

# `fanout python` runs the venv's interpreter with the SDK-shaped modules of the venv.
sdk=$(fanout python -c 'import sys, azure.ai.ml as m; print(sys.executable, m.__file__)')
case "$sdk" in
  "$venv/bin/python3 $share/python-sdk/"*) ;;
  *) fail "fanout python: interpreter and azure.ai.ml are '$sdk', not the venv's" ;;
esac

# A shipped build: no failure-injection hook in any program (util/test_hooks.hpp).
if command -v strings >/dev/null; then
  for prog in fanout fanout-interchange fanout-pool fanout-worker; do
    if strings "$venv/bin/$prog" | grep -q 'FANOUT_TEST_'; then
      fail "$prog holds test hooks (FANOUT_TEST_ names)"
    fi
  done
fi

# The wheel (`pip wheel`, the same build folder: nothing to compile again): the programs as
# scripts, the package, meson's datadir as data.
"$venv/bin/pip" wheel --no-build-isolation --no-index --no-deps --disable-pip-version-check \
  --config-settings=builddir="$work/build" -w "$tmp/wheel" "$src" >"$tmp/wheel.log" 2>&1 ||
  {
    tail -n 40 "$tmp/wheel.log" >&2
    fail "pip wheel $src failed (log above)"
  }
whl=$(ls "$tmp"/wheel/fanout-*.whl)
names=$(python -c 'import sys, zipfile; print("\n".join(zipfile.ZipFile(sys.argv[1]).namelist()))' "$whl")
# The package at the top, or in .data/purelib/ (a wheel with programs is not pure).
pkg_at='^(fanout-[^/]*\.data/purelib/)?fanout'
for want in "$pkg_at/__init__.py$" "$pkg_at/__main__.py$" "$pkg_at/_entry/fanout_executor_entry.py$" \
  '\.data/scripts/fanout$' '\.data/scripts/fanout-interchange$' '\.data/scripts/fanout-pool$' \
  '\.data/scripts/fanout-worker$' '\.data/data/(share/)?fanout/python/fanout_worker.py$' \
  '\.data/data/(share/)?fanout/python-sdk/azure/ai/ml/__init__.py$'; do
  echo "$names" | grep -qE -- "$want" || fail "the wheel $(basename "$whl") has no $want"
done
echo "wheel: $(basename "$whl")"

# The source archive meson-python makes (`meson dist` of the committed tree): what pip builds a
# wheel from elsewhere. Only from a git checkout, which `meson dist` needs.
if git -C "$src" rev-parse --git-dir >/dev/null 2>&1; then
  mkdir -p "$tmp/sdist"
  (cd "$src" && python -c 'import mesonpy, sys; print(mesonpy.build_sdist(sys.argv[1]))' \
    "$tmp/sdist") >"$tmp/sdist.log" 2>&1 || {
    tail -n 40 "$tmp/sdist.log" >&2
    fail "mesonpy.build_sdist failed (log above)"
  }
  names=$(tar tzf "$tmp"/sdist/fanout-*.tar.gz)
  for want in PKG-INFO pyproject.toml meson.build python/fanout/__init__.py client/main.cpp; do
    echo "$names" | grep -q "^fanout-[^/]*/$want$" || fail "the sdist has no $want"
  done
  echo "sdist: $(basename "$tmp"/sdist/fanout-*.tar.gz)"
fi
echo "PASS: pip install into a fresh venv"
