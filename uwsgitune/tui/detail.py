"""The worker detail (Enter on a row): current requests, respawns, memory trend, and the
worker's percentiles with the request log (`watch --latency`). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from uwsgitune.core.frame import Frame, WorkerView
from uwsgitune.core.latencyreport import LatencyView
from uwsgitune.core.units import duration, ms, num, size
from uwsgitune.tui.percentiles import worker_lines
from uwsgitune.tui.sparklines import recent, worker_series


def find_worker(f: Frame, slot: int) -> WorkerView | None:
    return f.workers[slot] if 0 <= slot < len(f.workers) else None


def _rss(f: Frame, slot: int) -> float | None:
    w = find_worker(f, slot)
    return None if w is None or w.rss is None else float(w.rss)


def _rps(f: Frame, slot: int) -> float | None:
    w = find_worker(f, slot)
    return None if w is None else w.rps


def memory_trend(frames: Sequence[Frame], slot: int) -> tuple[list[float], str]:
    """RSS of one slot over the history, and a one-line reading of it."""
    values = worker_series(recent(frames), slot, _rss)
    if not values:
        return [], "memory unknown (enable memory-report, or psutil cannot read the pid)"
    first, last = values[0], values[-1]
    growth = (last - first) / first * 100 if first else 0.0
    line = (
        f"RSS {size(last)}  min {size(min(values))}  max {size(max(values))}  "
        f"{growth:+.1f}% over {len(values)} polls"
    )
    return values, line


def request_lines(w: WorkerView) -> list[Text]:
    if not w.requests_in_flight:
        return [Text("  no request in service", style="dim")]
    out = []
    for r in w.requests_in_flight:
        out.append(
            Text.assemble(
                f"  core {r.core}: ",
                (f"{r.method or '?'} ", "bold"),
                r.path or "?",
                (f"  for {duration(r.age)}", "yellow"),
            )
        )
    return out


def detail_lines(
    frames: Sequence[Frame], slot: int, latency: LatencyView | None = None
) -> list[Text]:
    """Every line of the detail screen for one worker slot; with the request log
    (`latency`), the worker's percentiles too."""
    if not frames:
        return [Text("no data yet")]
    f = frames[-1]
    w = find_worker(f, slot)
    if w is None:
        return [Text(f"worker slot {slot} is gone (the instance has fewer workers now)")]
    spawned = f.t - w.last_spawn if w.last_spawn > 0 else None
    _, mem = memory_trend(frames, slot)
    return [
        Text.assemble(
            (f"worker {w.id or slot + 1}", "bold"), f"  pid {w.pid or '-'}  ", (w.status, "bold")
        ),
        Text("current request (method, path, age; request vars are never shown):"),
        *request_lines(w),
        Text(
            f"requests {w.requests}  {num(w.rps)} req/s  exceptions {w.exceptions}  "
            f"busy {num(w.busy_pct, '.0f')}%  cpu {num(w.cpu_pct, '.0f')}%"
        ),
        Text(
            f"mean {ms(w.mean_rt_ms)}  uWSGI avg_rt (half-life) {ms(w.avg_rt_us / 1000)}  "
            f"busy time {duration(w.running_time_us / 1e6)}"
        ),
        Text(
            f"respawns {w.respawn_count}  harakiri {w.harakiri_count}  "
            f"last spawn {duration(spawned)} ago"
        ),
        Text(f"memory: {mem}"),
        Text(f"VSZ {size(w.vsz)}  TX {size(w.tx)}"),
        *worker_lines(latency, w.id or slot + 1),
    ]


def rps_trend(frames: Sequence[Frame], slot: int) -> list[float]:
    return worker_series(recent(frames), slot, _rps)
