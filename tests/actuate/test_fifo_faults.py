"""The FIFO guard against a real uWSGI: no command ever reaches anything but a FIFO that
this master reads, whatever is put at the path."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.tuned import live, manual, wait_for
from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.launch import UwsgiProcess

pytestmark = pytest.mark.uwsgi


def refused(fifo: MasterFifo, pid: int, needle: str) -> None:
    with pytest.raises(FifoError) as err:
        fifo.send("+", pid)
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_whatever_replaces_the_fifo_gets_nothing(
    uwsgi: Callable[..., UwsgiProcess], tmp_path: Path
) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=4, initial=1))
    path, pid = Path(proc.fifo), proc.pid
    fifo, real = MasterFifo(path), path.with_name("fifo.real")
    path.rename(real)
    refused(fifo, pid, "no such file")
    path.write_text("")
    refused(fifo, pid, "not a FIFO")
    assert path.read_text() == ""
    path.unlink()
    path.symlink_to(real)
    refused(fifo, pid, "symlink")
    path.unlink()
    os.mkfifo(path)  # a FIFO nobody reads, or another instance's
    refused(fifo, pid, "not open in master")
    path.unlink()
    real.rename(path)
    os.chown(path, 65534, 65534)  # the master's own FIFO, but owned by someone else
    refused(fifo, pid, "owned by uid 65534")
    os.chown(path, os.getuid(), os.getgid())
    time.sleep(1.2)
    assert live(proc) == 1  # nothing was delivered by any refused send
    fifo.send("+", pid)
    assert wait_for(lambda: live(proc) == 2)


def test_dead_master_gets_nothing(uwsgi: Callable[..., UwsgiProcess], tmp_path: Path) -> None:
    proc = uwsgi(**manual(tmp_path / "o.ini", processes=4, initial=1))
    pid = proc.pid
    os.kill(pid, signal.SIGKILL)
    assert proc.proc is not None
    proc.proc.wait(5)
    proc._reap_group()  # its workers share the session: take them down too
    fifo = MasterFifo(proc.fifo)
    with pytest.raises(FifoError) as err:
        fifo.send("+", pid)
    assert "not open in master" in str(err.value) or "cannot read" in str(err.value)
    with pytest.raises(FifoError):
        fifo.scale(1, 0, 1, pid, 0.0)  # below the floor: refused before any I/O
