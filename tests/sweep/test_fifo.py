"""Sweep writes through the tuner's guarded FIFO writer: refusals, and a working write."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from uwsgitune.actuate.fifo import FifoError
from uwsgitune.sweep.live import BoundFifo


def test_missing_regular_and_symlink_are_refused(tmp_path: Path) -> None:
    with pytest.raises(FifoError, match="no such file; add `master-fifo"):
        BoundFifo(tmp_path / "nope", os.getpid()).check()
    regular = tmp_path / "file"
    regular.write_text("")
    with pytest.raises(FifoError, match="not a FIFO"):
        BoundFifo(regular, os.getpid()).write("+")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    link = tmp_path / "link"
    link.symlink_to(fifo)
    with pytest.raises(FifoError, match="symlink"):
        BoundFifo(link, os.getpid()).write("+")


def test_a_fifo_nobody_holds_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    w = BoundFifo(fifo, os.getpid())
    with pytest.raises(FifoError, match="not open in master"):
        w.write("+")
    assert w.sent == []


def test_write_reaches_its_master_and_no_other(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        w = BoundFifo(fifo, master_pid=os.getpid())
        w.check()
        w.write("++")
        assert os.read(reader, 10) == b"++" and w.sent == ["++"]
        other = BoundFifo(fifo, master_pid=os.getppid())
        with pytest.raises(FifoError, match="not open in master"):
            other.write("+")
        assert other.sent == []
    finally:
        os.close(reader)


def test_nothing_is_written_while_the_stats_peer_is_refused(tmp_path: Path) -> None:
    """Issue 14.4 for sweep: the master pid the guards trust comes from the stats; when the
    socket is served by another uid than that master's, no `+`/`-` goes out (as in the
    tuner), and the run fails (1), not bad input."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    why: list[str | None] = ["s.sock: the stats socket is served by uid 1000, but ..."]
    try:
        w = BoundFifo(fifo, master_pid=os.getpid(), refusal=lambda: why[0])
        with pytest.raises(FifoError, match="served by uid 1000") as exc:
            w.write("+")
        assert exc.value.code == 1 and w.sent == []
        assert os.read(reader, 10) == b""  # nothing reached the master
        why[0] = None
        w.write("+")
        assert os.read(reader, 10) == b"+" and w.sent == ["+"]
    finally:
        os.close(reader)
