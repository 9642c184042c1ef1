"""`doctor` checks that uWSGI's user can read its ini and the override (it re-reads both at
every reload, as the user `uid =` dropped to), and that others cannot write the override's
directory (issue 14, 5). Real files; the other user is 65534 (nobody)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.tuned import manual
from uwsgitune.actuate.doctor.access import Reader, reader_from_proc, why_unreadable
from uwsgitune.cli.main import main
from uwsgitune.launch import UwsgiProcess

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")


@pytest.fixture
def site() -> Iterator[Path]:
    """A directory anyone can enter (pytest's tmp_path is 0700): an ini and its override."""
    where = Path(tempfile.mkdtemp(prefix="uwt-doc-", dir="/tmp"))
    where.chmod(0o755)
    (where / "ov.ini").write_text("[uwsgi]\n")
    (where / "app.ini").write_text(
        "[uwsgi]\nuid = nobody\ngid = nogroup\nmaster-fifo = /nonexistent/fifo\nini = ov.ini\n"
    )
    (where / "app.ini").chmod(0o644)
    try:
        yield where
    finally:
        shutil.rmtree(where)


def _doctor(site: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    ini, ov = site / "app.ini", site / "ov.ini"
    code = main(["doctor", "127.0.0.1:1", "--ini", str(ini), "--override", str(ov)])
    return code, capsys.readouterr().out.splitlines()


def test_override_only_root_can_read_fails_with_the_fix(
    site: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ov = site / "ov.ini"
    ov.chmod(0o600)  # what `write_atomic` made of a new file before
    code, out = _doctor(site, capsys)
    i = out.index(
        f"FAIL access: uid {NOBODY} (the ini's `uid =`): uid {NOBODY} cannot read {ov} "
        "(mode 0600, owner 0:0): the next reload fails"
    )
    assert out[i + 1] == f"      run: chown {NOBODY} {ov}   (or: chmod o+r {ov})"
    assert code == 1 and "access" in out[-1]
    ov.chmod(0o644)
    code, out = _doctor(site, capsys)
    assert f"ok   access: uid {NOBODY} (the ini's `uid =`) can read {site}/app.ini, {ov}" in out
    os.chown(ov, NOBODY, NOBODY)
    ov.chmod(0o600)  # its own file: readable
    assert any(line.startswith("ok   access") for line in _doctor(site, capsys)[1])


def test_directory_it_cannot_enter(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site.chmod(0o750)
    _, out = _doctor(site, capsys)
    assert (
        f"FAIL access: uid {NOBODY} (the ini's `uid =`): uid {NOBODY} cannot enter {site} "
        "(mode 0750, owner 0:0)"
    ) in out
    assert f"      run: chmod o+x {site}" in out


def test_directory_others_can_write(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    site.chmod(0o777)
    code, out = _doctor(site, capsys)
    assert code == 1
    assert f"FAIL access: {site} is writable by others (mode 0777)" in "\n".join(out)
    assert f"      run: chmod go-w {site}" in out


def test_reader_of_a_real_master(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The master's own uid and groups, from its /proc status."""
    proc = uwsgi(**manual(tmp_path / "ov.ini"))
    main(["doctor", proc.stats, "--override", str(tmp_path / "ov.ini")])  # the ini from /proc
    me = f"uid {os.geteuid()} (master {proc.pid})"
    assert f"ok   access: {me} can read {proc.ini}, {tmp_path / 'ov.ini'}" in (
        capsys.readouterr().out.splitlines()
    )
    reader = reader_from_proc(proc.pid)
    assert reader is not None and reader.uid == os.geteuid() and reader.source.startswith("master")
    assert why_unreadable(tmp_path / "ov.ini", reader) is None
    nobody = Reader(NOBODY, frozenset({NOBODY}), "test")
    why = why_unreadable(tmp_path / "ov.ini", nobody)  # tmp_path's parents are 0700
    assert why is not None and "cannot enter" in why[0]


@pytest.mark.parametrize("how", ["symlink", "hard link"])
def test_a_linked_override_fails_with_the_tuners_own_line(
    site: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    """Before the first reload, doctor says what the tuner would refuse (issue 36, 1)."""
    ov, real = site / "ov.ini", site / "managed.ini"
    ov.rename(real)
    ov.symlink_to(real) if how == "symlink" else os.link(real, ov)
    code, out = _doctor(site, capsys)
    why = f"is a symlink (to {real})" if how == "symlink" else "has 2 hard links"
    line = next(x for x in out if x.startswith("FAIL access: "))
    assert line.startswith(f"FAIL access: {ov} {why}"), out
    assert "refused; the override must be a regular file with one name" in line
    assert code == 1 and "access" in out[-1]
