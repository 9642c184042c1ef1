"""Two actors on one instance: the lock stops the second, names the first, and frees itself
when the holder dies; its directory and file are checked before anything is written there."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from uwsgitune.actuate import lock
from uwsgitune.actuate.lock import ApplyLock, lock_path

HOLD = """
import sys, time
from pathlib import Path
from uwsgitune.actuate.lock import ApplyLock
lock = ApplyLock(Path(sys.argv[1]), "holder", Path(sys.argv[2]))
assert lock.acquire() is None
print("held", flush=True)
time.sleep(60)
"""


def test_second_lock_names_the_holder_and_is_freed_on_death(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    locks = tmp_path / "locks"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(fifo), str(locks)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        mine = ApplyLock(fifo, "second", locks)
        problem = mine.acquire()
        assert problem is not None and f"pid {proc.pid} (holder)" in problem
        assert "\n" not in problem and not mine.held
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert mine.acquire() is None and mine.held  # the kernel dropped the dead holder's lock
    assert f"pid {os.getpid()} (second)" in mine.path.read_text()
    mine.release()


def test_lock_is_keyed_by_the_real_path(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    assert lock_path(link, tmp_path) == lock_path(fifo, tmp_path)
    a, b = ApplyLock(fifo, "a", tmp_path), ApplyLock(link, "b", tmp_path)
    assert a.acquire() is None
    assert b.acquire() is not None
    a.release()
    assert b.acquire() is None
    b.release()


@pytest.mark.parametrize("bad", ["file", "dir"])
def test_unusable_lock_dir_refuses_to_apply(tmp_path: Path, bad: str) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    blocker = tmp_path / "locks"
    blocker.write_text("") if bad == "file" else blocker.mkdir()
    if bad == "dir":
        lock_path(fifo, blocker).mkdir()  # something that cannot be opened as a file
    problem = ApplyLock(fifo, "x", blocker).acquire()
    assert problem is not None and "UWSGITUNE_LOCK_DIR" in problem and "\n" not in problem


def test_held_lock_survives_time(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    a = ApplyLock(fifo, "a", tmp_path)
    assert a.acquire() is None and a.acquire() is None  # re-entrant for its holder
    time.sleep(0.01)
    assert ApplyLock(fifo, "b", tmp_path).acquire() is not None
    a.release()


# Issue 14.3: the lock must exclude every actor, in a directory every actor sees and trusts.

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another uid")


def test_every_actor_resolves_the_same_directory_whatever_its_tmp(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The systemd daemon (uid 33, PrivateTmp, RuntimeDirectory=uwsgitune), a manual `tune`
    as uid 33 or root (the host's /tmp, a login's XDG_RUNTIME_DIR), `sweep`: one directory,
    never under a /tmp that PrivateTmp would make private."""
    run = tmp_path / "run-uwsgitune"
    monkeypatch.setattr(lock, "RUN_DIR", run)  # where lock_dir() reads it
    monkeypatch.delenv("UWSGITUNE_LOCK_DIR", raising=False)
    monkeypatch.setattr(os, "geteuid", lambda: 33)
    monkeypatch.setattr(os, "getuid", lambda: 33)
    assert lock.lock_dir() == Path("/tmp/uwsgitune-33")  # no service: one user's own lock
    run.mkdir()  # what RuntimeDirectory=uwsgitune creates
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "user-33"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "private-tmp"))
    assert lock.lock_dir() == run
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert lock.lock_dir() == run
    monkeypatch.setenv("UWSGITUNE_LOCK_DIR", str(tmp_path / "chosen"))
    assert lock.lock_dir() == tmp_path / "chosen"
    assert lock.resolve_dir({}, 0, run_dir_exists=False) == run  # root creates it


def _fifo(tmp_path: Path) -> Path:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    return fifo


def test_a_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    fifo, locks = _fifo(tmp_path), tmp_path / "locks"
    locks.mkdir()
    locks.chmod(0o775)
    problem = ApplyLock(fifo, "x", locks).acquire()
    assert problem is not None and f"chmod go-w {locks}" in problem, problem
    assert "UWSGITUNE_LOCK_DIR" in problem and not list(locks.iterdir())
    locks.chmod(0o1777)  # sticky, like /tmp: nobody can swap a name they do not own
    a = ApplyLock(fifo, "x", locks)
    assert a.acquire() is None
    a.release()


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    fifo, locks = _fifo(tmp_path), tmp_path / "locks"
    locks.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    lock_path(fifo, locks).symlink_to(victim)
    problem = ApplyLock(fifo, "x", locks).acquire()
    assert problem is not None and "is a symlink: remove it" in problem, problem
    assert victim.read_text() == "precious\n"


def test_a_hard_linked_lock_file_is_refused_and_its_other_name_untouched(tmp_path: Path) -> None:
    fifo, locks = _fifo(tmp_path), tmp_path / "locks"
    locks.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.link(victim, lock_path(fifo, locks))
    problem = ApplyLock(fifo, "x", locks).acquire()
    assert problem is not None and "2 hard links" in problem, problem
    assert victim.read_text() == "precious\n"


def test_a_holders_escape_sequences_are_printed_escaped(tmp_path: Path) -> None:
    fifo, locks = _fifo(tmp_path), tmp_path / "locks"
    locks.mkdir()
    path = lock_path(fifo, locks)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)  # a holder that wrote hostile text
    try:
        os.write(fd, "pid 1 \x1b]0;owned\x07\x1b[2J\u202e (x)\nsecond line".encode())
        fcntl.flock(fd, fcntl.LOCK_EX)
        problem = ApplyLock(fifo, "y", locks).acquire()
    finally:
        os.close(fd)
    assert problem is not None and "already tuned by pid 1 \\x1b]0;owned\\x07" in problem
    assert not any(c in problem for c in "\x1b\x07\n\u202e"), repr(problem)


def test_directory_and_file_checks_name_the_uid() -> None:
    """Pure: who may own the directory and the file (us, root, the instance's user)."""
    d = os.stat_result((stat.S_IFDIR | 0o755, 0, 0, 2, 1000, 1000, 0, 0, 0, 0))
    trusted = frozenset({33, 0})
    assert "belongs to uid 1000" in (lock.dir_problem(Path("/d"), d, trusted) or "")
    assert lock.dir_problem(Path("/d"), d, trusted | {1000}) is None
    f = os.stat_result((stat.S_IFREG | 0o644, 0, 0, 1, 1000, 1000, 0, 0, 0, 0))
    assert "belongs to uid 1000" in (lock.file_problem(Path("/d/f"), f, trusted) or "")
    fifo_file = os.stat_result((stat.S_IFIFO | 0o644, 0, 0, 1, 33, 33, 0, 0, 0, 0))
    assert "not a regular file" in (lock.file_problem(Path("/d/f"), fifo_file, trusted) or "")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another uid can reach (pytest's own tmp is root's 0700)."""
    top = Path(tempfile.mkdtemp(prefix="uwt-lock-", dir="/tmp"))
    top.chmod(0o755)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


TAKE = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_NOFOLLOW)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("took", flush=True)
"""


@root_only
def test_root_uses_the_instance_users_directory_and_hands_the_file_over(
    shared_dir: Path,
) -> None:
    """Root beside the service: /run/uwsgitune belongs to the service's user (the FIFO's
    owner). Root's lock file there is handed to that user, who can take the lock after it;
    a directory of any other uid is refused."""
    fifo, locks = _fifo(shared_dir), shared_dir / "locks"
    locks.mkdir(mode=0o750)
    os.chown(locks, NOBODY, NOBODY)
    problem = ApplyLock(fifo, "root", locks).acquire()
    assert problem is not None and f"belongs to uid {NOBODY}" in problem, problem
    assert not list(locks.iterdir())
    os.chown(fifo, NOBODY, NOBODY)  # now it is the instance's user
    mine = ApplyLock(fifo, "root", locks)
    assert mine.acquire() is None
    assert mine.path.stat().st_uid == NOBODY
    mine.release()
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 for the other uid")
    took = subprocess.run(
        [python, "-c", TAKE, str(mine.path)], user=NOBODY, capture_output=True, text=True
    )
    assert took.stdout == "took\n", took.stderr


MARKED = """
import sys, time
from pathlib import Path
from uwsgitune.actuate.lock import ApplyLock
lock = ApplyLock(Path(sys.argv[1]), "tune", Path(sys.argv[2]))
assert lock.acquire() is None
lock.mark_reload(4242, 1764080000.5)
if sys.argv[3] == "cleared":
    lock.clear_reload(4242)
print("held", flush=True)
time.sleep(60)
"""


@pytest.mark.parametrize("ending", ["killed", "cleared"])
def test_a_reload_its_killed_holder_left_under_way_is_read_by_the_next(
    tmp_path: Path, ending: str
) -> None:
    """A holder killed mid-reload (between its `p` and its `r`) leaves the mark for the next
    holder, whatever tool that is; one whose reload ended leaves none. Others see the
    holder's line alone."""
    fifo, locks = tmp_path / "fifo", tmp_path / "locks"
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-c", MARKED, str(fifo), str(locks), ending], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
        mine = ApplyLock(fifo, "daemon", locks)
        problem = mine.acquire()
        assert problem is not None and problem.endswith(f"pid {proc.pid} (tune) (lock {mine.path})")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    assert mine.acquire() is None
    left = {4242: 1764080000.5} if ending == "killed" else {}
    assert mine.left == left and mine.take_left() == left and mine.left == {}
    me = f"pid {os.getpid()} (daemon)\n"
    # Taking the lock keeps the mark: it goes only once a holder has acted on it.
    kept = "reload master 4242 at 1764080000.500\n" if left else ""
    assert mine.path.read_text() == me + kept
    mine.mark_reload(7, 1.0)
    assert mine.path.read_text() == me + "reload master 7 at 1.000\n" + kept
    mine.clear_reload(7)  # its own `r` went: the other master's mark stays
    assert mine.path.read_text() == me + kept
    mine.clear_reload(4242)  # acted on
    assert mine.path.read_text() == me
    mine.release()


def test_the_marks_are_parsed_one_per_master_and_the_newest_kept() -> None:
    assert lock.reload_marks("pid 1 (x)\nreload master 12 at 3\n") == {12: 3.0}
    assert lock.reload_marks("pid 1 (x)\nreload master 12 at\n") == {}
    text = "pid 1 (x)\nreload master 12 at 3\nreload master 12 at 5\nreload master 9 at 4\n"
    assert lock.reload_marks(text) == {12: 5.0, 9: 4.0}
    many = {pid: float(pid) for pid in range(1, lock.MARKS + 5)}
    rendered = lock.render_marks(many).decode()
    assert lock.reload_marks(rendered) == {p: t for p, t in many.items() if p > 4}
