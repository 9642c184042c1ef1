"""Old frames of a window, kept compact. Pure.

A frame's per-worker views are most of its memory (64 workers: ~40 KB of the ~42 KB a frame
holds), and of an old frame only one thing reads them: the GIL rule, which counts the busy
workers' CPU (`rules/gil.py`). Every other reader of the history (the rules, the tuner,
the sparklines, `summary`) reads the frame's own fields; the exporter, the daemon's logs and
`stuck_requests` read the latest frame only. So a `HistoryFrame` is its frame with every
field but `workers`, which is empty; the busy workers' CPU is kept beside it as one sorted
array of doubles (`busy_cpu`), exactly the values the rule compares. Equal socket and vassal
tuples are shared with the frame before, which is already compact. The TUI's worker detail
reads one slot's RSS and req/s over its history: the TUI's window keeps every frame whole.

Nothing here changes a number: `busy_samples` gives the GIL rule the same counts from a
whole frame and from its compact form.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

from uwsgitune.core.frame import FIELD_NAMES, Frame, WorkerView, field_values

# A worker busy at least this share of a poll (busy_pct) is a GIL sample.
GIL_BUSY_PCT = 50.0
_WORKERS = FIELD_NAMES.index("workers")
_SHARED = tuple(FIELD_NAMES.index(n) for n in ("sockets", "vassals", "version", "source", "error"))


def busy_cpu(workers: Iterable[WorkerView]) -> array[float]:
    """The CPU (% of one core) of each worker busy at least `GIL_BUSY_PCT` of the poll (not
    cheap, both known), sorted."""
    return array(
        "d",
        sorted(
            w.cpu_pct
            for w in workers
            if w.cpu_pct is not None
            and w.busy_pct is not None
            and not w.busy_pct < GIL_BUSY_PCT
            and w.status != "cheap"
        ),
    )


class HistoryFrame(Frame):
    """An old frame: every field of its `Frame`, but no worker views (`workers` is empty);
    `busy_cpu` holds what the GIL rule reads of them. Built by `compact` only."""

    __slots__ = ("busy_cpu",)
    busy_cpu: array[float]


def compact(frame: Frame, before: Frame | None = None) -> HistoryFrame:
    """`frame` without its worker views; fields equal to `before`'s share its objects."""
    values = list(field_values(frame))
    values[_WORKERS] = ()
    if before is not None:
        for i in _SHARED:
            old = getattr(before, FIELD_NAMES[i])
            if old is not values[i] and old == values[i]:
                values[i] = old
    out = HistoryFrame(*values)
    object.__setattr__(out, "busy_cpu", busy_cpu(frame.workers))
    return out


def busy_samples(frame: Frame, limit: float) -> tuple[int, int]:
    """(busy workers at `limit`% of a core or more, busy workers) in one poll: the GIL
    rule's samples, from the worker views or from a compact frame's `busy_cpu`."""
    cpu = frame.busy_cpu if isinstance(frame, HistoryFrame) else busy_cpu(frame.workers)
    return len(cpu) - bisect_left(cpu, limit), len(cpu)
