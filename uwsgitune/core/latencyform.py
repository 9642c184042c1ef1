"""The plain form of a `LatencyView`: what `watch --json` prints and a recording keeps. Pure.

`latency_summary(view)` is `dataclasses.asdict` of the frozen view without its Prometheus
export: the 10 s and 60 s windows (service and queue percentiles, workers, routes, status
classes, stamps), the p99 series, the lines recorded, coverage, trust, refusals, faults,
the format mismatch, the Little's-law estimate, the silence and the sampling (1 in K).
Times stay in ms and counts raw (machine outputs never read in human units); floats keep 4
decimals (0.1 µs), enough for a percentile within 0.5%. There is no request in it: the
recorder keeps none.

The export is left out because it is cumulative and large (a histogram of 46 buckets per
exported route, up to 50 routes): the windows carry what a person reads. `view_from_summary`
rebuilds the view a replay shows from that form, with an empty export, and tolerates a
newer writer's fields (ignored) and an older one's missing fields (their defaults), as the
recordings' host samples do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from uwsgitune.core.latencyreport import (
    LatencyExport,
    LatencyView,
    LatencyWindow,
    Percentiles,
    PromHistogram,
    RouteLatency,
    StampReport,
)
from uwsgitune.core.loghist import PROM_BOUNDS, QUEUE_BOUNDS
from uwsgitune.core.logline import MAX_SAMPLE

DECIMALS = 4


def _rounded(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, DECIMALS)
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_rounded(v) for v in value]
    return value


def latency_summary(view: LatencyView) -> dict[str, Any]:
    """The view as plain data (JSON-ready but for the workers' int keys), without the export."""
    data = {f.name: getattr(view, f.name) for f in dataclasses.fields(view) if f.name != "export"}
    for name in ("short", "long"):
        data[name] = dataclasses.asdict(data[name])
    data["faults"] = dict(view.faults)
    return _rounded(data)  # type: ignore[no-any-return]


def _known(cls: type, data: Mapping[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def _percentiles(data: Mapping[str, Any] | None) -> Percentiles | None:
    return None if data is None else Percentiles(**_known(Percentiles, data))


def _window(data: Mapping[str, Any]) -> LatencyWindow:
    workers = {int(k): _percentiles(v) for k, v in data.get("workers", {}).items()}
    return LatencyWindow(
        seconds=int(data["seconds"]),
        requests=int(data["requests"]),
        service=_percentiles(data.get("service")),
        queue=_percentiles(data.get("queue")),
        workers={k: v for k, v in workers.items() if v is not None},
        routes=tuple(RouteLatency(**_known(RouteLatency, r)) for r in data.get("routes", ())),
        status={str(k): int(v) for k, v in data.get("status", {}).items()},
        stamps=StampReport(**_known(StampReport, data["stamps"])),
        total=_percentiles(data.get("total")),  # absent in recordings made before it
    )


def empty_export() -> LatencyExport:
    """A Prometheus export with nothing counted (a replayed view carries none)."""
    empty = PromHistogram(PROM_BOUNDS, (0,) * (len(PROM_BOUNDS) + 1), 0, 0.0)
    queue = PromHistogram(QUEUE_BOUNDS, (0,) * (len(QUEUE_BOUNDS) + 1), 0, 0.0)
    return LatencyExport(duration=empty, queue=queue, status={}, routes={})


def view_from_summary(data: Mapping[str, Any]) -> LatencyView:
    """The view `latency_summary` was made from, but its export (empty). Raises KeyError,
    TypeError or ValueError on a damaged form (a number where a mapping belongs: TypeError)."""
    try:
        return _view(data)
    except AttributeError as exc:
        raise TypeError(str(exc)) from None


def _view(data: Mapping[str, Any]) -> LatencyView:
    fields = _known(LatencyView, data)
    fields["short"] = _window(data["short"])
    fields["long"] = _window(data["long"])
    fields["p99_series"] = tuple(
        None if v is None else float(v) for v in data.get("p99_series", ())
    )
    fields["faults"] = {str(k): int(v) for k, v in data.get("faults", {}).items()}
    every = int(data.get("sample_every", 1))  # absent in recordings made before it
    if not 1 <= every <= MAX_SAMPLE:
        raise ValueError(f"sample_every {every} is not between 1 and {MAX_SAMPLE}")
    fields["sample_every"] = every
    fields["export"] = empty_export()
    return LatencyView(**fields)
