"""The app of the latency benchmarks (bench/latency_accuracy.py, latency_overhead.py,
latency_harm.py): a known spread of service times, and a trivial route.

Routes:
- `/spread`: lognormal CPU work (median 2 ms, sigma 0.8, capped at 40 ms), then a lognormal
  IO wait (median 4 ms, sigma 1.0, capped at 200 ms): a right-skewed spread with a tail,
  as real traffic has. Each worker draws from its own seeded generator.
- `/hello` (or anything else): a tiny answer, the trivial route of the cost benchmarks.

Every answer echoes the request's `X-Request-Start` header, so that wrk's Lua can match an
answer to its request (bench/latency_wrk_gap.lua).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

CPU_MEDIAN_MS, CPU_SIGMA, CPU_CAP_MS = 2.0, 0.8, 40.0
IO_MEDIAN_MS, IO_SIGMA, IO_CAP_MS = 4.0, 1.0, 200.0

_rng = random.Random(os.getpid())


def burn(ms: float) -> int:
    end = time.thread_time() + ms / 1000.0
    n = 0
    while time.thread_time() < end:
        for i in range(100):
            n += i * i
    return n


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    if environ.get("PATH_INFO") == "/spread":
        burn(min(CPU_CAP_MS, _rng.lognormvariate(0.0, CPU_SIGMA) * CPU_MEDIAN_MS))
        time.sleep(min(IO_CAP_MS, _rng.lognormvariate(0.0, IO_SIGMA) * IO_MEDIAN_MS) / 1e3)
    headers = [("Content-Type", "text/plain"), ("Content-Length", "3")]
    stamp = environ.get("HTTP_X_REQUEST_START")
    if stamp:  # echoed, so that a load generator can match each answer to its request
        headers.append(("X-Request-Start", stamp))
    start_response("200 OK", headers)
    return [b"ok\n"]
