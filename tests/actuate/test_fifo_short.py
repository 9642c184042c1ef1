"""A master FIFO is opened O_NONBLOCK: a full pipe (a master that stopped reading) takes
nothing, a write past PIPE_BUF may stop part way. Neither is reported as sent (issue 14, 5).

A real kernel pipe: this process holds the FIFO's read end open, as a master does, and is the
"master" the guards check (its /proc/<pid>/fd holds the FIFO, its uid owns it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from uwsgitune.actuate.fifo import FifoError, FifoShortWrite, MasterFifo

PAGE = 4096


@pytest.fixture
def full(tmp_path: Path) -> Iterator[tuple[MasterFifo, int]]:
    """A FIFO whose pipe is full; yields the writer and the read end."""
    path = tmp_path / "fifo"
    os.mkfifo(path)
    reader = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    filler = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        for _ in range(10_000):  # 64 KiB by default: bounded whatever the pipe size
            os.write(filler, b"." * PAGE)
    except BlockingIOError:
        pass
    try:
        yield MasterFifo(path), reader
    finally:
        os.close(filler)
        os.close(reader)


def test_full_pipe_sends_nothing_and_says_so(full: tuple[MasterFifo, int]) -> None:
    fifo, _ = full
    with pytest.raises(FifoError) as err:
        fifo.scale(2, 3, 1, os.getpid(), now=0.0)
    assert (
        str(err.value)
        == f"{fifo.path}: the master's pipe is full (is the master stuck?); nothing sent"
    )
    assert fifo.pending is None


def test_a_write_that_stops_part_way_names_what_went(full: tuple[MasterFifo, int]) -> None:
    fifo, reader = full
    os.read(reader, PAGE)  # one page free: a 5000-byte write stops after it
    with pytest.raises(FifoShortWrite) as err:
        fifo.scale(5001, 1, 1, os.getpid(), now=7.0)
    assert str(err.value) == (
        f"{fifo.path}: only {PAGE} of 5000 '-' written (the master's pipe is full: "
        "is the master stuck?)"
    )
    assert err.value.sent == "-" * PAGE
    assert fifo.pending is not None  # the `-` that went are pending, not the 5000 asked
    assert (fifo.pending.expect_live, fifo.pending.count) == (5001 - PAGE, PAGE)
    os.read(reader, PAGE)
    with pytest.raises(FifoShortWrite) as err:
        fifo.cancel_pending(5001 - PAGE + 5000, os.getpid())  # 5000 `+` asked
    assert err.value.sent == "+" * PAGE and fifo.pending is None  # a `+` cancels the debt
