"""A pool a reload cut short left paused (actuate/leftpaused.py), on scripted frames, a scripted
FIFO and a real lock file: resumed once a worker reads `pause`; the lock's mark goes only once
acted on, and stays (said) when the `p` fails or is refused, when the stats are another
master's, or when no poll of that master came. The real path: test_real_quiesce.py (the
daemon, `tune`), tests/sweep/test_real_lock.py (sweep), tests/tui/test_resume_left.py (the
TUI's `a`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from msgspec.structs import replace as struct_replace

from tests.actuate.test_quiesce import Clock, Fifo, FirstOnly, _frame
from uwsgitune.actuate.fifo import FifoError
from uwsgitune.actuate.leftpaused import LEFT_PAUSED_S, LEFT_PAUSED_WATCH, LeftPaused
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.reload import Reloader
from uwsgitune.core.frame import Frame

PID = os.getpid()  # a master that runs (this process)
WALL = 1_800_000_000.0


def _paused(pid: int = PID, n: int = 4) -> Frame:
    f = _frame(status="idle")
    live = [i for i, w in enumerate(f.workers) if w.live][:n]
    workers = tuple(
        struct_replace(w, status="pause") if i in live else w for i, w in enumerate(f.workers)
    )
    return replace(f, master_pid=pid, workers=workers)


def _running(pid: int = PID) -> Frame:
    return replace(_frame(status="idle"), master_pid=pid)


@pytest.fixture
def lock(tmp_path: Path) -> Iterator[ApplyLock]:
    """The lock a holder killed between its `p` and its `r` left: its mark for master PID."""
    os.mkfifo(tmp_path / "fifo")
    killed = ApplyLock(tmp_path / "fifo", "uwsgitune tune", tmp_path / "locks")
    assert killed.acquire() is None
    killed.mark_reload(PID, WALL - 5)
    killed.release()
    mine = ApplyLock(tmp_path / "fifo", "uwsgitune sweep", tmp_path / "locks")
    assert mine.acquire() is None
    yield mine
    mine.release()


def _marked(lock: ApplyLock) -> bool:
    return f"reload master {PID} at" in lock.path.read_text()


def _settle(left: LeftPaused, lock: ApplyLock, frames: list[Frame]) -> list[str]:
    clock, said = Clock(), []
    out = left.settle(
        lock,
        lambda: frames.pop(0) if len(frames) > 1 else frames[0],
        say=lambda r: said.append(r.text),
        wait=clock.wait,
        mono=clock.now,
        wall=lambda: WALL + clock.now(),
    )
    assert [r.text for r in out] == said
    return said


def test_a_pool_is_resumed_once_a_worker_reads_pause_and_the_mark_goes(lock: ApplyLock) -> None:
    # A worker still in its request reads `busy` until it ends: no `p` before one reads `pause`
    fifo = Fifo()
    said = _settle(LeftPaused(fifo), lock, [_running(), _running(), _paused(n=1)])
    assert fifo.sent == ["p"]
    assert said[0].startswith(f"the apply lock says a reload of master {PID} was cut short")
    assert said[-1] == "resumed (`p`) the 1 workers a reload cut short left paused"
    assert not _marked(lock) and lock.marks == {}


@pytest.mark.parametrize(
    ("fifo", "refusal", "why"),
    [
        (Fifo(refuse="p"), None, "/nonexistent/fifo: no master reads it"),
        (Fifo(), "127.0.0.1:9191: not the master's", "127.0.0.1:9191: not the master's"),
    ],
)
def test_a_pool_that_cannot_be_resumed_keeps_the_mark_and_says_so(
    lock: ApplyLock, fifo: Fifo, refusal: str | None, why: str
) -> None:
    said = _settle(LeftPaused(fifo, refusal=lambda: refusal), lock, [_paused()])
    assert fifo.sent == []
    assert said[-1] == (
        f"not resumed: the 4 workers a reload cut short left paused: {why}; the apply "
        "lock's mark stays for the next holder"
    )
    assert _marked(lock)  # the next holder tries again


def test_the_mark_of_another_running_master_stays(lock: ApplyLock) -> None:
    fifo = Fifo()
    said = _settle(LeftPaused(fifo), lock, [_paused(pid=1)])
    assert fifo.sent == [] and _marked(lock)
    assert "but these stats are master 1's: not resumed, the mark stays" in said[-1]


def test_the_mark_of_a_master_that_is_gone_goes(lock: ApplyLock, tmp_path: Path) -> None:
    fifo = Fifo()
    said = _settle(LeftPaused(fifo, proc=tmp_path / "no-proc"), lock, [_paused(pid=1)])
    assert fifo.sent == [] and not _marked(lock) and len(said) == 1  # only the waiting line


def test_a_pool_watched_all_along_that_never_paused_loses_the_mark(lock: ApplyLock) -> None:
    # Killed after its mark but before its `p`: the pool runs, and `p` would pause it.
    fifo = Fifo()
    said = _settle(LeftPaused(fifo), lock, [_running()])
    assert fifo.sent == [] and not _marked(lock) and len(said) == 1


def test_without_a_poll_of_that_master_the_mark_stays(lock: ApplyLock) -> None:
    fifo = Fifo()
    error = replace(_frame(), kind="error", error="refused", master_pid=0)
    said = _settle(LeftPaused(fifo), lock, [error])
    assert fifo.sent == [] and _marked(lock)
    assert f"no poll of it came within {LEFT_PAUSED_WATCH:g}s; the mark stays" in said[-1]


def test_a_mark_too_old_to_act_on_is_dropped_and_said(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    old = ApplyLock(tmp_path / "fifo", "uwsgitune tune", tmp_path / "locks")
    assert old.acquire() is None
    old.mark_reload(PID, WALL - LEFT_PAUSED_S - 60)
    old.release()
    mine = ApplyLock(tmp_path / "fifo", "uwsgitune watch", tmp_path / "locks")
    assert mine.acquire() is None
    fifo = Fifo()
    said = _settle(LeftPaused(fifo), mine, [_paused()])
    assert fifo.sent == [] and not _marked(mine)
    assert said == [
        f"the apply lock says a reload of master {PID} was cut short 660s ago, too long ago "
        "to act on (a pause now may be someone else's): if its workers read `pause`, send `p` "
        "to /nonexistent/fifo to resume them"
    ]
    mine.release()


@pytest.mark.parametrize(("fifo", "left"), [(Fifo(), False), (FirstOnly(), True)])
def test_a_holders_own_reload_clears_only_its_own_mark(
    tmp_path: Path, fifo: Fifo, left: bool
) -> None:
    """The mark another master's cut reload left (not acted on here) outlives this holder's
    own reload of its master, whether its `r` went or failed with the pool still paused."""
    os.mkfifo(tmp_path / "fifo")
    killed = ApplyLock(tmp_path / "fifo", "uwsgitune tune", tmp_path / "locks")
    assert killed.acquire() is None
    killed.mark_reload(1, WALL)
    killed.release()
    mine = ApplyLock(tmp_path / "fifo", "uwsgitune sweep", tmp_path / "locks")
    assert mine.acquire() is None
    clock = Clock()
    reloader = Reloader(
        fifo,
        tmp_path / "o.ini",
        None,
        _frame,
        sleep=clock.wait,
        mono=clock.now,
        statuses=lambda: ["pause"] * 4,
        lock=mine,
    )
    if left:
        with pytest.raises(FifoError, match="still PAUSED"):
            reloader.reload(replace(_frame(), master_pid=PID), config={})
    else:
        reloader.reload(replace(_frame(), master_pid=PID), config={})
    text = mine.path.read_text()
    assert "reload master 1 at" in text
    assert (f"reload master {PID} at" in text) is left
    mine.release()
