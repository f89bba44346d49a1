#!/usr/bin/env bash
# Writes the man page of one fanout program from its own --help, so the page never drifts from the
# CLI: help2man for the page, and for `fanout` a COMMANDS section made of each subcommand's --help.
# Usage: gen_man.sh PROGRAM VERSION OUT.1
set -euo pipefail
prog=$1 version=$2 out=$3
name=$(basename "$prog")
include=$(mktemp)
trap 'rm -f "$include"' EXIT

# roff-safe verbatim text: backslashes doubled, a leading . or ' escaped.
verbatim() { sed -e 's/\\/\\e/g' -e "s/^\([.']\)/\\\\\&\1/"; }

{
  echo "[SEE ALSO]"
  echo "fanout(1), fanout-interchange(1), fanout-pool(1); the guides in /usr/share/doc/fanout."
  if [ "$name" = fanout ]; then
    echo "[COMMANDS]"
    # The subcommands are the lines under "Subcommands:" in `fanout --help` (a wrapped description
    # goes on indented lines of its own).
    "$prog" --help | awk '/^Subcommands:/{on=1; next} on && /^  [^ ]/ {print $1}' | while read -r sub; do
      echo ".SS \"fanout $sub\""
      echo ".nf"
      "$prog" "$sub" --help | tail -n +2 | verbatim
      echo ".fi"
    done
  fi
} > "$include"

help2man --no-info --no-discard-stderr --version-string="$version" \
  --name="$("$prog" --help | head -1 | sed "s/^$name: //")" \
  --include="$include" --output="$out" "$prog"
