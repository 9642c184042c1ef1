"""Latency views for pure tests of the sinks, the rules and the tuner: a real
`LatencyRecorder` fed request log lines, read as `pipeline/latencystage.py` reads it."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from types import ModuleType

from uwsgitune.core.latency import LatencyRecorder
from uwsgitune.core.latencyreport import LatencyView

T0 = 1_795_732_664_000_000  # µs since the epoch: the app's clock


def log_line(
    service_us: int,
    *,
    start_us: int = T0,
    status: int = 200,
    wid: int = 1,
    path: str = "/",
    wait_us: int | None = None,
    method: str = "GET",
) -> bytes:
    """One request log datagram as uWSGI sends it with the doctor's format; `wait_us`: the
    proxy stamped the request that long before the worker took it (nginx's t=${msec})."""
    stamp = "-"
    if wait_us is not None:
        ms = (start_us - wait_us) // 1000
        stamp = f"t={ms // 1000}.{ms % 1000:03d}"
    return (
        f'127.0.0.1 "{method} {path} HTTP/1.1" uwt1 {start_us} {service_us} {status} {wid} '
        f"{4000 + wid} {method} [{stamp}] {path}\n"
    ).encode()


def recorder_with(
    lines_by_second: Iterable[tuple[float, Iterable[bytes]]], top: int = 10
) -> LatencyRecorder:
    rec = LatencyRecorder(top)
    for now, lines in lines_by_second:
        rec.ingest(lines, now)
    return rec


def view_of(
    rec: LatencyRecorder,
    now: float,
    *,
    coverage: float | None = 1.0,
    trusted: bool = True,
    little_wait_ms: float | None = None,
    address: str = "127.0.0.1:9118",
) -> LatencyView:
    """What `LatencyStage.view` builds, from a recorder and the figures only the stats know."""
    return LatencyView(
        address=address,
        short=rec.window(now, 10),
        long=rec.window(now, 60),
        p99_series=rec.p99_series(now, 60),
        export=rec.export(),
        lines=rec.recorded,
        coverage=coverage,
        trusted=trusted,
        trust_note=None if trusted else "request log sender not proved (a test)",
        faults={k.name.lower(): n for k, n in rec.tally.faults.items() if n},
        mismatch=rec.tally.mismatch(),
        little_wait_ms=little_wait_ms,
        silent_for=0.0,
    )


def lognormal_view(
    *,
    seconds: int = 60,
    rps: int = 100,
    median_us: float = 20_000,
    sigma: float = 0.6,
    wait_median_us: float | None = None,
    workers: int = 4,
    seed: int = 1,
    now: float = 1000.0,
    **view: object,
) -> LatencyView:
    """A steady minute of lognormal service times (and queue waits when `wait_median_us`)."""
    import math

    rng = random.Random(seed)
    batches = []
    for k in range(seconds):
        t = now - seconds + 1 + k
        lines = []
        for i in range(rps):
            service = max(1, int(rng.lognormvariate(math.log(median_us), sigma)))
            wait = None
            if wait_median_us is not None:
                wait = max(0, int(rng.lognormvariate(math.log(wait_median_us), sigma)))
            lines.append(log_line(service, wid=1 + i % workers, wait_us=wait))
        batches.append((t, lines))
    return view_of(recorder_with(batches), now, **view)  # type: ignore[arg-type]


@contextmanager
def python_path(module: ModuleType, name: str) -> Iterator[None]:
    """`module`'s C helper `name` switched off (its Python code runs) for the block."""
    saved = getattr(module, name)
    setattr(module, name, None)
    try:
        yield
    finally:
        setattr(module, name, saved)
