"""The override stays readable by uWSGI's user, and sits where nobody else can swap it
(issue 14, 5): a replaced file keeps its mode and owner, a new one is 0644 whatever the
umask, a directory others can write is refused, and a short write never lands a short file.

Real files; another uid is 65534 (nobody), set with chown (or seteuid) where we are root."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from uwsgitune.actuate.override import Override, SetupError, restore, write_atomic

NOBODY = 65534
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
OLD = Override(4, 1, 2).render()
NEW = Override(6, 1, 3).render()


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@contextmanager
def _euid(uid: int) -> Iterator[None]:
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)


@pytest.fixture
def nobodys() -> Iterator[Path]:
    """A directory of nobody's (0755) that nobody can reach (pytest's tmp_path is 0700)."""
    where = Path(tempfile.mkdtemp(prefix="uwt-own-", dir="/tmp"))
    where.chmod(0o755)
    os.chown(where, NOBODY, NOBODY)
    try:
        yield where
    finally:
        shutil.rmtree(where)


def test_new_override_is_0644_whatever_the_umask(tmp_path: Path) -> None:
    path = tmp_path / "ov.ini"
    with _umask(0o077):
        write_atomic(path, OLD)
    assert _mode(path) == 0o644  # mkstemp alone gives 0600: uWSGI's user could not read it


@ROOT_ONLY
def test_replaced_override_keeps_mode_and_owner(tmp_path: Path) -> None:
    path = tmp_path / "ov.ini"
    path.write_text(OLD)
    os.chown(path, NOBODY, NOBODY)
    path.chmod(0o640)
    write_atomic(path, NEW)
    prev = tmp_path / "ov.ini.prev"
    for f in (path, prev):
        st = f.stat()
        assert (st.st_uid, st.st_gid, _mode(f)) == (NOBODY, NOBODY, 0o640), f
    assert path.read_text() == NEW and prev.read_text() == OLD
    assert restore(path)
    st = path.stat()
    assert (st.st_uid, st.st_gid, _mode(path), path.read_text()) == (NOBODY, NOBODY, 0o640, OLD)


@ROOT_ONLY
def test_owner_that_cannot_be_kept_is_not_shut_out(nobodys: Path) -> None:
    """Written as another user (not root), a 0600 file of root's would become unreadable
    to root's uWSGI: refused, nothing written. A 0644 one is rewritten, still 0644."""
    tmp_path = nobodys
    path = tmp_path / "ov.ini"
    path.write_text(OLD)
    path.chmod(0o600)
    with _euid(NOBODY), pytest.raises(SetupError) as err:
        write_atomic(path, NEW)
    assert str(err.value) == (
        f"{path} is owned by uid 0 (mode 0600); rewritten by uid {NOBODY} it could not read "
        f"it: run uwsgitune as uid 0 or root, or `chmod o+r {path}`"
    )
    assert path.read_text() == OLD and sorted(os.listdir(tmp_path)) == ["ov.ini"]
    path.chmod(0o644)
    with _euid(NOBODY):
        write_atomic(path, NEW)
    assert path.read_text() == NEW and _mode(path) == 0o644


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_directory_others_can_write_is_refused(tmp_path: Path, mode: int) -> None:
    where = tmp_path / "open"
    where.mkdir()
    where.chmod(mode)
    path = where / "ov.ini"
    with pytest.raises(SetupError) as err:
        write_atomic(path, NEW)
    assert str(err.value) == (
        f"{where} is writable by others (mode {mode:04o}), who could swap the override uWSGI "
        f"reads: `chmod go-w {where}`, or put the override in a private directory"
    )
    assert not path.exists()


@ROOT_ONLY
@pytest.mark.parametrize("name", ["ov.ini", "ov.ini.prev"])
def test_sticky_directory_with_a_name_another_user_owns(tmp_path: Path, name: str) -> None:
    where = tmp_path / "tmp"
    where.mkdir()
    where.chmod(0o1777)
    path = where / "ov.ini"
    write_atomic(path, OLD)  # sticky, names ours: allowed (like /tmp)
    (where / name).unlink(missing_ok=True)
    (where / name).write_text(OLD)
    os.chown(where / name, NOBODY, NOBODY)
    with pytest.raises(SetupError, match=f"^{where / name} is owned by uid {NOBODY} in the "):
        write_atomic(path, NEW)
    assert path.read_text() == OLD


SHORT = """
import resource, signal, sys
from pathlib import Path
from uwsgitune.actuate.override import write_atomic
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (40, 40))  # os.write stops at byte 40
try:
    write_atomic(Path(sys.argv[1]), "[uwsgi]\\n" + "; pad\\n" * 20 + "processes = 6\\n")
except OSError as exc:
    print(exc.strerror)
"""


def test_short_write_never_lands_a_short_file(tmp_path: Path) -> None:
    path = tmp_path / "ov.ini"
    path.write_text("[uwsgi]\nprocesses = 4\n")
    out = subprocess.run(
        [sys.executable, "-c", SHORT, str(path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "File too large", out.stderr
    assert path.read_text() == "[uwsgi]\nprocesses = 4\n"  # before: 40 bytes renamed in place
    assert sorted(os.listdir(tmp_path)) == ["ov.ini", "ov.ini.prev"]
