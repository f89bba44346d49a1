#!/usr/bin/env python3
"""`fanout run -c CMD --input DIR|FILE|-`: ad-hoc runs without a job file, as GNU
parallel users work. Real fanout, interchange, pools and fanout-worker processes; every row exactly
once, GNU parallel's replacement strings, failures recorded in the store, errors with exit 2.
Environment: FANOUT_BIN (set by tests/meson.build)."""

import os
import pty
import sqlite3
import stat
import subprocess

from support import fail, fanout, scratch
import support


def main():
    support.require_fanout()
    with scratch("adhoc") as tmp:
        db = os.path.join(tmp, "store", "fanout.db")
        data = os.path.join(tmp, "data")
        os.makedirs(os.path.join(data, "sub"))
        for i in range(30):
            folder = data if i % 3 else os.path.join(data, "sub")
            with open(os.path.join(folder, f"f{i:02d}.txt"), "w") as f:
                f.write("x" * i)

        # 1. A folder: its files are the items; rows are printed to stdout when the job ends.
        r = fanout("run", "-c", "printf '%s %s\\n' {/} $(wc -c < {})", "--input", data,
                   "--db", db, "-j", "2", "--quiet", cwd=tmp, check=False)
        if r.returncode != 0:
            fail(f"folder run exited {r.returncode}: {r.stderr}")
        rows = sorted(r.stdout.split("\n")[:-1])
        want = sorted(f"f{i:02d}.txt {i}" for i in range(30))
        if rows != want:
            fail(f"folder run printed {rows[:5]}... ({len(rows)} rows), expected {want[:5]}...")

        # 2. Lines on stdin, GNU parallel's replacement strings, mini-batches of 3, an output file.
        items = ["a", "b.txt", "dir/c.tar.gz", "dir.x/d", "./e.md", "f g"]
        out = os.path.join(tmp, "out", "rows.txt")
        os.makedirs(os.path.dirname(out))
        r = fanout("run", "-c", "echo {#}:{}:{.}:{/}:{//}:{/.}", "--input", "-", "--output", out,
                   "--mini-batch-size", "3", "--db", db, "--quiet", cwd=tmp, check=False,
                   stdin="\n".join(items) + "\n\n")
        if r.returncode != 0:
            fail(f"stdin run exited {r.returncode}: {r.stderr}")
        if r.stdout.strip():
            fail(f"with --output nothing goes to stdout, got {r.stdout!r}")
        got = sorted(open(out).read().splitlines())
        want = sorted([
            "1:a:a:a:.:a",
            "2:b.txt:b:b.txt:.:b",
            "3:dir/c.tar.gz:dir/c.tar:c.tar.gz:dir:c.tar",
            "4:dir.x/d:dir.x/d:d:dir.x:d",
            "5:./e.md:./e:e.md:.:e",
            "6:f g:f g:f g:.:f g",
        ])
        if got != want:
            fail(f"replacement strings gave {got}, expected {want}")

        # 3. A list file, a command without {} (the item is appended), and one failing item: the
        # others' rows are there exactly once and the store records the failure.
        listing = os.path.join(tmp, "list.txt")
        with open(listing, "w") as f:
            f.write("".join(f"item{i}\n" for i in range(12)) + "bad\n")
        out3 = os.path.join(tmp, "out", "list.txt")
        r = fanout("run", "-c", "sh -c 'test \"$1\" != bad && echo \"ok $1\"' sh",
                   "--input", listing, "--output", out3, "--name", "listjob", "--db", db, "--quiet",
                   cwd=tmp, check=False)
        got = sorted(open(out3).read().splitlines())
        if got != sorted(f"ok item{i}" for i in range(12)):
            fail(f"list run wrote {got} (exit {r.returncode}: {r.stderr})")
        con = sqlite3.connect(db)
        job = con.execute("select id from jobs where name = 'listjob'").fetchone()
        if job is None:
            fail("the ad-hoc job is not in the store's history")
        failed = con.execute("select count(*) from attempts where job_id = ? and status != "
                             "'RUN_DONE'", job).fetchone()[0]
        if failed != 1:
            fail(f"expected the one failing item recorded as one failed attempt, got {failed}")
        # The generated job file is kept beside the store, for `fanout resume`.
        kept = [n for n in os.listdir(os.path.join(tmp, "store", "adhoc")) if n.endswith(".yaml")]
        if len(kept) != 3:
            fail(f"expected 3 kept job files, got {kept}")
        # Closed to other local users: the job files hold --env values, the item list and rows
        # are the user's data (docs/security.md, "Local files and other local users").
        adhoc = os.path.join(tmp, "store", "adhoc")
        if stat.S_IMODE(os.stat(adhoc).st_mode) != 0o700:
            fail(f"{adhoc}: mode {oct(os.stat(adhoc).st_mode)}, expected 0700")
        for name in os.listdir(adhoc):
            mode = stat.S_IMODE(os.stat(os.path.join(adhoc, name)).st_mode)
            if mode != 0o600:
                fail(f"{adhoc}/{name}: mode {oct(mode)}, expected 0600")

        # 4. Mistakes are CLI errors (exit 2) naming the option.
        # No source and a terminal on stdin (a pipe or file on stdin is the input, as in GNU
        # parallel): the error names --input.
        master, slave = pty.openpty()
        r = subprocess.run([support.FANOUT, "run", "-c", "echo {}", "--db", db, "--quiet"],
                           cwd=tmp, stdin=slave, capture_output=True, text=True, timeout=240)
        os.close(slave)
        os.close(master)
        if r.returncode != 2 or "--input" not in r.stderr:
            fail(f"-c without a source, stdin a terminal: exit {r.returncode}: {r.stderr}")
        for args, needle in [
            (["run", "-c", "echo {}", "--input", os.path.join(tmp, "nope")], "--input"),
            (["run", "job.yaml", "-c", "echo"], "not both"),
            (["run", "--input", data], "-c"),
        ]:
            r = fanout(*args, "--db", db, "--quiet", cwd=tmp, check=False)
            if r.returncode != 2 or needle not in r.stderr:
                fail(f"{args}: expected exit 2 naming {needle}, got {r.returncode}: {r.stderr}")
    print("PASS: folder, stdin and list inputs; replacement strings; failures; errors")


if __name__ == "__main__":
    main()
