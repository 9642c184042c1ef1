"""Keep watching one instance: poll on schedule, back off while it is unreachable.

Used the same way by `watch --plain`, the TUI and the daemon. The schedule runs on the
monotonic clock, so a wall-clock jump neither stalls nor floods the polls.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from uwsgitune.core.address import StatsAddress
from uwsgitune.core.derive import Tracker
from uwsgitune.core.frame import Frame
from uwsgitune.core.samples import Poll
from uwsgitune.core.window import Window
from uwsgitune.sources.host import HostSampler
from uwsgitune.sources.poller import Observer

BACKOFF_CAP = 30.0


def backoff_delay(interval: float, failures: int, cap: float = BACKOFF_CAP) -> float:
    """1, 2, 4 ... intervals after consecutive failures, never more than `cap` seconds."""
    if failures <= 0:
        return interval
    return min(interval * 2.0 ** min(failures - 1, 32), max(cap, interval))


class InstanceWatch:
    """One instance: an observer, its tracker, its window, and when to poll next."""

    def __init__(
        self,
        address: StatsAddress,
        *,
        interval: float = 1.0,
        timeout: float | None = None,
        window_seconds: float = 600.0,
        whole_frames: int | None = None,
        host: HostSampler | None = None,
        mono: Callable[[], float] = time.monotonic,
        on_poll: Callable[[Poll, bytes | None], None] | None = None,
    ) -> None:
        self.address = address
        self.interval = interval
        self.observer = Observer(
            address, timeout=timeout or min(max(interval, 0.5), 5.0), host=host, mono=mono
        )
        self.tracker = Tracker(str(address))
        self.window = Window(window_seconds, whole=whole_frames)  # None: no compact frames
        self.failures = 0
        self.next_due = 0.0
        self._mono = mono
        self._on_poll = on_poll
        self.last_poll: Poll | None = None  # the poll behind the latest frame

    @property
    def frame(self) -> Frame | None:
        return self.window.latest

    def step(self) -> Frame:
        """Poll now, fold the result, schedule the next poll."""
        poll = self.observer.poll()
        self.last_poll = poll
        if self._on_poll is not None:
            self._on_poll(poll, self.observer.last_raw if poll.ok else None)
        frame = self.tracker.update(poll)
        self.window.add(frame)
        self.failures = 0 if poll.ok else self.failures + 1
        self.next_due = self._mono() + backoff_delay(self.interval, self.failures)
        return frame

    def due(self) -> bool:
        return self._mono() >= self.next_due
