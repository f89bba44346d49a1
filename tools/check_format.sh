#!/usr/bin/env bash
# Every C++ file of the repository is as clang-format (Debian 12's, with the
# repository's .clang-format) would write it. Prints the first differences and exits 1 when not;
# prints "format: ok" otherwise. Fix with: git ls-files '*.cpp' '*.hpp' '*.h' | xargs clang-format -i
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
list_files() {  # tracked C++ files; every one under the source folders outside a git checkout
  git ls-files '*.cpp' '*.hpp' '*.h' 2> /dev/null ||
    find src interchange pool client tests tools -name '*.cpp' -o -name '*.hpp' -o -name '*.h'
}
if ! list_files | xargs clang-format --dry-run -Werror 2> /tmp/fanout-format.$$; then
  head -40 /tmp/fanout-format.$$
  rm -f /tmp/fanout-format.$$
  echo "format: files differ from clang-format; fix with: git ls-files '*.cpp' '*.hpp' '*.h' | xargs clang-format -i"
  exit 1
fi
rm -f /tmp/fanout-format.$$
echo "format: ok"
