"""Lock file names (issue 36, 8c) and the /tmp fallback directory (issue 36, 1).

Two FIFOs whose sanitised names met shared one lock; the name now carries a hash of the real
path. An older uwsgitune (a daemon not restarted after the upgrade) takes only the old name,
exclusively: `OLD` below is that protocol, as 0.1 ran it. The new lock takes the old name
too (shared), so the two exclude each other both ways, and a reload's mark crosses over.
The fallback `/tmp/uwsgitune-<uid>` must be a real directory of ours nobody else can write."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from uwsgitune.actuate import lock as lock_module
from uwsgitune.actuate.lock import ApplyLock, lock_info, lock_path

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")

# uwsgitune 0.1's ApplyLock.acquire, reduced to what another actor sees: the name without a
# hash, LOCK_EX|LOCK_NB, the holder's line (and, with "mark", a reload's mark) written there.
OLD = r"""
import fcntl, os, re, sys, time
fifo, locks, mode = sys.argv[1], sys.argv[2], sys.argv[3]
name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.realpath(fifo).strip("/")) or "root"
os.makedirs(locks, exist_ok=True)
fd = os.open(os.path.join(locks, f"{name[-200:]}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
except OSError:
    print("refused:", os.pread(fd, 200, 0).decode().split("\n")[0], flush=True)
    sys.exit(0)
os.ftruncate(fd, 0)
text = f"pid {os.getpid()} (uwsgitune daemon)\n"
if mode == "mark":
    text += "reload master 4242 at 1764080000.500\n"
os.pwrite(fd, text.encode(), 0)
print("held", flush=True)
time.sleep(60)
"""


@contextmanager
def old_daemon(fifo: Path, locks: Path, mode: str = "hold") -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", OLD, str(fifo), str(locks), mode], stdout=subprocess.PIPE, text=True
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def _fifo(where: Path, name: str = "app.fifo") -> Path:
    where.mkdir(parents=True, exist_ok=True)
    os.mkfifo(where / name)
    return where / name


@pytest.mark.parametrize("names", [("a b.fifo", "a_b.fifo"), ("x/" + "f" * 210, "y/" + "f" * 210)])
def test_two_fifos_whose_sanitised_names_met_get_two_locks(
    tmp_path: Path, names: tuple[str, str]
) -> None:
    """`a b.fifo` and `a_b.fifo`, or two paths with the same last 200 characters: before,
    one lock for both, and the second instance could not be tuned beside the first."""
    one, two = (_fifo(tmp_path / Path(n).parent, Path(n).name) for n in names)
    locks = tmp_path / "locks"
    assert lock_path(one, locks) != lock_path(two, locks)
    assert lock_path(one, locks, legacy=True) == lock_path(two, locks, legacy=True)
    a, b = ApplyLock(one, "a", locks), ApplyLock(two, "b", locks)
    assert a.acquire() is None
    assert b.acquire() is None, "the other instance's lock"
    assert ApplyLock(one, "c", locks).acquire() is not None  # one instance: still one actor
    a.release()
    b.release()


def test_an_old_daemon_on_the_old_name_excludes_a_new_tune(tmp_path: Path) -> None:
    fifo, locks = _fifo(tmp_path), tmp_path / "locks"
    with old_daemon(fifo, locks) as old:
        assert old.stdout is not None and old.stdout.readline() == "held\n"
        new = ApplyLock(fifo, "uwsgitune tune", locks)
        problem = new.acquire()
        assert problem == (
            f"{fifo} is already tuned by pid {old.pid} (uwsgitune daemon) "
            f"(lock {lock_path(fifo, locks, legacy=True)})"
        )
        assert not new.held
    assert new.acquire() is None  # the old daemon died: both names are free
    new.release()


def test_a_new_holder_excludes_an_old_daemon_and_releases_both_together(tmp_path: Path) -> None:
    fifo, locks = _fifo(tmp_path), tmp_path / "locks"
    new = ApplyLock(fifo, "uwsgitune tune", locks)
    assert new.acquire() is None
    with old_daemon(fifo, locks) as old:
        assert old.stdout is not None
        assert old.stdout.readline() == f"refused: pid {os.getpid()} (uwsgitune tune)\n"
    new.release()
    with old_daemon(fifo, locks) as old:
        assert old.stdout is not None and old.stdout.readline() == "held\n"


def test_a_reload_mark_crosses_between_the_old_and_the_new_name(tmp_path: Path) -> None:
    """An old `tune` killed mid-reload left its mark in the old name only: the new holder
    reads it. A new holder's mark is in the old name too, for an old daemon after it."""
    fifo, locks = _fifo(tmp_path), tmp_path / "locks"
    with old_daemon(fifo, locks, "mark") as old:
        assert old.stdout is not None and old.stdout.readline() == "held\n"
    new = ApplyLock(fifo, "uwsgitune daemon", locks)
    assert new.acquire() is None and new.take_left() == {4242: 1764080000.5}
    new.mark_reload(7, 1.0)
    legacy = lock_path(fifo, locks, legacy=True)
    holder = f"pid {os.getpid()} (uwsgitune daemon)"
    left = "reload master 4242 at 1764080000.500"
    assert legacy.read_text().splitlines() == [holder, "reload master 7 at 1.000", left]
    new.clear_reload(7)
    assert legacy.read_text() == new.path.read_text() == f"{holder}\n{left}\n"
    new.clear_reload(4242)  # acted on: gone from both
    assert legacy.read_text() == new.path.read_text() == f"{holder}\n"
    new.release()


def test_doctor_names_an_old_daemon_that_holds_only_the_old_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    locks = tmp_path / "locks"
    monkeypatch.setenv("UWSGITUNE_LOCK_DIR", str(locks))
    fifo = _fifo(tmp_path)
    with old_daemon(fifo, locks) as old:
        assert old.stdout is not None and old.stdout.readline() == "held\n"
        info = lock_info(fifo)
    assert info.holder_pid == old.pid and info.holder == f"pid {old.pid} (uwsgitune daemon)"
    assert info.path == str(lock_path(fifo, locks, legacy=True))


# The fallback /tmp/uwsgitune-<uid> (here under a sticky directory standing in for /tmp).


@pytest.fixture
def tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake = tmp_path / "tmp"
    fake.mkdir()
    fake.chmod(0o1777)
    monkeypatch.setattr(lock_module, "TMP", fake)
    return fake


def test_a_fallback_planted_as_a_link_to_a_root_directory_is_refused(
    tmp_path: Path, tmp_dir: Path
) -> None:
    """Before, the link was followed and the directory it led to passed (root's)."""
    fifo, target = _fifo(tmp_path), tmp_path / "roots"
    target.mkdir(mode=0o755)
    fallback = lock_module.fallback_dir(os.geteuid())
    fallback.symlink_to(target)
    problem = ApplyLock(fifo, "x", fallback).acquire()
    assert problem == (
        f"the lock directory {fallback} is a symlink, and anyone can plant that name: remove "
        f"it (uwsgitune makes a new one), {lock_module.FIX}"
    )
    assert not list(target.iterdir())


@root_only
def test_a_fallback_of_another_uid_is_refused_even_the_instances(
    tmp_path: Path, tmp_dir: Path
) -> None:
    fifo = _fifo(tmp_path)
    os.chown(fifo, NOBODY, NOBODY)  # the instance's user: trusted for /run/uwsgitune, not here
    fallback = lock_module.fallback_dir(os.geteuid())
    fallback.mkdir(mode=0o755)
    os.chown(fallback, NOBODY, NOBODY)
    problem = ApplyLock(fifo, "x", fallback).acquire()
    assert problem is not None and f"belongs to uid {NOBODY}, not to uid 0" in problem
    assert not list(fallback.iterdir())


def test_a_sticky_fallback_is_refused_and_a_new_one_is_made_ours(
    tmp_path: Path, tmp_dir: Path
) -> None:
    fifo, fallback = _fifo(tmp_path), lock_module.fallback_dir(os.geteuid())
    fallback.mkdir()
    fallback.chmod(0o1777)
    problem = ApplyLock(fifo, "x", fallback).acquire()
    assert problem is not None and "is writable by group or others (mode 1777)" in problem
    assert f"chmod go-w {fallback}" in problem
    fallback.rmdir()
    lock = ApplyLock(fifo, "x", fallback)
    assert lock.acquire() is None and fallback.stat().st_uid == os.geteuid()
    lock.release()
