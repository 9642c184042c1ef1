"""Settings that need a reload: validate, write the override, `r`, verify, else roll back.

1. Validate the configuration uWSGI would read (the user's ini, the override on top); a
   refused one is never written (a bad ini plus `r` kills the instance).
2. Write the override atomically, keeping the previous version.
3. Send `r` (after `p` where that keeps a worker from dropping a connection it had just
   accepted: actuate/quiesce.py), to a vassal of the Emperor too: the Emperor watches the
   vassal's own ini, not the files it includes (measured: an edited include is not
   reloaded), so without `r` the override would wait for the next unrelated reload; and
   since the vassal's ini itself is never touched, the Emperor does not reload it twice.
4. Poll until the same master is back with the new `processes` and `cheaper-initial` live
   workers, before a deadline. Otherwise restore the previous file, reload it when the
   master still reads its FIFO, and report a failure: the caller stops applying.
   A stop asked meanwhile (`Halt`) leaves the wait `grace` seconds to verify, then rolls
   back the same way and reports the reload `interrupted`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.actuate.halt import Halt
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.options import lazy_refusal, lazy_where
from uwsgitune.actuate.override import (
    IniError,
    Override,
    OverrideError,
    SetupError,
    check_override,
    last_include,
    load_config,
    read_ini,
    restore,
    validate,
    write_atomic,
)
from uwsgitune.actuate.quiesce import (
    UNDONE,
    Quiesced,
    Statuses,
    pause_unsafe,
    quiesce,
    resume,
    statuses_of,
    undo,
)
from uwsgitune.core.frame import Frame


@dataclass(frozen=True)
class Limits:
    somaxconn: int | None
    mem_per_worker: int | None = None
    memory_budget: int | None = None


@dataclass(frozen=True)
class ReloadOutcome:
    ok: bool
    detail: str
    seconds: float = 0.0
    restored: bool = False
    frame: Frame | None = None
    interrupted: bool = False  # a stop came during the wait: rolled back, not a failure


def under_emperor(pid: int, proc: Path = Path("/proc")) -> bool:
    """A vassal: the Emperor hands its fd down in the environment. It reloads a vassal when
    the vassal's ini changes, not when a file that ini includes does."""
    try:
        return b"UWSGI_EMPEROR_FD=" in (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return False


def check_include(user_ini: Path, override: Path) -> None:
    """The user's ini must end with `ini = <override>`, or writing it changes nothing."""
    target = last_include(read_ini(user_ini))
    resolved = None if target is None else (user_ini.parent / target).resolve()
    if resolved != override.resolve():
        raise SetupError(
            f"{user_ini} does not end with `ini = {override}`; add it as its last line"
        )


def plan(
    user_ini: Path | None, override_path: Path, ov: Override, limits: Limits, master_pid: int = 0
) -> dict[str, str]:
    """Raise OverrideError unless writing `ov` and reloading is safe (SetupError when the
    setup is wrong, which no later attempt can change: the files, or `lazy` on, under which
    a reload never reads them). The user's config."""
    if user_ini is None:
        raise SetupError("the instance's ini is unknown; pass --ini so it can be validated")
    try:
        check_include(user_ini, override_path)
    except OSError as exc:
        raise SetupError(f"{user_ini}: cannot read ({exc.strerror})") from None
    if not os.path.lexists(override_path):
        raise SetupError(
            f"{override_path} is included by {user_ini} but missing; create it with "
            f"`printf '[uwsgi]\\n' > {override_path}` (owned by uWSGI's user)"
        )
    try:
        check_override(override_path)  # not a link, one name, a directory none can swap
    except OSError as exc:
        raise SetupError(f"{override_path}: cannot read ({exc.strerror})") from None
    try:
        config = load_config(user_ini)
    except (IniError, OSError) as exc:
        raise SetupError(str(exc)) from None
    lazy = lazy_where(config, master_pid)
    if lazy:
        raise SetupError(lazy_refusal(lazy))
    validate(
        config,
        ov,
        somaxconn=limits.somaxconn,
        mem_per_worker=limits.mem_per_worker,
        memory_budget=limits.memory_budget,
    )
    return config


def _live_pids(frame: Frame) -> set[int]:
    return {w.pid for w in frame.workers if w.pid > 0 and w.status != "cheap"}


def reloaded_since(before: Frame, frame: Frame, threads: int | None, processes: int) -> bool:
    """Whether `frame` shows a reload since `before`. The counters say so, or they missed it
    (a poll that caught the workers not yet spawned hides their reset) and a value only a
    reload changes now reads as wanted, or every live worker is new while we sent only `r`."""
    if frame.kind in ("reload", "restart") or frame.reloads_seen > before.reloads_seen:
        return True
    threads_now = threads is not None and before.threads != threads == frame.threads
    processes_now = before.workers_max != processes == frame.workers_max
    now, then = _live_pids(frame), _live_pids(before)
    return threads_now or processes_now or bool(now and then and not now & then)


class Reloader:
    def __init__(
        self,
        fifo: MasterFifo,
        override_path: Path,
        user_ini: Path | None,
        poll: Callable[[], Frame],
        *,
        interval: float = 0.25,
        sleep: Callable[[float], None] = time.sleep,
        mono: Callable[[], float] = time.monotonic,
        halt: Halt | None = None,
        statuses: Statuses | None = None,
        lock: ApplyLock | None = None,
    ) -> None:
        self.fifo = fifo
        self.lock = lock  # held: marks a pause under way, for a next holder (actuate/lock.py)
        self.statuses = statuses or statuses_of(poll)
        self.said = ""  # what the last reload's wait did beside waiting
        self.halt = halt
        self.path = Path(override_path)
        self.user_ini = user_ini
        self.poll = poll
        self.interval = interval
        self._sleep = sleep
        self._mono = mono

    def apply(
        self,
        ov: Override,
        before: Frame,
        limits: Limits,
        deadline: float,
        intent: Callable[[], str | None] = lambda: None,
    ) -> ReloadOutcome:
        """Validate, write, reload, verify. Raises OverrideError before writing anything.
        `intent()` is called once validated, just before the write (the audit's intent
        record); what it returns stops the change there, as an OverrideError."""
        config = plan(self.user_ini, self.path, ov, limits, before.master_pid)
        self.fifo.check(before.master_pid)  # before writing: the `r` must be deliverable
        problem = intent()
        if problem:
            raise OverrideError(problem)
        write_atomic(self.path, ov.render())
        start, self.said = self._mono(), ""
        vassal = under_emperor(before.master_pid)
        try:
            paused = self.reload(before, config)
        except FifoError as exc:
            restore(self.path)
            return ReloadOutcome(False, f"`r` not delivered ({exc}); override restored", 0, True)
        frame = self._wait(ov, before, start + deadline, paused is not None)
        took = self._mono() - start
        if frame is not None:
            what = f"reloaded in {took:.1f}s" + (" (an Emperor vassal)" if vassal else "")
            what += (f"; {paused.line()}" if paused else "") + self.said
            return ReloadOutcome(True, what, took, frame=frame)
        return self._roll_back(ov, before, took, deadline)

    def reload(self, before: Frame, config: dict[str, str] | None = None) -> Quiesced | None:
        """`r`, the workers paused first where that protects them. Raises FifoError when
        `r` was not delivered, once the pause is undone. `config`: the user's, if known."""
        paused, left, sent = None, False, False
        pid = before.master_pid
        # a mark an earlier holder left for this master, not yet acted on: only an `r` ends it
        had = self.lock is not None and pid in self.lock.marks
        config = config if config is not None else self._config()
        try:
            if not pause_unsafe(config, pid):
                if self.lock is not None:  # killed from here to the `r`: the pool stays paused
                    self.lock.mark_reload(pid, time.time())
                paused = quiesce(self.fifo, before, self.statuses, self._nap, self._mono)
            self.fifo.send("r", pid)
            sent = True
        except FifoError as exc:
            if paused is None:
                raise
            why = undo(self.fifo, pid)
            left = why != UNDONE  # still paused: the mark stays for a next holder
            raise FifoError(f"{exc}{why}") from None
        finally:
            if self.lock is not None and (sent or not (left or had)):
                self.lock.clear_reload(pid)
        return paused

    def _config(self) -> dict[str, str] | None:
        try:
            return None if self.user_ini is None else load_config(self.user_ini)
        except (IniError, OSError):
            return None

    def _wait(
        self, ov: Override, before: Frame, until: float, paused: bool = False
    ) -> Frame | None:
        reloaded = False
        while self._mono() < self._until(until):
            self._nap()
            frame = self.poll()
            if frame.kind == "error":
                continue
            reloaded = reloaded or reloaded_since(before, frame, ov.threads, ov.processes)
            if paused and reloaded and 0 < frame.live == frame.paused:
                # New workers that start paused (`lazy` where it was not seen): resume.
                paused = resume(self.fifo, frame.master_pid) is not None
                self.said += "" if paused else "; the new workers started paused: resumed"
            if (
                reloaded
                and frame.master_pid == before.master_pid
                and frame.workers_max == ov.processes
                and frame.live == ov.cheaper_initial
                and (ov.threads is None or frame.threads == ov.threads)
            ):
                return frame
        return None

    def _nap(self, seconds: float | None = None) -> None:
        seconds = self.interval if seconds is None else seconds
        if self.halt is None:
            self._sleep(seconds)
        else:
            self.halt.pause(seconds, self._sleep)

    def _until(self, until: float) -> float:
        return until if self.halt is None else self.halt.until(until)

    def _roll_back(
        self, ov: Override, before: Frame, took: float, deadline: float
    ) -> ReloadOutcome:
        restored = restore(self.path)
        what = f"not back with processes={ov.processes}, {ov.cheaper_initial} live"
        halted = self.halt is not None and self.halt.is_set()
        what += f" within {deadline:g}s" if not halted else " when uwsgitune was stopped"
        what += self.said
        try:
            if restored:  # a plain `r`: no pause whose end this path would not see
                self.fifo.send("r", before.master_pid)
                what += "; previous override restored and reloaded"
        except FifoError as exc:
            what += f"; previous override restored, reload impossible ({exc})"
        return ReloadOutcome(False, what, took, restored, interrupted=halted)
