"""What a long wait is waiting for, on a terminal: rich's progress bar and status line.

A command that waits more than a few seconds says what it waits for and how long is left:
`recommend`'s observation window, a sweep's steps, a reload's or a restart's verification
in `tune`. Only on a terminal (stderr a TTY): off one (a pipe, a log, systemd) nothing is
drawn and nothing changes in what is printed. The bar is drawn on stderr; what the command
prints meanwhile goes above it (rich's live display takes stdout and stderr while it runs).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.status import Status

from uwsgitune.pipeline import InstanceState

TICK = 0.25  # seconds between redraws of a timed bar


def on_terminal() -> bool:
    return sys.stderr.isatty()


@contextmanager
def timed(label: str, seconds: float, *, show: bool | None = None) -> Iterator[None]:
    """A bar that fills over `seconds` while the block runs: "label ━━━━━  0:00:37 left"."""
    if not (on_terminal() if show is None else show) or seconds <= 0:
        yield
        return
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TimeRemainingColumn(),
        TextColumn("left"),
        console=Console(stderr=True),
        transient=True,
    )
    task = progress.add_task(label, total=seconds)
    start, done = time.monotonic(), threading.Event()

    def tick() -> None:
        while not done.wait(TICK):
            progress.update(task, completed=min(time.monotonic() - start, seconds))

    ticker = threading.Thread(target=tick, name="progress", daemon=True)
    with progress:
        ticker.start()
        try:
            yield
        finally:
            done.set()
            ticker.join(1.0)


class WaitLine:
    """A driver's subscriber for `tune`: while the tuner's apply waits (a reload, a
    restart), one status line says for what and how long is left; it goes when the wait
    ends. Nothing off a terminal."""

    def __init__(
        self,
        mono: Callable[[], float] = time.monotonic,
        show: bool | None = None,
        console: Console | None = None,
    ) -> None:
        self._mono = mono
        self._show = on_terminal() if show is None else show
        self._console = console
        self._status: Status | None = None
        self.said: list[str] = []  # every line shown, in order

    def __call__(self, state: InstanceState) -> None:
        if not self._show:
            return
        w = state.waiting
        if w is None:
            self.close()
            return
        text = f"waiting for {w.what}: {max(0.0, w.until - self._mono()):.0f}s left"
        self.said.append(text)
        if self._status is None:
            self._status = Status(text, console=self._console or Console(stderr=True))
            self._status.start()
        else:
            self._status.update(text)

    def close(self) -> None:
        if self._status is not None:
            self._status.stop()
            self._status = None
