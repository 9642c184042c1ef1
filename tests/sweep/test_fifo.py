"""The FIFO guards: missing, symlink, regular file, no reader, and a working write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uwsgitune.sweep.fifo import FifoError, MasterFifo, check_fifo, opened_by


def test_missing_regular_and_symlink_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FifoError, match="does not exist; add `master-fifo"):
        check_fifo(str(tmp_path / "nope"))
    regular = tmp_path / "file"
    regular.write_text("")
    with pytest.raises(FifoError, match="not a FIFO"):
        check_fifo(str(regular))
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    with pytest.raises(FifoError, match="symlink"):
        check_fifo(str(link))
    check_fifo(str(fifo))


def test_no_reader_is_enxio(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(FifoError, match="no uWSGI master reads"):
        MasterFifo(str(fifo)).write("+")


def test_write_reaches_a_reader_and_ownership_is_checked(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert opened_by(os.getpid(), str(fifo)) is True
        w = MasterFifo(str(fifo), master_pid=os.getpid())
        w.check()
        w.write("++")
        assert os.read(reader, 10) == b"++" and w.sent == ["++"]
        other = MasterFifo(str(fifo), master_pid=os.getppid())
        if opened_by(os.getppid(), str(fifo)) is False:
            with pytest.raises(FifoError, match="not the master FIFO"):
                other.check()
    finally:
        os.close(reader)
