#!/usr/bin/env bash
# The README's second command: installs what is missing, builds, and runs the whole test suite.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
# Each phase's wall time, printed as it ends (.ci/run adds the release build, the package and the
# slowest tests): "phase <name>: <seconds> s".
phase_start=$SECONDS
phase() {
  echo "phase $1: $((SECONDS - phase_start)) s"
  phase_start=$SECONDS
}
bash tools/install-deps.sh
# What only the tests need (tools/deps-debian-test.txt); a test whose package is missing skips.
mapfile -t test_pkgs < <(grep -vE '^\s*(#|$)' tools/deps-debian-test.txt)
test_missing=()
for p in "${test_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || test_missing+=("$p")
done
if [ ${#test_missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  echo "test.sh: installing ${test_missing[*]}"
  { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      $sudo apt-get install -y -qq --no-install-recommends "${test_missing[@]}"; } ||
    echo "test.sh: could not install ${test_missing[*]}; the tests needing them will skip"
fi
phase dependencies
bash tools/build.sh
phase build
bash tools/check_layering.sh
bash tools/check_format.sh
bash tools/check_comments.sh
phase checks
rc=0
meson test -C build --print-errorlogs --num-processes 2 "$@" || rc=$?
phase tests
exit "$rc"
