"""The pause before a reload (actuate/reload.py), on a scripted FIFO and status reads."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from msgspec.structs import replace as struct_replace

from tests.tuner.plant import Plant
from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.reload import (
    LONGEST,
    STARTING,
    WORKER_MERCY,
    Reloader,
    Statuses,
    can_pause,
    pause_unsafe,
    quiesce,
    undo,
)
from uwsgitune.core.frame import Frame


class Fifo(MasterFifo):
    def __init__(self, refuse: str = "") -> None:
        super().__init__(Path("/nonexistent/fifo"))
        self.sent: list[str] = []
        self.refuse = refuse

    def send(self, command: str, master_pid: int) -> None:
        if command in self.refuse:
            raise FifoError(f"{self.path}: no master reads it")
        self.sent.append(command)


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def wait(self, seconds: float) -> None:
        self.t += seconds

    def now(self) -> float:
        return self.t


def _frame(threads: int = 1, status: str = "busy") -> Frame:
    f = Plant(live=4, workers_max=8, cpu_ms=3, io_ms=0, clients=8).frame(1.0)
    workers = tuple(struct_replace(w, status=status) if w.live else w for w in f.workers)
    return replace(f, threads=threads, workers=workers)


def _reads(*seq: Sequence[str] | None) -> tuple[list[int], Statuses]:
    calls = [0]

    def read() -> Sequence[str] | None:
        calls[0] += 1
        return seq[min(calls[0], len(seq)) - 1]

    return calls, read


def test_the_pool_counts_as_paused_after_two_reads_in_a_row() -> None:
    # A worker that accepted just before the pause reads `pause`, then `busy` while it
    # serves that request: one all-`pause` read is not enough.
    p, b = ["pause"] * 4, ["pause", "busy", "pause", "pause"]
    calls, read = _reads(p, b, p, p)
    fifo, clock = Fifo(), Clock()
    q = quiesce(fifo, _frame(), read, clock.wait, clock.now)
    assert fifo.sent == ["p"] and q is not None and q.settled
    assert calls[0] == 4 and "paused first" in q.line()


def test_a_pool_that_never_pauses_is_reloaded_anyway_after_the_longest_wait() -> None:
    _, read = _reads(["pause", "busy"], None)  # a long request, then a failed read
    fifo, clock = Fifo(), Clock()
    q = quiesce(fifo, _frame(), read, clock.wait, clock.now)
    assert q is not None and not q.settled and LONGEST <= q.seconds < LONGEST + 0.1
    assert "reloaded anyway" in q.line() and fifo.sent == ["p"]


def test_no_pause_for_threads_for_a_pool_already_paused_or_when_p_is_refused() -> None:
    _, read = _reads(["pause"])
    clock = Clock()
    for frame in (_frame(threads=2), _frame(status="pause")):
        fifo = Fifo()
        assert not can_pause(frame)
        assert quiesce(fifo, frame, read, clock.wait, clock.now) is None
        assert fifo.sent == []
    fifo = Fifo(refuse="p")
    assert quiesce(fifo, _frame(), read, clock.wait, clock.now) is None
    assert can_pause(_frame(status="idle"))


def test_resume_toggles_the_pause_back_or_says_it_is_still_paused() -> None:
    fifo = Fifo()
    assert "undone" in undo(fifo, 123) and fifo.sent == ["p"]
    said = undo(Fifo(refuse="p"), 123)
    assert "still PAUSED" in said and "send `p` to /nonexistent/fifo" in said


class FirstOnly(Fifo):
    """The `p` goes; then nothing does: not the `r`, not the `p` that would undo it."""

    def send(self, command: str, master_pid: int) -> None:
        if self.sent:
            raise FifoError(f"{self.path}: no master reads it")
        self.sent.append(command)


@pytest.mark.parametrize(("fifo", "left"), [(Fifo(refuse="r"), False), (FirstOnly(), True)])
def test_the_locks_mark_stays_only_while_the_pool_may_still_be_paused(
    tmp_path: Path, fifo: Fifo, left: bool
) -> None:
    """The apply lock marks the pause from the `p` to the `r`, for a next holder should
    this one die. An `r` that fails is undone with `p`; if that fails too, the pool is
    still paused and the mark stays (the next holder resumes it), else it goes."""
    os.mkfifo(tmp_path / "fifo")
    lock = ApplyLock(tmp_path / "fifo", "test", tmp_path / "locks")
    assert lock.acquire() is None
    clock, (_, read) = Clock(), _reads(["pause"] * 4)
    frame = replace(_frame(), master_pid=os.getpid())  # a /proc to read: no `lazy` there
    reloader = Reloader(
        fifo,
        tmp_path / "o.ini",
        None,
        _frame,
        sleep=clock.wait,
        mono=clock.now,
        statuses=read,
        lock=lock,
    )
    with pytest.raises(FifoError, match="still PAUSED" if left else "undone"):
        reloader.reload(frame, config={})
    assert fifo.sent[0] == "p"
    assert ("reload master" in lock.path.read_text()) is left
    lock.release()


def _reloader(tmp_path: Path, fifo: Fifo, clock: Clock, read: Statuses) -> Reloader:
    return Reloader(
        fifo, tmp_path / "o.ini", None, _frame, sleep=clock.wait, mono=clock.now, statuses=read
    )


def test_no_pause_or_reload_while_a_worker_is_starting(tmp_path: Path) -> None:
    """A worker not yet in its loop (`accepting` 0) would run the master's SIGHUP handler and
    live on until the mercy: the `p` and the `r` wait until it has started."""
    starting, idle = ["idle", STARTING, "idle"], ["idle"] * 3
    calls, read = _reads(starting, starting, starting, idle, ["pause"] * 3)
    fifo, clock = Fifo(), Clock()
    reloader = _reloader(tmp_path, fifo, clock, read)
    frame = replace(_frame(status="idle"), master_pid=os.getpid())
    paused = reloader.reload(frame, config={})
    assert fifo.sent == ["p", "r"] and paused is not None and paused.settled
    assert calls[0] == 6  # 4 while it starts, 2 paused in a row
    assert 0 < reloader.waited < 1 and "waited" in reloader.said and "vain" not in reloader.said


def test_a_worker_that_never_starts_holds_the_reload_for_the_mercy_at_most(
    tmp_path: Path,
) -> None:
    _, read = _reads(["idle", STARTING])
    fifo, clock = Fifo(), Clock()
    reloader = _reloader(tmp_path, fifo, clock, read)
    reloader.reload(replace(_frame(threads=2), master_pid=os.getpid()), config={})
    assert fifo.sent == ["r"]  # threads: no pause
    assert WORKER_MERCY <= reloader.waited < WORKER_MERCY + 0.2 and "in vain" in reloader.said
    clock2 = Clock()
    fifo2 = Fifo()
    quick = _reloader(tmp_path, fifo2, clock2, _reads(["idle", STARTING])[1])
    quick.reload(
        replace(_frame(threads=2), master_pid=os.getpid()), config={"worker-reload-mercy": "5"}
    )
    assert 5 <= quick.waited < 5.2 and fifo2.sent == ["r"]


def test_a_started_pool_waits_for_nothing(tmp_path: Path) -> None:
    calls, read = _reads(["idle"] * 3)
    fifo, clock = Fifo(), Clock()
    reloader = _reloader(tmp_path, fifo, clock, read)
    reloader.reload(replace(_frame(threads=2), master_pid=os.getpid()), config={})
    assert fifo.sent == ["r"] and reloader.waited == 0 and calls[0] == 1 and reloader.said == ""


def _proc(tmp_path: Path, cmdline: list[str], env: list[str]) -> Path:
    d = tmp_path / "proc" / "42"
    d.mkdir(parents=True, exist_ok=True)
    (d / "cmdline").write_bytes(b"\0".join(w.encode() for w in cmdline) + b"\0")
    (d / "environ").write_bytes(b"\0".join(e.encode() for e in env) + b"\0")
    return tmp_path / "proc"


def test_no_pause_under_lazy_or_a_subscription_wherever_it_is_set(tmp_path: Path) -> None:
    ok = _proc(tmp_path, ["uwsgi", "--ini", "app.ini", "--lazy-apps"], ["PATH=/bin"])
    assert not pause_unsafe({"processes": "8", "lazy-apps": "true"}, 42, ok)
    for key in ("lazy", "subscribe-to", "subscribe2", "st"):
        assert pause_unsafe({key: "x"}, 42, ok), key
    assert pause_unsafe(None, 42, ok)  # the config unread
    assert pause_unsafe({}, 43, ok)  # the master's /proc unread
    for cmdline, env in (
        (["uwsgi", "--lazy"], []),
        (["uwsgi", "--subscribe-to=127.0.0.1:7000:app"], []),
        (["uwsgi"], ["UWSGI_LAZY=1"]),
        (["uwsgi"], ["UWSGI_SUBSCRIBE_TO=127.0.0.1:7000:app"]),
    ):
        assert pause_unsafe({}, 42, _proc(tmp_path, cmdline, env)), (cmdline, env)
