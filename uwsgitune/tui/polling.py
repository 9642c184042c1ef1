"""Poll threads for the TUI: each instance's pipeline is stepped on its own schedule, off the
UI thread.

A poll (connect, read, parse, sample the host, rules, tuner) can take up to the watch's
timeout; it must never block the screen. Each step publishes one frozen `InstanceState`,
handed to `deliver` with the instance's index, which posts it to the app.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from uwsgitune.core.frame import Frame
from uwsgitune.pipeline import InstancePipeline, InstanceState

MAX_WAIT = 0.5  # seconds between checks of `stop`, and the longest a rate change waits


class PollLoop:
    """Steps one pipeline until stopped. `run` is the body of a thread."""

    def __init__(
        self,
        index: int,
        pipeline: InstancePipeline,
        deliver: Callable[[int, InstanceState], None],
        *,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.index = index
        self.pipeline = pipeline
        self.watch = pipeline.watch
        self.deliver = deliver
        self.stop_event = threading.Event()
        self.wake = threading.Event()
        self._mono = mono

    def run(self) -> None:
        while not self.stop_event.is_set():
            if self.watch.due():
                state = self.pipeline.step()
                if self.stop_event.is_set():
                    break
                self.deliver(self.index, state)
            delay = max(0.0, self.watch.next_due - self._mono())
            self.wake.wait(min(delay, MAX_WAIT))
            self.wake.clear()

    def poll_and_show(self) -> Frame:
        """A poll from inside a step (the tuner's apply waiting on a reload): published by
        the pipeline and delivered at once, so the screen never freezes on the last step."""
        frame = self.pipeline.poll()
        if not self.stop_event.is_set():
            self.deliver(self.index, self.pipeline.state)
        return frame

    def set_interval(self, interval: float) -> None:
        """A new refresh rate, from the next poll (which comes no later than now + interval)."""
        self.watch.interval = interval
        self.watch.next_due = min(self.watch.next_due, self._mono() + interval)
        self.wake.set()

    def poll_now(self) -> None:
        """Poll at once (the tuner's apply key: act on fresh stats, not on the last poll)."""
        self.watch.next_due = self._mono()
        self.wake.set()

    def stop(self) -> None:
        self.stop_event.set()
        self.wake.set()
