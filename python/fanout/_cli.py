"""Running the `fanout` program: where it is, and its failures as Python exceptions."""

import os
import shutil
import subprocess
import sysconfig


class FanoutError(Exception):
    """A `fanout` command failed. `message` is what it printed as its error, `exit_status` its
    exit status (the README's table: 1 job failed or cancelled, 2 bad command line or input,
    3 infrastructure, 4 partial), `command` the argument list that was run."""

    def __init__(self, message, exit_status=None, command=None):
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status
        self.command = list(command or [])

    def __str__(self):
        if self.exit_status is None:
            return self.message
        return "%s (exit status %d)" % (self.message, self.exit_status)


def installed_fanout(package_dir=None):
    """The `fanout` program installed with this package, or None: PREFIX/bin/fanout when the
    package is PREFIX/lib/python3/dist-packages/fanout (Debian's layout, meson install) or
    PREFIX/lib/pythonX.Y/site-packages/fanout (`pip install`, a venv, --user); else the running
    interpreter's scripts folder when the package is in its site folder."""
    pkg = os.path.realpath(package_dir or os.path.dirname(os.path.abspath(__file__)))
    site = os.path.dirname(pkg)
    lib = os.path.dirname(os.path.dirname(site))
    cands = []
    if (os.path.basename(site) in ("site-packages", "dist-packages")
            and os.path.basename(lib) == "lib"):
        cands.append(os.path.join(os.path.dirname(lib), "bin", "fanout"))
    if site in (os.path.realpath(sysconfig.get_path("purelib")),
                os.path.realpath(sysconfig.get_path("platlib"))):
        cands.append(os.path.join(sysconfig.get_path("scripts"), "fanout"))
    for cand in cands:
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    return None


def find_fanout(explicit=None):
    """The `fanout` program: `explicit`, else $FANOUT_BIN (set by `fanout python`), else the one
    installed with this package (installed_fanout()), else `fanout` on PATH. Raises FanoutError
    when there is none."""
    for cand in (explicit, os.environ.get("FANOUT_BIN")):
        if cand:
            return cand
    found = installed_fanout() or shutil.which("fanout")
    if not found:
        raise FanoutError("the fanout program was not found: not installed beside this package, "
                          "not on PATH, and $FANOUT_BIN is not set (install the package with "
                          "`pip install`, run the program with `fanout python`, or pass "
                          "fanout=PATH)")
    return found


def error_message(stderr, fallback):
    """The `error: ...` lines of a command's stderr (without the prefix), else its last line,
    else `fallback`."""
    lines = [l for l in (stderr or "").splitlines() if l.strip()]
    errors = [l[len("error: "):] for l in lines if l.startswith("error: ")]
    if errors:
        return "\n".join(errors)
    return lines[-1] if lines else fallback


def run_cli(fanout, args, ok=(0,), timeout=None):
    """Runs `fanout ARGS` to its end and returns its CompletedProcess (text). An exit status not
    in `ok` raises FanoutError with the command's error message and status."""
    cmd = [fanout] + [str(a) for a in args]
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=timeout)
    if p.returncode not in ok:
        raise FanoutError(error_message(p.stderr, "fanout %s: exit status %d" % (
            args[0] if args else "", p.returncode)), p.returncode, cmd)
    return p
