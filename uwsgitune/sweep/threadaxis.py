"""The threads axis of `sweep --threads`: threads per worker through the override ini uwsgitune
owns and a validated reload (`uwsgitune.actuate.reload`), and the original put back at the end.

Threads only change at a reload (`r` re-reads the ini; the master keeps its pid). Every value
is validated with the user's merged ini before the sweep starts (`check`), and again before
each write, so a configuration uWSGI would refuse is never reloaded. The restore writes the
override file back byte for byte, reloads, waits for the original threads, and leaves the
live count to the caller (a reload resets it to `cheaper-initial`). Neither reload happens
while `refusal` has a reason (the stats socket's peer is not the master's uid).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from uwsgitune.actuate.override import (
    Override,
    as_int,
    check_override,
    decode_or_refuse,
    load_config,
    override_bytes,
    write_atomic,
)
from uwsgitune.actuate.reload import Limits, Reloader, plan, reload_deadline, reloaded_since
from uwsgitune.core.frame import Frame
from uwsgitune.sweep.live import SweepError

RELOAD_DEADLINE = 30.0
TRUE = ("1", "true", "yes", "on", "")


class ThreadsError(SweepError):
    """A threads change that cannot or did not happen; the message names the fix."""


def parse_threads(text: str) -> tuple[int, ...]:
    """`1,2,4,8`: the thread counts per worker, ascending."""
    try:
        values = tuple(sorted({int(v) for v in text.split(",") if v.strip()}))
    except ValueError:
        values = ()
    if not values:
        err = ThreadsError(f"--threads {text}: write a list of thread counts like 1,2,4,8")
        err.code = 2  # bad input
        raise err
    return values


@dataclass(frozen=True)
class Original:
    text: bytes  # the override file as found
    threads: int
    processes: int
    cheaper: int
    algo: str
    listen: int | None


@dataclass
class ThreadAxis:
    reloader: Reloader
    user_ini: Path
    limits: Limits
    poll: Callable[[], Frame]
    original: Original | None = None
    deadline: float = RELOAD_DEADLINE  # raised to the ini's worker-reload-mercy + 15 s by check()
    refusal: Callable[[], str | None] = field(default=lambda: None)
    mono: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep

    def check(self, frame: Frame, values: tuple[int, ...]) -> None:
        """Raise (before anything changes) unless every value can be reloaded safely."""
        config = load_config(self.user_ini)
        check_override(self.reloader.path)  # a link or a second name: refused now
        text = override_bytes(self.reloader.path) or b""
        decode_or_refuse(text, self.reloader.path)  # not UTF-8: refused now, not mid-sweep
        self.deadline = reload_deadline(RELOAD_DEADLINE, config)
        on = config.get("enable-threads", "false").strip().lower() in TRUE
        if not on and (as_int(config, "threads", 1) or 1) <= 1:
            raise ThreadsError(
                f"{self.user_ini}: enable-threads is off; add `enable-threads = true` and "
                "restart: threads > 1 turn it on, so the threads = 1 runs would compare "
                "another setup"
            )
        self.original = Original(
            text=text,
            threads=frame.threads,
            processes=frame.workers_max,
            cheaper=as_int(config, "cheaper", 1) or 1,
            algo=config.get("cheaper-algo", "manual"),
            listen=as_int(config, "listen"),
        )
        for t in values:
            plan(
                self.user_ini,
                self.reloader.path,
                self._override(t, frame.live),
                self.limits,
                frame.master_pid,
            )

    def _override(self, threads: int, live: int) -> Override:
        o = self.original
        assert o is not None
        initial = max(o.cheaper, min(live, o.processes))
        return Override(o.processes, o.cheaper, initial, o.algo, o.listen, threads)

    def set(self, threads: int, before: Frame) -> Frame:
        """Reload with `threads` per worker; the frame once it is back, else ThreadsError."""
        self._refuse()
        ov = self._override(threads, before.live)
        out = self.reloader.apply(ov, before, self.limits, self.deadline)
        if not out.ok or out.frame is None:
            raise ThreadsError(f"reload to threads = {threads} failed: {out.detail}")
        return out.frame

    def _refuse(self) -> None:
        refused = self.refusal()
        if refused is not None:
            raise ThreadsError(refused)

    def restore(self) -> Frame | None:
        """The original override back, reloaded, with the original threads; None if unchanged."""
        o = self.original
        path = self.reloader.path
        if o is None or override_bytes(path) == o.text:
            return None
        before = self.poll()
        self._refuse()
        write_atomic(path, o.text.decode(), keep_prev=False)
        self.reloader.reload(before)
        deadline, seen = self.mono() + self.deadline, False
        while self.mono() < deadline:
            self.sleep(0.25)
            frame = self.poll()
            seen = seen or reloaded_since(before, frame, o.threads, o.processes)
            back = seen and frame.ok and frame.master_pid == before.master_pid and frame.live
            if back and frame.threads == o.threads and frame.workers_max == o.processes:
                return frame
        raise ThreadsError(
            f"after restoring {path}, the instance did not come back with {o.threads} "
            f"threads within {self.deadline:g}s; check its log"
        )
