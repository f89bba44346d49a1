#!/usr/bin/env bash
# The README's second command: installs what is missing, builds, and runs the whole test suite.
set -euo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
bash tools/install-deps.sh
bash tools/build.sh
bash tools/check_layering.sh
bash tools/check_format.sh
meson test -C build --print-errorlogs --num-processes 2 "$@"
