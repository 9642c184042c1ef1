"""A bounded history of frames for one instance: what rules and charts look back on."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from uwsgitune.core.frame import Frame


class Window:
    """The last `seconds` of frames (by their own timestamps), at most `maxlen` of them."""

    def __init__(self, seconds: float = 600.0, maxlen: int = 7200) -> None:
        self.seconds = seconds
        self._frames: deque[Frame] = deque(maxlen=maxlen)

    def add(self, frame: Frame) -> None:
        self._frames.append(frame)
        horizon = frame.mono - self.seconds
        while self._frames and self._frames[0].mono < horizon:
            self._frames.popleft()

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
