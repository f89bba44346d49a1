#!/usr/bin/env python3
"""What the Python package trusts (docs/security.md, "Python callers"), played as an attack with
real fanout, interchange, pools and workers, under `fanout python` so the package is the tree's.

`forged`: a row without a valid MAC written into an Executor's results file is refused, its call
fails naming it, and the pickle in it is never loaded (loading it would create a marker file); a
work_dir anyone can write (not sticky) is refused.

`other_user` (root only: a second local user made with useradd, removed at the end; SKIP
otherwise), that user being the attacker:
- linked spelling: with a shared write root, the attacker links to the victim's Executor folder
  and submits a job whose output is the victim's results file spelt through the link: refused
  by the interchange, and nothing of theirs is unpickled by the victim;
- job-file race: the attacker pre-creates the `.fanout-job-PID-N.yml` names in the (shared)
  current folder of a victim who runs a dict job: none of them is written or read;
- planted module: a `base64.py` planted in the Executor caller's current folder is not imported
  by its workers.
Environment: tests/meson.build."""

import base64
import contextlib
import glob
import io
import os
import pickle
import pwd
import shutil
import subprocess
import sys
import time

from support import fail, scratch, skip
import support

import fanout

USER = "fanout_atk_py"


def wait_for(path, limit=120):
    """A call that holds its worker until `path` exists (at most `limit` s)."""
    deadline = time.monotonic() + limit
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.05)
    return os.path.exists(path)


class _Marker:
    """Unpickling this creates the file `path` (io.open(path, "w")): what a forged row would run
    in the Executor's caller."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (io.open, (self.path, "w"))


def forged_rows(marker):
    """A forged row for call 0 in today's shape ("ID BASE64") and one with a made-up MAC."""
    payload = base64.b64encode(pickle.dumps(_Marker(marker))).decode("ascii")
    return "0 %s\n0 %s %s\n" % (payload, "0" * 64, payload)


def forged(tmp):
    db = os.path.join(tmp, "store", "fanout.db")
    release = os.path.join(tmp, "release")
    marker = os.path.join(tmp, "marker-forged")
    with fanout.Executor(max_workers=1, db=db, name="forged") as ex:
        held = ex.submit(wait_for, release)
        # Sent (so the Executor waits for its row) once its attempt is in the store.
        support.wait_until(lambda: support.sql_int(
            db, "SELECT count(*) FROM attempts WHERE job_id = %d" % ex.job_id) or support.sql_int(
            db, "SELECT count(*) FROM minibatches WHERE job_id = %d AND state = 'running'" %
            ex.job_id), 120, "the held call to start")
        with open(ex._results, "a") as f:
            f.write(forged_rows(marker))
        support.wait_until(lambda: held.done() or os.path.exists(marker), 120,
                           "the forged row to be refused")
        open(release, "w").close()
        if os.path.exists(marker):
            fail("the Executor unpickled a forged row (the marker %s exists)" % marker)
        err = held.exception()
    if not isinstance(err, fanout.CallFailed) or "no valid MAC" not in str(err) or \
            err.status != "ROW_REFUSED" or "mini-batch 0" not in str(err):
        fail("the call with a forged row ended with %r, expected CallFailed naming mini-batch 0 "
             "and its row without a valid MAC" % (err,))
    if ex.rows_refused != 2:
        fail("%d rows refused, expected the 2 forged ones" % ex.rows_refused)
    # A work_dir others can write, without the sticky bit: another user could swap the
    # Executor's folder in it, so it is refused before anything starts.
    open_dir = os.path.join(tmp, "open")
    os.makedirs(open_dir)
    os.chmod(open_dir, 0o777)
    try:
        fanout.Executor(max_workers=1, db=db, work_dir=open_dir)
        fail("an Executor started in a work_dir anyone can write (mode 0777, not sticky)")
    except fanout.FanoutError as e:
        if "writable by other users" not in str(e) or os.listdir(open_dir):
            fail("the refused work_dir: %s; left %s" % (e, os.listdir(open_dir)))
    # The Executor's own rows still pass.
    with fanout.Executor(max_workers=1, db=db, name="genuine") as ex:
        if list(ex.map(pow, [2, 3], [5, 2])) != [32, 9] or ex.rows_refused:
            fail("genuine rows: refused %d" % ex.rows_refused)


@contextlib.contextmanager
def other_user():
    """The local user USER, made for the test and removed at the end (also on failure)."""
    if os.geteuid() != 0:
        skip("needs root to create another local user (useradd) and act as it")
    subprocess.run(["userdel", "-r", USER], capture_output=True)
    r = subprocess.run(["useradd", "--create-home", "--shell", "/usr/sbin/nologin", USER],
                       capture_output=True, text=True)
    if r.returncode != 0:
        skip("useradd %s failed: %s" % (USER, r.stderr.strip()))
    try:
        yield pwd.getpwnam(USER)
    finally:
        subprocess.run(["userdel", "-r", USER], capture_output=True)


def as_user(u, argv, cwd=None, timeout=240):
    """Runs `argv` as the user `u` (no supplementary groups) in `cwd`, output captured."""
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": u.pw_dir, "USER": USER}
    return subprocess.run(argv, user=u.pw_uid, group=u.pw_gid, extra_groups=[], env=env,
                          cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=timeout)


def give(u, path, mode):
    """`path` and what is under it handed to `u`, `path` itself with `mode`."""
    for root, dirs, files in os.walk(path):
        for n in [root] + [os.path.join(root, x) for x in dirs + files]:
            os.lchown(n, u.pw_uid, u.pw_gid)
    os.chmod(path, mode)


EVIL = '''import base64, io, pickle


class Evil:
    def __reduce__(self):
        return (io.open, (%r, "w"))


def run(mini_batch):
    return ["0 " + base64.b64encode(pickle.dumps(Evil())).decode("ascii")]
'''


def attacker_keys(u, keys, tmp):
    """A client key of the attacker's own, authorised, in a key folder they own."""
    support.fanout("keygen", "--dir", keys, "--add-client", USER)
    mine = os.path.join(tmp, "atk-keys")
    os.makedirs(mine)
    shutil.copy(os.path.join(keys, "interchange.key"), mine)
    shutil.copy(os.path.join(keys, USER + ".key"), os.path.join(mine, "client.key"))
    shutil.copy(os.path.join(keys, USER + ".key_secret"), os.path.join(mine, "client.key_secret"))
    os.chmod(os.path.join(mine, "client.key_secret"), 0o600)
    give(u, mine, 0o700)
    return mine


def linked_spelling(u, tmp):
    keys = os.path.join(tmp, "keys")
    support.fanout("keygen", "--dir", keys)
    atk_keys = attacker_keys(u, keys, tmp)
    shared = os.path.join(tmp, "shared")  # the shared write root docs/python.md prescribes
    os.makedirs(shared)
    os.chmod(shared, 0o1777)
    atk = os.path.join(tmp, "atk")
    marker = os.path.join(tmp, "marker-linked")
    support.make_files(os.path.join(atk, "data"), ["one"])
    support.write(os.path.join(atk, "src", "evil.py"), EVIL % marker)
    give(u, atk, 0o755)
    db = os.path.join(tmp, "ix", "ix.db")
    release = os.path.join(tmp, "release-linked")
    os.chdir(tmp)  # the interchange's working folder, which the link below leads through
    with support.Cluster(os.path.join(tmp, "ix"), db,
                         ix_args=["--keys", keys, "--write-root", shared]) as cl:
        cl.start_pool(workers=2, extra=["--keys", keys])
        ex = fanout.Executor(interchange=cl.client_ep, keys=keys, work_dir=shared, name="victim")
        try:
            held = ex.submit(wait_for, release)
            support.wait_until(lambda: os.path.exists(ex._results), 120, "the results file")
            victim_dir = glob.glob(os.path.join(shared, "fanout-executor-*"))[0]
            # The attacker's own `fanout run` checks, as them, that it can create the output's
            # folder and file (a check of their own program, which they could skip). A link
            # through /proc/self/cwd leads their client (in their folder) to a folder of theirs
            # and the interchange (started in `tmp`) to the victim's.
            link = os.path.join(shared, "atk-link")
            decoy = os.path.join(atk, "shared", os.path.basename(victim_dir))
            r = as_user(u, ["mkdir", "-p", decoy])
            if r.returncode == 0:
                r = as_user(u, ["ln", "-s", "/proc/self/cwd/shared/" + os.path.basename(victim_dir),
                                link])
            if r.returncode != 0:
                fail("the attacker could not make the link: %s" % r.stderr)
            job = os.path.join(atk, "job.yml")
            support.write(job, support.job_yaml(
                "atk", data=os.path.join(atk, "data"),
                output=os.path.join(link, "results.txt"),
                task="  type: run_function\n  code: %s\n  entry_script: evil.py\n" %
                os.path.join(atk, "src")))
            os.lchown(job, u.pw_uid, u.pw_gid)
            attack = as_user(u, [support.FANOUT, "run", job, "--interchange", cl.client_ep,
                                 "--keys", atk_keys, "--quiet"], cwd=atk)
            time.sleep(0.5)  # what the victim's reader would take of a row, if one came
        finally:
            open(release, "w").close()
            ex.shutdown()
    if os.path.exists(marker):
        fail("the victim's Executor unpickled the attacker's row (the marker %s exists)" % marker)
    if "append_row output of running job" not in attack.stderr:
        fail("the attacker's job writing the victim's results through a link: exit %d, "
             "expected a refusal naming the running job\n%s" % (attack.returncode, attack.stderr))
    if held.exception() is not None or held.result() is not True:
        fail("the victim's call ended with %r" % (held.exception(),))


def job_file_race(u, tmp):
    """A victim running a dict job from a folder the attacker shares with them."""
    folder = os.path.join(tmp, "race")
    marker = os.path.join(tmp, "marker-race")
    os.makedirs(folder)
    support.make_files(os.path.join(folder, "data"), ["a", "b"])
    support.write(os.path.join(folder, "src", "score.py"), support.PASS_THROUGH)
    support.write(os.path.join(folder, "evil", "evil.py"),
                  "open(%r, 'w').close()\n" % marker + support.PASS_THROUGH)
    planted = {}
    for n in range(1, 9):  # the names this process's next Client runs would take
        path = os.path.join(folder, ".fanout-job-%d-%d.yml" % (os.getpid(), n))
        planted[path] = support.job_yaml(
            "atk", data="./data", output="./atk-out.txt",
            task="  type: run_function\n  code: ./evil\n  entry_script: evil.py\n")
        support.write(path, planted[path], mode=0o666)
    give(u, folder, 0o777)
    os.chdir(folder)
    job = {"type": "parallel", "name": "victim-dict",
           "inputs": {"files": {"type": "uri_folder", "path": "./data"}},
           "outputs": {"out": {"type": "uri_file", "path": "./victim-out.txt"}},
           "input_data": "${{inputs.files}}", "mini_batch_size": "1",
           "task": {"type": "run_function", "code": "./src", "entry_script": "score.py",
                    "append_row_to": "${{outputs.out}}"}}
    try:
        j = fanout.Client(db=os.path.join(tmp, "race-store", "fanout.db")).run(job,
                                                                               progress=False)
    except fanout.FanoutError as e:
        fail("the victim's dict job failed to run: %s" % e)
    finally:
        os.chdir(tmp)
    if os.path.exists(marker):
        fail("the victim ran the attacker's entry script from a planted job file")
    for path, text in planted.items():
        if not os.path.lexists(path):
            fail("the victim used the planted %s (and removed it)" % path)
        if open(path).read() != text or os.lstat(path).st_uid != u.pw_uid:
            fail("the victim wrote or replaced the planted %s" % path)
    if j.state != "succeeded":
        fail("the victim's dict job ended %s" % j.state)
    rows = sorted(support.read_rows(os.path.join(folder, "victim-out.txt")))
    want = sorted(os.path.join(folder, "data", x) for x in ("a", "b"))
    if rows != want:
        fail("the dict job's relative paths: rows %s, expected %s" % (rows, want))


def planted_module(u, tmp):
    folder = os.path.join(tmp, "planted")
    marker = os.path.join(tmp, "marker-planted")
    os.makedirs(folder)
    for name in ("base64", "hmac"):
        support.write(os.path.join(folder, name + ".py"), "open(%r, 'w').close()\n" % marker)
    give(u, folder, 0o777)
    os.chdir(folder)
    try:
        with fanout.Executor(max_workers=1, db=os.path.join(tmp, "planted-store", "f.db")) as ex:
            f = ex.submit(pow, 2, 5)
            got = f.exception(timeout=120) or f.result()
    finally:
        os.chdir(tmp)
    if os.path.exists(marker):
        fail("an Executor worker imported a module planted in the caller's current folder")
    if got != 32:
        fail("pow(2, 5) in the Executor gave %r" % (got,))


def main():
    support.require_fanout()
    what = sys.argv[1] if len(sys.argv) > 1 else ""
    with scratch("pytrust") as tmp:
        os.chmod(tmp, 0o755)  # the other user reaches its folders in here
        os.chdir(tmp)
        if what == "forged":
            forged(tmp)
        elif what == "other_user":
            parts = sys.argv[2:] or ["job_file_race", "planted_module", "linked_spelling"]
            with other_user() as u:
                for part in parts:  # one by one by hand: other_user planted_module
                    globals()[part](u, tmp)
                    print("%s: ok" % part, flush=True)
        else:
            fail("usage: python_trust_test.py forged|other_user")
    print("ok")


if __name__ == "__main__":
    main()
