"""Poll threads for the TUI: each instance is stepped on its own schedule, off the UI thread.

A poll (connect, read, parse, sample the host) can take up to the watch's timeout; it must
never block the screen. Each loop builds one frozen `Snapshot` (the frame, a copy of the
history and the annotations) and hands it to `deliver`, which posts it to the app.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from uwsgitune.core.frame import Frame
from uwsgitune.tui.warnings import Annotation, builtin_warnings

if TYPE_CHECKING:
    from uwsgitune.tui.tuning import TuiTuner, TunerView

MAX_WAIT = 0.5  # seconds between checks of `stop`, and the longest a rate change waits


class Window(Protocol):
    def frames(self) -> tuple[Frame, ...]: ...


class Watch(Protocol):
    """What the TUI needs of `uwsgitune.sources.watcher.InstanceWatch`."""

    interval: float
    next_due: float

    @property
    def window(self) -> Window: ...

    def step(self) -> Frame: ...

    def due(self) -> bool: ...


Annotate = Callable[[Sequence[Frame]], list[Annotation]]


@dataclass(frozen=True, eq=False)
class Snapshot:
    """Everything a pane shows for one instance at one poll (compared by identity)."""

    index: int
    frame: Frame
    frames: tuple[Frame, ...]
    annotations: tuple[Annotation, ...] = ()
    retry_in: float | None = None  # seconds to the next attempt while disconnected
    tuner: TunerView | None = None  # with `watch --fifo`: the tuner's advice


def make_snapshot(
    index: int,
    watch: Watch,
    frame: Frame,
    annotate: Annotate,
    now: float,
    tuner: TunerView | None = None,
) -> Snapshot:
    from uwsgitune.tui.tuning import tuner_annotation

    frames = watch.window.frames()
    retry = max(0.0, watch.next_due - now) if frame.kind == "error" else None
    notes = annotate(frames)
    extra = tuner_annotation(tuner) if tuner is not None else None
    if extra is not None:
        notes = [extra, *notes]
    return Snapshot(index, frame, frames, tuple(notes), retry, tuner)


class PollLoop:
    """Steps one watch until stopped. `run` is the body of a thread."""

    def __init__(
        self,
        index: int,
        watch: Watch,
        deliver: Callable[[Snapshot], None],
        *,
        annotate: Annotate = builtin_warnings,
        mono: Callable[[], float] = time.monotonic,
        tuner: TuiTuner | None = None,
    ) -> None:
        self.index = index
        self.tuner = tuner
        self.watch = watch
        self.deliver = deliver
        self.annotate = annotate
        self.stop_event = threading.Event()
        self.wake = threading.Event()
        self._mono = mono

    def run(self) -> None:
        while not self.stop_event.is_set():
            if self.watch.due():
                frame = self.watch.step()
                view = self.tuner.step(frame) if self.tuner is not None else None
                if self.stop_event.is_set():
                    break
                self.deliver(
                    make_snapshot(self.index, self.watch, frame, self.annotate, self._mono(), view)
                )
            delay = max(0.0, self.watch.next_due - self._mono())
            self.wake.wait(min(delay, MAX_WAIT))
            self.wake.clear()

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
