#!/usr/bin/env bash
# A build without -Dtest_hooks=true (a shipped build) holds no failure-injection hook: none of
# its programs contains a FANOUT_TEST_ name (util/test_hooks.hpp). A test build skips.
# Usage: no_test_hooks_test.sh BUILD_DIR
set -euo pipefail
build=$1
hooks=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next((o["value"] for o in json.load(sys.stdin) if o["name"]=="test_hooks"), False))')
if [ "$hooks" = True ]; then
  echo "SKIP: $build is a test build (-Dtest_hooks=true); this checks a build without the hooks" >&2
  exit 77
fi
command -v strings >/dev/null || { echo "SKIP: strings (binutils) is missing" >&2; exit 77; }
bad=0
for p in pool/fanout-pool pool/fanout-worker interchange/fanout-interchange client/fanout; do
  found=$(strings "$build/$p" | grep -o 'FANOUT_TEST_[A-Z_]*' | sort -u | tr '\n' ' ' || true)
  if [ -n "$found" ]; then
    echo "FAIL: $build/$p holds test hooks: $found" >&2
    bad=1
  fi
done
[ "$bad" = 0 ] || exit 1
echo "PASS: no FANOUT_TEST_ hook in the programs of $build"
