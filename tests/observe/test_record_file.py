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
