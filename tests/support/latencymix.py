"""Latency views for the TUI's tests: a real recorder fed a minute of varied traffic (routes of
different weights and speeds, four workers, one slower), read as the stage reads it."""

from __future__ import annotations

import math
import random
from typing import Any

from tests.support.latency import T0, log_line, recorder_with, view_of
from uwsgitune.core.latencyreport import LatencyView

# (path, median service ms, requests per second): 12 routes, so that the slowest ten show
# and the rest fold into "other".
ROUTES = (
    ("/report/monthly", 400.0, 1),
    ("/api/orders", 60.0, 8),
    ("/api/users/12345", 20.0, 12),
    ("/search", 90.0, 3),
    ("/", 5.0, 20),
    ("/static/app.css", 1.0, 10),
    ("/api/cart", 30.0, 4),
    ("/login", 45.0, 2),
    ("/health", 0.5, 5),
    ("/feed", 25.0, 3),
    ("/about", 3.0, 1),
    ("/terms", 2.0, 1),
)


def traffic_view(
    *,
    seconds: int = 60,
    now: float = 1000.0,
    stamped: bool = False,
    slow_worker: int | None = 3,
    seed: int = 7,
    **view: Any,
) -> LatencyView:
    """A minute of the `ROUTES` mix on workers 1-4 (`slow_worker` twice as slow); queue waits
    stamped by the proxy when `stamped`."""
    rng = random.Random(seed)
    batches = []
    for k in range(seconds):
        t = now - seconds + 1 + k
        start = T0 + int(t * 1e6)
        lines = []
        for path, median_ms, rps in ROUTES:
            for i in range(rps):
                wid = 1 + (k + i) % 4
                service = rng.lognormvariate(math.log(median_ms * 1000), 0.5)
                if wid == slow_worker:
                    service *= 2
                wait = int(rng.lognormvariate(math.log(2000), 0.8)) if stamped else None
                lines.append(
                    log_line(max(1, int(service)), start_us=start, wid=wid, path=path, wait_us=wait)
                )
        batches.append((t, lines))
    return view_of(recorder_with(batches), now, **view)
