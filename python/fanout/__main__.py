"""`python -m fanout ARGS...`: runs the `fanout` program installed with this package (else
$FANOUT_BIN, else `fanout` on PATH) as `fanout ARGS...`, e.g. `python -m fanout run job.yaml`."""

import os
import sys

from fanout._cli import FanoutError, find_fanout


def main(argv=None):
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        prog = find_fanout()
    except FanoutError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(prog, [prog] + args)
    return 2  # not reached: execv replaces this process or raises OSError


if __name__ == "__main__":
    sys.exit(main())
