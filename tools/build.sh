#!/usr/bin/env bash
# Configures (once) and builds fanout into ./build with Debian's packages only.
#   tools/build.sh              everything: the programs, the tests and the tools
#   tools/build.sh --programs   only what running a job needs, in the test build (the README's
#                               first command, tools/quickstart.sh, builds build-release/ instead)
# Warnings are errors here and in CI (-Dwerror=true), not a project default, so a packager's own
# flags or compiler never turn a new warning into a failed build. This is the test build: it
# compiles in the failure-injection hooks the integration tests use (-Dtest_hooks=true), which a
# shipped build (the CI release build, the Debian package's) leaves out.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
targets=()
if [ "${1:-}" = "--programs" ]; then
  shift
  targets=(client/fanout interchange/fanout-interchange pool/fanout-pool pool/fanout-worker)
fi
if [ ! -f build/build.ninja ]; then
  meson setup build --wrap-mode=nofallback -Dwerror=true -Dtest_hooks=true "$@"
fi
ninja -C build "${targets[@]}"
