"""Workers a reload cut short left paused: resumed by whoever acts on the instance next.

A reload pauses a pool of one-thread workers (`p`) before its `r` (actuate/reload.py). A
holder killed between the two (SIGKILL, the OOM killer) leaves the pool paused: requests wait
in the backlog and the app is down. Two records say so:
- the apply lock's mark (`ApplyLock.marks`), one line per master, written before the `p` and
  removed once the `r` went. Every actor on that FIFO shares it, whatever its audit log: the
  daemon after a killed `tune`, `sweep` or the TUI's `a` after a killed daemon;
- the reload's `intent` in the killed holder's audit log with no change after it, read by a
  tuner on the same log (actuate/service.py).

Every holder acts on them before anything else: the daemon and `tune` at each step of their
tuner (`on_frame`), `sweep` and the TUI's `a` as soon as they take the lock, waiting for it
(`settle`). The rules, the same for all:
- A mark older than `LEFT_PAUSED_S` is dropped, and said with the manual fix: a pause seen
  so long after may be someone else's.
- For `LEFT_PAUSED_WATCH` seconds, a poll of that master in which a worker reads `pause` has
  the pool resumed with one `p`. Never before a worker reads `pause`: `p` toggles, and a
  holder killed after its mark but before its `p` left the pool running. The pause is the
  master's: a worker still in its request reads `busy` until it ends, then `pause`
  (measured), and one `p` resumes them all.
- The `p` goes through the guarded FIFO, only when the stats are proved to come from that
  master (`refusal`: actuate/peer.py).
- A mark goes once acted on: the pool resumed, or polls of that master in which no worker
  read `pause` all through the watch, or that master gone. It stays, and this is said, when
  the `p` could not be sent or was refused, when the stats are another master's, or when no
  poll of that master came: a next holder tries again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.reload import resume
from uwsgitune.core.frame import Frame
from uwsgitune.sources.procfs import PROC

LEFT_PAUSED_S = 600.0  # a reload cut short this recently may have left the workers paused
LEFT_PAUSED_WATCH = 30.0  # seconds from the start to look for them (a request may end late)
POLL_SECONDS = 0.25  # between polls while a holder waits for them (`settle`)

Kind = Literal["waiting", "resumed", "refused", "kept", "dropped"]
Level = Literal["info", "warning", "error"]
STOPS: tuple[Kind, ...] = ("resumed", "refused")  # a holder does nothing else after these
CUT = "a reload cut short left paused"


@dataclass(frozen=True)
class Resume:
    """What was done about a pause a reload left, for the caller to say and audit."""

    kind: Kind
    pid: int  # the master
    detail: str  # what, one line
    paused: int = 0  # workers that read `pause`
    live: int = 0

    @property
    def text(self) -> str:
        if self.kind == "resumed":
            return f"resumed (`p`) {self.detail}"
        return f"not resumed: {self.detail}" if self.kind == "refused" else self.detail

    @property
    def level(self) -> Level:
        if self.kind == "waiting":
            return "info"
        return "error" if self.kind == "refused" else "warning"


@dataclass
class _Watch:
    until: float  # monotonic
    marked: bool  # the lock marks it (else only the audit log): the mark goes once acted on
    seen: bool = False  # a poll of this master came
    paused_seen: bool = False  # ... in which a worker read `pause` (not acted on: observing)


class LeftPaused:
    """The masters whose pools a reload cut short may have left paused, watched."""

    def __init__(
        self,
        fifo: MasterFifo | None,
        refusal: Callable[[], str | None] = lambda: None,
        proc: Path = PROC,
    ) -> None:
        self.fifo = fifo
        self.refusal = refusal  # why no write may go now (the stats not the master's), or None
        self.proc = proc
        self.watching: dict[int, _Watch] = {}

    def expect(self, pid: int, now: float, marked: bool = False) -> None:
        """Look for master `pid`'s paused workers from `now` (monotonic) on."""
        w = self.watching.setdefault(pid, _Watch(now + LEFT_PAUSED_WATCH, marked))
        w.marked = w.marked or marked

    def take(self, lock: ApplyLock | None, now: float, wall: float) -> list[Resume]:
        """The marks earlier holders left in `lock` (once, when taken): watched from `now`;
        one older than `LEFT_PAUSED_S` is dropped, and said."""
        out: list[Resume] = []
        for pid, t in (lock.take_left() if lock is not None else {}).items():
            ago = max(0.0, wall - t)
            if ago <= LEFT_PAUSED_S:
                self.expect(pid, now, marked=True)
                continue
            assert lock is not None
            lock.clear_reload(pid)
            text = (
                f"the apply lock says a reload of master {pid} was cut short {ago:.0f}s ago, too "
                f"long ago to act on (a pause now may be someone else's): if its workers read "
                f"`pause`, send `p` to {self._fifo_path()} to resume them"
            )
            out.append(Resume("dropped", pid, text))
        return out

    def on_frame(
        self, frame: Frame, now: float, lock: ApplyLock | None, acting: bool = True
    ) -> list[Resume]:
        """One poll: resume a watched pool that reads `pause`, when `acting` (a holder)."""
        out = []
        for pid, w in list(self.watching.items()):
            said = self._one(pid, w, frame, now, lock, acting)
            if said is not None:
                out.append(said)
        return out

    def settle(
        self,
        lock: ApplyLock | None,
        poll: Callable[[], Frame],
        *,
        say: Callable[[Resume], None] = lambda _r: None,
        wait: Callable[[float], None] = time.sleep,
        mono: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        halted: Callable[[], bool] = lambda: False,
    ) -> list[Resume]:
        """For a holder that just took `lock` (sweep, the TUI's `a`): act on the marks it
        found, polling until each is settled (`LEFT_PAUSED_WATCH` at most), before anything
        else. A stop (`halted`) ends the wait; the marks not acted on stay."""
        out = self.take(lock, mono(), wall())
        if self.watching:
            pids = ", ".join(map(str, self.watching))
            text = (
                f"the apply lock says a reload of master {pids} was cut short (uwsgitune killed "
                f"between its `p` and its `r`): waiting up to {LEFT_PAUSED_WATCH:g}s for its "
                "workers to read `pause`, to resume them"
            )
            out.append(Resume("waiting", 0, text))
        for r in out:
            say(r)
        while self.watching and not halted():
            for r in self.on_frame(poll(), mono(), lock):
                out.append(r)
                say(r)
            if self.watching:
                wait(POLL_SECONDS)
        return out

    def _one(
        self, pid: int, w: _Watch, frame: Frame, now: float, lock: ApplyLock | None, acting: bool
    ) -> Resume | None:
        marked = w.marked and lock is not None
        if now > w.until:
            del self.watching[pid]
            return self._expired(pid, w, lock) if marked else None
        if not frame.ok:
            return None
        if frame.master_pid != pid:
            del self.watching[pid]
            return self._other_master(pid, frame, lock) if marked else None
        w.seen = True
        paused = frame.paused
        w.paused_seen = w.paused_seen or bool(paused)
        if not paused or not acting:
            return None
        del self.watching[pid]
        why = self.refusal() or ("no FIFO given" if self.fifo is None else resume(self.fifo, pid))
        detail = f"the {paused} workers {CUT}"
        if why is None:
            if lock is not None:
                lock.clear_reload(pid)
            return Resume("resumed", pid, detail, paused, frame.live)
        kept = "; the apply lock's mark stays for the next holder" if marked else ""
        return Resume("refused", pid, f"{detail}: {why}{kept}", paused, frame.live)

    def _expired(self, pid: int, w: _Watch, lock: ApplyLock | None) -> Resume | None:
        assert lock is not None
        if w.seen and not w.paused_seen:  # watched all along: not paused (or resumed since)
            lock.clear_reload(pid)
            return None
        why = "no poll of it came" if not w.seen else "its paused workers were not resumed"
        text = (
            f"the apply lock says a reload of master {pid} was cut short, but {why} within "
            f"{LEFT_PAUSED_WATCH:g}s; the mark stays for the next holder: if its workers read "
            f"`pause`, send `p` to {self._fifo_path()} to resume them"
        )
        return Resume("kept", pid, text)

    def _other_master(self, pid: int, frame: Frame, lock: ApplyLock | None) -> Resume | None:
        assert lock is not None
        if not (self.proc / str(pid)).exists():  # that master is gone, its pool with it
            lock.clear_reload(pid)
            return None
        text = (
            f"the apply lock says a reload of master {pid} was cut short, but these stats are "
            f"master {frame.master_pid}'s: not resumed, the mark stays; if master {pid}'s "
            "workers read `pause`, send `p` to its FIFO to resume them"
        )
        return Resume("kept", pid, text)

    def _fifo_path(self) -> str:
        return str(self.fifo.path) if self.fifo is not None else "the master FIFO"
