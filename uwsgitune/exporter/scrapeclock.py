"""When the next scrape is due, from when the last ones came.

Prometheus scrapes a target at a fixed interval and a fixed offset, so the next scrape
comes one interval after the last. An instance whose next poll would end after that renders
its metrics at the end of this poll, in its own poll thread, and the scrape only serves the
bytes (`exposition.py`). Scraped more often than polled, every poll renders, once; never
scraped, or no longer (3 intervals without one), none does: the scrape renders what it
needs. Irregular scrapers (two Prometheus servers) are predicted less well, which costs a
render at the scrape, never a wrong answer: what is served is always the latest poll's.
"""

from __future__ import annotations

import itertools
import statistics
import threading
from collections import deque

GAPS = 5  # gaps between scrapes the interval is the median of
GONE = 3.0  # intervals without a scrape after which no one is expected
AHEAD = 1.2  # a poll renders when a scrape is due within this many of its poll intervals


class ScrapeClock:
    def __init__(self) -> None:
        self._times: deque[float] = deque(maxlen=GAPS + 1)
        self._lock = threading.Lock()

    def scraped(self, now: float) -> None:
        """A scrape arrived at `now` (monotonic seconds)."""
        with self._lock:
            self._times.append(now)

    def due(self, now: float, within: float) -> bool:
        """Whether a scrape is expected by `now + within`: it is, too, when one is late."""
        with self._lock:
            times = list(self._times)
        if len(times) < 2:
            return False
        interval = statistics.median(b - a for a, b in itertools.pairwise(times))
        since = now - times[-1]
        return since + within >= interval and since <= GONE * max(interval, within)
