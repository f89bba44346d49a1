#!/usr/bin/env bash
# Configures (once) and builds fanout into ./build with Debian's packages only.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
if [ ! -f build/build.ninja ]; then
  meson setup build --wrap-mode=nofallback "$@"
fi
ninja -C build
