"""The FIFO guard against a real uWSGI: only this master's FIFO; `-` never below the floor."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tuned import doc, live, manual, wait_for
from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi


def test_refuses_a_file_a_symlink_and_another_masters_fifo(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    a = uwsgi(**manual(tmp_path / "a.ini"))
    b = uwsgi(**manual(tmp_path / "b.ini"))
    pid = doc(a).pid
    regular = tmp_path / "regular"
    regular.write_text("")
    link = tmp_path / "link"
    link.symlink_to(a.fifo)
    with pytest.raises(FifoError, match="not a FIFO"):
        MasterFifo(regular).send("+", pid)
    with pytest.raises(FifoError, match="symlink"):
        MasterFifo(link).send("+", pid)
    with pytest.raises(FifoError, match="not open in master"):
        MasterFifo(b.fifo).send("+", pid)
    with pytest.raises(FifoError, match="no such file"):
        MasterFifo(tmp_path / "missing").send("+", pid)
    with pytest.raises(FifoError, match="cannot read"):
        MasterFifo(a.fifo, proc=tmp_path / "no-proc").send("+", pid)
    assert regular.read_text() == ""
    assert live(a) == 2 and live(b) == 2  # nothing reached either master


def test_no_reader_is_enxio_not_a_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    fake = tmp_path / "proc" / "42" / "fd"
    fake.mkdir(parents=True)
    (fake / "3").symlink_to(fifo)  # /proc says "open", but nobody reads
    with pytest.raises(FifoError, match="no master reads it"):
        MasterFifo(fifo, proc=tmp_path / "proc").send("+", 42)


def test_minus_never_below_the_floor_and_no_debt(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=4, initial=3))
    pid = doc(proc).pid
    fifo = MasterFifo(proc.fifo)
    with pytest.raises(FifoError, match="below the floor"):
        fifo.scale(3, 0, 1, pid, 0.0)
    assert fifo.scale(3, 1, 1, pid, 0.0) == "--"
    with pytest.raises(FifoError, match="pending"):
        fifo.scale(3, 2, 1, pid, 0.1)  # the first `-` has not shown yet
    assert wait_for(lambda: live(proc) == 1)
    fifo.observe(1)
    with pytest.raises(FifoError, match="below the floor"):
        fifo.scale(1, 0, 1, pid, 5.0)
    assert fifo.scale(1, 2, 1, pid, 5.0) == "+"
    assert wait_for(lambda: live(proc) == 2)  # no debt swallowed the `+`
    assert not wait_for(lambda: live(proc) != 2, timeout=2.5)
