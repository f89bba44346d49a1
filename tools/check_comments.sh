#!/usr/bin/env bash
# Comments and docs give the reason itself, never a pointer to what a reader of the repository
# cannot open: a comment citing a tracker's issue number (the word "issue" or a hash sign followed
# by a number, as in a TODO) or the style and design notes kept outside the repository fails this
# check. Prints each hit as
# file:line: text and exits 1; prints "comments: ok" and exits 0 when there is none.
#
# Checked: the comments of C++ files (// ...), of shell, Python and Meson files (# ...), the
# docstrings of Python modules, classes and functions, and the text of README.md and docs/*.md.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# What a comment may not cite: an issue number, a hash sign and a number (but not an HTML
# entity, whose hash follows an ampersand), or a style or design file outside the repository.
cite='STYLE\.md|DESIGN\.md|\b[Ii]ssues? #?[0-9]+|(?<![&\w])#[0-9]+\b'
exempt='^subprojects/|^build[^/]*/'

hits=0
check() {  # comment-start-regex files...
  local start=$1
  shift
  (($# > 0)) || return 0
  while IFS= read -r hit; do
    printf '%s\n' "$hit"
    hits=$((hits + 1))
  done < <(grep -nHP "${start}.*(${cite})" "$@" || true)
}

files() {  # git pathspecs...
  git ls-files -- "$@" | grep -vE "$exempt" || true
}

mapfile -t cxx < <(files '*.cpp' '*.hpp' '*.h' '*.cc')
mapfile -t scripts < <(files '*.sh' '*.py' 'meson.build' '*/meson.build' 'meson_options.txt' '.ci/*')
mapfile -t docs < <(files 'README.md' 'docs/*.md')
check '//' "${cxx[@]}"
check '#' "${scripts[@]}"
check '' "${docs[@]}"

# Python docstrings, read with the standard library's ast (a docstring is no '#' comment).
mapfile -t pys < <(files '*.py')
if ((${#pys[@]} > 0)); then
  while IFS= read -r hit; do
    printf '%s\n' "$hit"
    hits=$((hits + 1))
  done < <(python3 - "$cite" "${pys[@]}" <<'PY'
import ast
import re
import sys

cite = re.compile(sys.argv[1])
kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
for path in sys.argv[2:]:
    try:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
    except (SyntaxError, UnicodeDecodeError, OSError) as e:
        print(f"{path}: cannot read its docstrings: {e}")
        continue
    for node in ast.walk(tree):
        body = getattr(node, "body", None) if isinstance(node, kinds) else None
        if not body or not isinstance(body[0], ast.Expr):
            continue
        doc = body[0].value
        if not isinstance(doc, ast.Constant) or not isinstance(doc.value, str):
            continue
        for i, line in enumerate(doc.value.splitlines()):
            if cite.search(line):
                print(f"{path}:{doc.lineno + i}: {line.strip()}")
PY
  )
fi

if ((hits > 0)); then
  echo "comments: $hits comment(s) cite an issue number or a file outside the repository;" \
    "write the reason itself instead" >&2
  exit 1
fi
echo "comments: ok"
