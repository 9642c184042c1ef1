"""The demo app plus routes for the benchmarks and the recorded rule scenarios.

- `/leak/N`: keeps N KiB per request for the life of the worker (a leak).
- `/ws/N/MIB[/IO]`: a fixed amount of work over a per-process working set, then IO ms of
  waiting: N random reads over a MIB MiB buffer the worker keeps (a real app's heap: ORM
  caches, templates, parsed config). The work is fixed, not its CPU time, so a worker that
  finds its cache cold after a context switch takes longer: with many more runnable workers
  than CPUs, throughput falls, as in production (100 workers served ~280 req/s on 4 cores
  where 6 served 449).
- `/lnio/M[/S]`: a lognormal wait, median M ms, sigma S/100 (default 60), capped at 20 M: an
  IO-bound request with a spread, as real traffic has (bench/tuner_target_bench.py). Each
  worker draws from its own generator, seeded by its pid.
Every other route is the demo app's (`/cpu/N`, `/io/N`, `/error`, ...).
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterable
from typing import Any

from uwsgitune.demo.webapp import application as demo

_kept: list[bytes] = []
_rng = random.Random()
_heap: dict[str, Any] = {}


def _working_set(mib: int) -> tuple[bytearray, list[int]]:
    if _heap.get("mib") != mib:
        rnd = random.Random(7)
        _heap["buf"] = bytearray(rnd.getrandbits(8) for _ in range(1024)) * (mib * 1024)
        _heap["idx"] = [rnd.randrange(0, mib << 20, 64) for _ in range(200_000)]
        _heap["mib"] = mib
    return _heap["buf"], _heap["idx"]


def _ws(parts: list[str]) -> None:
    n = int(parts[1]) if len(parts) > 1 else 10_000
    buf, idx = _working_set(int(parts[2]) if len(parts) > 2 else 32)
    total = 0
    for i in idx[:n]:
        total += buf[i]
    if len(parts) > 3:
        time.sleep(float(parts[3]) / 1000)


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    parts = environ.get("PATH_INFO", "/").strip("/").split("/")
    if parts[0] == "leak":
        size = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 1024
        _kept.append(b"x" * (size * 1024))  # bytes that are written, so RSS grows
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
        return [b"ok\n"]
    if parts[0] == "lnio":
        if _heap.get("pid") != os.getpid():  # forked workers: one generator each
            _heap["pid"] = os.getpid()
            _rng.seed(os.getpid())
        median = float(parts[1]) if len(parts) > 1 else 30.0
        sigma = float(parts[2]) / 100 if len(parts) > 2 else 0.6
        time.sleep(min(20 * median, _rng.lognormvariate(0.0, sigma) * median) / 1000)
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
        return [b"ok\n"]
    if parts[0] == "ws":
        _ws(parts)
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "3")])
        return [b"ok\n"]
    return demo(environ, start_response)
