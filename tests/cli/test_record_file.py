"""`record --keep-request-vars` writes cookies and auth headers: its file is created 0600
(O_CREAT with the mode, never chmod after), and an existing file is made 0600 before a byte
is written. Without the flag the umask decides, as for any file (issue 14, 5)."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from uwsgitune.cli.main import main


@pytest.fixture(autouse=True)
def umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def _record(path: Path, *flags: str) -> dict[str, object]:
    """A short recording of an address that does not answer: the file and its header."""
    main(["record", "127.0.0.1:1", "-o", str(path), "--duration", "0.1", *flags])
    header = json.loads(path.read_text().splitlines()[0])
    assert isinstance(header, dict)
    return header


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_request_vars_file_is_created_0600(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    assert _record(path, "--keep-request-vars")["request_vars"] is True
    assert _mode(path) == 0o600


def test_an_existing_file_is_made_private_first(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("old content\n" * 100)
    path.chmod(0o644)
    _record(path, "--keep-request-vars")
    assert _mode(path) == 0o600 and "old content" not in path.read_text()


def test_without_the_flag_the_umask_decides(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    assert _record(path)["request_vars"] is False
    assert _mode(path) == 0o644
    path.chmod(0o640)
    _record(path)
    assert _mode(path) == 0o640  # an existing file keeps its mode


# Issue 36, 1: the file is opened without following a link, and a recording with request
# vars never goes into a file someone else owns (they could read it, whatever its mode).

NOBODY = 65534
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown")
PRIVATE = (
    "refused; a recording with request vars (cookies, auth headers) goes only to a new file "
    "or to a regular file of yours with one name (another owner could read it, whatever its "
    "mode): remove it, or give a new name"
)


def _refused(path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    code = main(["record", "127.0.0.1:1", "-o", str(path), "--duration", "0.1", *flags])
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1, err
    return err[0]


@root_only
def test_request_vars_never_go_into_a_file_another_user_owns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("theirs\n")
    path.chmod(0o644)
    os.chown(path, NOBODY, NOBODY)
    line = _refused(path, capsys, "--keep-request-vars")
    assert line == f"uwsgitune: {path} belongs to uid {NOBODY}, not to root: {PRIVATE}"
    st = path.stat()
    assert path.read_text() == "theirs\n" and (st.st_uid, _mode(path)) == (NOBODY, 0o644)


@pytest.mark.parametrize("flags", [("--keep-request-vars",), ()])
def test_a_link_is_followed_only_where_nobody_else_could_have_planted_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    """A link in a directory others can write (like /tmp) is refused, with or without
    request vars. Without them, a link only we or root could have made, where nobody else
    can swap it, is followed (`-o /dev/stdout`: root's link in root's /dev)."""
    shared = tmp_path / "tmp"
    shared.mkdir()
    shared.chmod(0o1777)
    victim = tmp_path / "passwd"
    victim.write_text("root:x:0:0::/root:/bin/sh\n")
    path = shared / "r.jsonl"
    path.symlink_to(victim)
    line = _refused(path, capsys, *flags)
    assert line.startswith(f"uwsgitune: {path} is a symlink (to {victim})"), line
    assert victim.read_text() == "root:x:0:0::/root:/bin/sh\n"
    real, mine = tmp_path / "real.jsonl", tmp_path / "mine.jsonl"
    mine.symlink_to(real)
    if flags:  # request vars: only a new file or a regular one of yours
        assert _refused(mine, capsys, *flags).startswith(f"uwsgitune: {mine} is a symlink")
        assert not real.exists()
    else:
        assert _record(mine)["request_vars"] is False and real.exists() and mine.is_symlink()


@pytest.mark.parametrize("flags", [("--keep-request-vars",), ()])
def test_a_hard_linked_file_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...]
) -> None:
    victim, path = tmp_path / "victim", tmp_path / "r.jsonl"
    victim.write_text("precious\n")
    os.link(victim, path)
    assert "has 2 hard links" in _refused(path, capsys, *flags)
    assert victim.read_text() == "precious\n"
