#!/usr/bin/env python3
"""`fanout run` of a tabular job checks, before anything starts, that the interpreter has pandas
(client/commands/client.cpp, check_tabular): found without importing it, so that the check no
longer costs the run a pandas import. An interpreter without pandas is still refused with exit 2
naming it; one with pandas runs the job, every row once.
Environment: FANOUT_BIN (set by tests/meson.build)."""

import os
import subprocess

from support import fail, fanout, scratch, skip, write
import support

MLTABLE = """type: mltable
paths:
  - file: ./t.csv
transformations:
  - read_delimited:
      delimiter: ","
      header: all_files_same_headers
"""

SCORE = """def run(mini_batch):
    return [str(v) for v in mini_batch["x"]]
"""


def job(name):
    return ("type: parallel\nname: %s\ninputs:\n  t:\n    type: mltable\n    path: ./data\n"
            "outputs:\n  out:\n    type: uri_file\n    path: ./out.txt\n"
            "input_data: ${{inputs.t}}\nmini_batch_size: \"1kb\"\n"
            "max_concurrency_per_instance: 2\ntask:\n" + support.RUN_FUNCTION
            + "  append_row_to: ${{outputs.out}}\n") % name


def main():
    support.require_fanout()
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", "import pandas"], capture_output=True).returncode != 0:
        skip("%s cannot import pandas (apt-get install python3-pandas)" % py)
    with scratch("tabular-probe") as tmp:
        write(os.path.join(tmp, "data", "MLTable"), MLTABLE)
        write(os.path.join(tmp, "data", "t.csv"), "x,y\n" + "".join("%d,a\n" % i for i in range(300)))
        write(os.path.join(tmp, "src", "score.py"), SCORE)
        write(os.path.join(tmp, "job.yaml"), job("probe"))
        # Without site-packages the interpreter has no pandas (but still the standard library).
        nopandas = write(os.path.join(tmp, "bin", "python-nopandas"),
                         "#!/bin/sh\nexec %s -S \"$@\"\n" % py, mode=0o755)
        db = os.path.join(tmp, "store", "fanout.db")

        r = fanout("run", "job.yaml", "--python", nopandas, "--db", db, "-q", cwd=tmp, check=False)
        if r.returncode != 2:
            fail("no pandas: exit %d, expected 2\n%s\n%s" % (r.returncode, r.stdout, r.stderr))
        if "tabular input needs pandas" not in r.stderr or nopandas not in r.stderr:
            fail("no pandas: the error does not name the interpreter and pandas:\n%s" % r.stderr)
        if os.path.exists(db):
            fail("no pandas: a store was made (%s); the check must come before anything starts" % db)

        fanout("run", "job.yaml", "--python", py, "--db", db, "-q", cwd=tmp)
        rows = support.read_rows(os.path.join(tmp, "out.txt"))
        support.check_rows_once(rows, [str(i) for i in range(300)], "tabular rows")
    print("ok: tabular_probe")


if __name__ == "__main__":
    main()
