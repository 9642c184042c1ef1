"""A bounded history of frames for one instance: what rules and charts look back on.

With `whole` set (the daemon), only the newest `whole` frames, and the newest frame with
rates, keep their worker views: older frames are compacted (`core/compact.py`) once a newer
frame with rates arrives. That newest rated frame is what the rules read as the latest
(`stuck_requests` reads its requests), however many failed or reload polls came after it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from uwsgitune.core.compact import HistoryFrame, compact
from uwsgitune.core.frame import Frame

# The newest frames a compact window keeps whole (the daemon's, `tune`'s): the latest and the
# one before it; every reader of older frames reads what a compact frame keeps.
WHOLE_FRAMES = 2


class Window:
    """The last `seconds` of frames (by their own timestamps), at most `maxlen` of them
    (None: no count bound); all but the newest `whole` compact (None: every frame whole)."""

    def __init__(
        self, seconds: float = 600.0, maxlen: int | None = 7200, whole: int | None = None
    ) -> None:
        self.seconds = seconds
        self.whole = whole
        self._frames: deque[Frame] = deque(maxlen=maxlen)

    def add(self, frame: Frame) -> None:
        self._frames.append(frame)
        if self.whole is not None and frame.has_rates:
            self._compact(len(self._frames) - 1 - max(self.whole, 1))
        horizon = frame.mono - self.seconds
        while self._frames and self._frames[0].mono < horizon:
            self._frames.popleft()

    def _compact(self, end: int) -> None:
        """Compact the whole frames up to index `end`, oldest first (each shares what it
        can with the compact frame before it)."""
        frames = self._frames
        start = end
        while start >= 0 and not isinstance(frames[start], HistoryFrame):
            start -= 1
        for i in range(start + 1, end + 1):
            frames[i] = compact(frames[i], frames[i - 1] if i > 0 else None)

    def __iter__(self) -> Iterator[Frame]:
        return iter(self._frames)

    def __len__(self) -> int:
        return len(self._frames)

    @property
    def latest(self) -> Frame | None:
        return self._frames[-1] if self._frames else None

    def last(self, seconds: float) -> list[Frame]:
        """Frames within `seconds` of the latest one."""
        if not self._frames:
            return []
        edge = self._frames[-1].mono - seconds
        return [f for f in self._frames if f.mono >= edge]

    def frames(self) -> tuple[Frame, ...]:
        return tuple(self._frames)
