#!/usr/bin/env python3
"""A file name holding a newline is one item (docs/job-spec.md, command runtime). The attack:
`touch "in/nl<newline>VICTIM"; fanout run -c 'rm -f {}' --input in` removed ./VICTIM, since the
command runtime's item list was one name per line. Real fanout, interchange, pools and
fanout-worker processes:

- `fanout run -c 'rm -f {}'` removes the file with the newline in its name and leaves the
  VICTIM file beside in/ (the command's working folder) alone;
- a `command` job that reads the one-per-line list ({mini_batch}) line by line sees one line
  per item (the newline is written `\\n`) and removes no VICTIM, and `xargs -0` over
  {mini_batch_nul} / $FANOUT_MINI_BATCH_NUL gets the exact name.
Environment: FANOUT_BIN (set by tests/meson.build)."""

import os
import sys

from support import fail, fanout, scratch
import support

NL_NAME = "nl\nVICTIM"


def make_input(root, victims):
    """root/in/{nl<newline>VICTIM, plain.txt} and a file VICTIM in each of `victims` (the
    folders a split name's tail would be relative to); returns the in/ folder."""
    src = os.path.join(root, "in")
    os.makedirs(src)
    for folder in victims:
        os.makedirs(folder, exist_ok=True)
    for path in [os.path.join(src, NL_NAME), os.path.join(src, "plain.txt")] + \
            [os.path.join(v, "VICTIM") for v in victims]:
        with open(path, "w") as f:
            f.write("x\n")
    return src


def check_victims(victims, what):
    for folder in victims:
        victim = os.path.join(folder, "VICTIM")
        if not os.path.exists(victim):
            fail("%s removed %s: a newline in a file name made a second item" % (what, victim))


def adhoc_rm(root):
    victims = [root]
    src = make_input(root, victims)
    db = os.path.join(root, "store", "fanout.db")
    r = fanout("run", "-c", "rm -f {}", "--input", src, "--db", db, "--quiet", cwd=root, check=False)
    check_victims(victims, "fanout run -c 'rm -f {}'")
    if r.returncode != 0:
        fail("fanout run -c: exit %d\n%s" % (r.returncode, r.stderr))
    left = sorted(os.listdir(src))
    if left:
        fail("fanout run -c 'rm -f {}' left %r in in/ (the newline name was not one item?)" % left)
    print("ok: fanout run -c 'rm -f {}' removed %r as one item; VICTIM files intact" % NL_NAME)


def command_job(root):
    code = os.path.join(root, "code")
    victims = [root, code]
    src = make_input(root, victims)
    db = os.path.join(root, "store", "fanout.db")
    # A line-by-line reader of the documented one-per-line list removes each line's file: it must
    # see one line per item (wc -l = $FANOUT_MINI_BATCH_SIZE) and so remove no VICTIM; xargs -0
    # over the NUL list then removes the exact names. One row per line: its base name.
    line = ("while IFS= read -r f; do rm -f \"$f\"; printf 'line:%s\\n' \"${f##*/}\"; "
            "done < {mini_batch}; xargs -0 rm -f < \"$FANOUT_MINI_BATCH_NUL\"; "
            "test \"$(wc -l < {mini_batch})\" -eq \"$FANOUT_MINI_BATCH_SIZE\" || exit 9; "
            "test \"$FANOUT_MINI_BATCH_NUL\" = {mini_batch_nul} || exit 8")
    # No retry: a failed first try is final.
    support.write(os.path.join(root, "job.yaml"), support.job_yaml(
        "names", data="./in", mini_batch_size="10", retries=0,
        task="  type: command\n  code: ./code\n  command: |\n    %s\n" % line))
    r = fanout("run", os.path.join(root, "job.yaml"), "--db", db, "--quiet", cwd=root, check=False)
    check_victims(victims, "a command job reading {mini_batch} line by line")
    if r.returncode != 0:
        fail("command job: exit %d\n%s" % (r.returncode, r.stderr))
    rows = sorted(l for l in open(os.path.join(root, "out.txt")).read().splitlines())
    want = sorted(["line:nl\\nVICTIM", "line:plain.txt"])
    if rows != want:
        fail("command job rows %r, expected %r (one line per item, the newline as \\n)" %
             (rows, want))
    left = sorted(os.listdir(src))
    if left:
        fail("xargs -0 over $FANOUT_MINI_BATCH_NUL left %r in in/ (names not exact?)" % left)
    print("ok: command job: one line per item in {mini_batch}, exact names in {mini_batch_nul}")


def main():
    support.require_fanout()
    for case in (adhoc_rm, command_job):
        with scratch("item-names") as tmp:
            case(tmp)
    print("PASS: file names with a newline are one item")
    return 0


if __name__ == "__main__":
    sys.exit(main())
