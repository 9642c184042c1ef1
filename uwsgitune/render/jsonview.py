"""The documented JSON form of frames (`watch --json`, `--plain --json`).

Schema (version 1): `{"schema_version": 1, "instances": [FRAME, ...]}` where FRAME is every
field of `uwsgitune.core.frame.Frame` (units in the field names or documented there: seconds,
bytes, ms, percent 0-100) plus `queue_full`, `since_reload` and `cpu_saturation`. Rates are
null when they cannot be known honestly (first poll, reload, error). Request `vars` never appear:
a worker's in-flight requests carry only method, path and age.

With the request log (`--latency`), each instance also carries `latency`: the poll's latency
summary (core/latencyform.py: the 10 s and 60 s windows with service and queue percentiles
in ms, workers by id, routes, status classes, stamps; the p99 series, coverage, trusted,
faults, mismatch, the Little's-law estimate, silence). Without it the key is absent, so a
document is the same as before. No request is in it: the recorder keeps none.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import msgspec

from uwsgitune.core.frame import Frame
from uwsgitune.core.latencyform import latency_summary
from uwsgitune.core.latencyreport import LatencyView

SCHEMA_VERSION = 1


def _round(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """`dataclasses.asdict`, recursively, for dataclasses and msgspec structs alike (the
    worker views are structs): containers keep their type, so tuples stay tuples."""
    if isinstance(value, msgspec.Struct):
        return {k: _plain(v) for k, v in msgspec.structs.asdict(value).items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple
        return type(value)(*(_plain(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    return value


def frame_to_dict(f: Frame, latency: LatencyView | None = None) -> dict[str, Any]:
    data: dict[str, Any] = _plain(f)
    data["queue_full"] = f.queue_full
    data["since_reload"] = f.since_reload
    data["cpu_saturation"] = f.cpu_saturation
    for sock, view in zip(data["sockets"], f.sockets, strict=True):
        sock["fill"] = view.fill
        sock["full"] = view.full
    if latency is not None:
        data["latency"] = latency_summary(latency)
    return _round(data)  # type: ignore[no-any-return]


def document(
    frames: Sequence[Frame], latencies: Sequence[LatencyView | None] = ()
) -> dict[str, Any]:
    """The document of `frames`, each with its latency when `latencies` gives one (in the
    frames' order)."""
    views = list(latencies) + [None] * (len(frames) - len(latencies))
    instances = [frame_to_dict(f, v) for f, v in zip(frames, views, strict=False)]
    return {"schema_version": SCHEMA_VERSION, "instances": instances}


def dumps(
    frames: Sequence[Frame],
    latencies: Sequence[LatencyView | None] = (),
    *,
    indent: int | None = 2,
) -> str:
    return json.dumps(document(frames, latencies), indent=indent, sort_keys=False)
