"""Rows of the worker, cores and vassal tables: pure functions of a frame.

Every row is keyed (`w<slot>`, `c<slot>.<core>`, `v<name>`) so that the table keeps its
cursor and sort across refreshes. A `Cell` carries its text, a sort value and a style; the
table sorts on the value, never on the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from rich.text import Text

from uwsgitune.core.frame import Frame, RequestView, WorkerView
from uwsgitune.core.units import duration, num, size


class Cell(NamedTuple):  # a tuple: built by the hundred per refresh, twice as fast
    text: str
    sort: float | str = 0.0
    style: str = ""
    right: bool = True

    def __rich__(self) -> Text:
        return Text(self.text, style=self.style, justify="right" if self.right else "left")


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int
    help: str


def columns(table: str) -> tuple[Column, ...]:
    """Columns from a text table: key, label, width, help (the rest of the line)."""
    out = []
    for line in table.strip().splitlines():
        key, label, width, help_ = line.split(maxsplit=3)
        out.append(Column(key, label, int(width), help_))
    return tuple(out)


# The uwsgitop columns, in its order, then ours. AVG½ is uWSGI's avg_rt: (avg + last)/2.
WORKER_COLUMNS = columns("""
wid        WID        4  worker id (slot+1 when cheap)
share      %          5  share of all requests served by this worker
pid        PID        8  worker pid
req        REQ        8  requests since the last reload
rps        RPS        7  requests/s over the last interval
exc        EXC        5  exceptions
sig        SIG        4  signals handled
status     STATUS     7  idle, busy, cheap, pause, sigN
avg        AVG½       8  uWSGI avg_rt: a half-life average (avg+last)/2, not a mean
mean       MEAN       8  true mean response time: Δrunning_time/Δrequests
rss        RSS        9  resident memory (memory-report or psutil)
vsz        VSZ        9  virtual memory (memory-report)
tx         TX         9  bytes sent
respawn    ReSpwn     6  respawns of this slot
hc         HC         3  harakiri count
runt       RunT       8  busy time: running_time, time spent serving requests
lastspawn  LastSpwn   8  time since the last spawn
busy       BUSY%      6  busy %: Δrunning_time/Δt per thread
cpu        CPU%       6  CPU % of one core
age        AGE        7  age of the oldest request in service
""")
COLUMN_KEYS = tuple(c.key for c in WORKER_COLUMNS)

CORE_COLUMNS = columns("""
wid      WID       4  worker id
core     CORE      4  core (thread) id
pid      PID       8  worker pid
req      REQ       8  requests served by this core
status   STATUS    7  busy when in a request
age      AGE       7  age of the request in service
request  REQUEST  40  method and path (request vars are never shown)
""")

VASSAL_COLUMNS = columns("""
name       VASSAL  24  vassal config name
pid        PID      8  vassal master pid
ready      READY    6  ready
accepting  ACCEPT   6  accepting
respawns   ReSpwn   6  respawns
born       UP       9  time since born
""")

STATUS_STYLE = {"busy": "bold yellow", "idle": "green", "cheap": "dim", "pause": "magenta"}

Row = tuple[str, tuple[Cell, ...]]
STATUS_COLUMN = COLUMN_KEYS.index("status")
COLUMN_INDEX = range(len(COLUMN_KEYS))


@dataclass(frozen=True)
class Rows:
    """A table's rows, built on demand: `keys` in their natural order, `cells(i)` the cells
    of row i, `sort(i, c)` its sort value on column c (the value its cell would carry);
    `values(c)` every row's sort value on column c, in one go (or None: from `sort`)."""

    keys: tuple[str, ...]
    cells: Callable[[int], tuple[Cell, ...]]
    sort: Callable[[int, int], float | str]
    values: Callable[[int], list[float | str]] | None = None

    def column(self, c: int) -> list[float | str]:
        """Every row's sort value on column c, in `keys`' order."""
        if self.values is not None:
            return self.values(c)
        return [self.sort(i, c) for i in range(len(self.keys))]

    @classmethod
    def of(cls, rows: Sequence[Row]) -> Rows:
        """Rows already built (the cores and vassal tables)."""
        rows = list(rows)
        return cls(tuple(k for k, _ in rows), lambda i: rows[i][1], lambda i, c: rows[i][1][c].sort)


def status_style(status: str) -> str:
    if status.startswith("sig"):
        return "bold red"
    return STATUS_STYLE.get(status, "")


def _count(value: int, style: str = "") -> Cell:
    return Cell(str(value), value, style)


def _share(w: WorkerView, total: int) -> float:
    return w.requests / total * 100 if total else 0.0


def _spawned(w: WorkerView, now: float) -> float | None:
    return now - w.last_spawn if w.last_spawn > 0 else None


def _or(value: float | None) -> float:
    return -1.0 if value is None else float(value)


def _neg(value: float | None) -> float:
    return -1.0 if value is None else -value


# The sort value of each worker column (WORKER_COLUMNS' order), from the worker alone: the
# table sorts every worker on these, and builds the cells of the rows on screen only.
WorkerSort = Callable[[WorkerView, int, float], float | str]
WORKER_SORT: tuple[WorkerSort, ...] = (
    lambda w, t, now: w.slot,
    lambda w, t, now: _share(w, t),
    lambda w, t, now: w.pid,
    lambda w, t, now: w.requests,
    lambda w, t, now: _or(w.rps),
    lambda w, t, now: w.exceptions,
    lambda w, t, now: w.signals,
    lambda w, t, now: w.status,
    lambda w, t, now: float(w.avg_rt_us),
    lambda w, t, now: _or(w.mean_rt_ms),
    lambda w, t, now: _or(w.rss),
    lambda w, t, now: _or(w.vsz),
    lambda w, t, now: _or(w.tx),
    lambda w, t, now: w.respawn_count,
    lambda w, t, now: w.harakiri_count,
    lambda w, t, now: float(w.running_time_us),
    lambda w, t, now: _neg(_spawned(w, now)),
    lambda w, t, now: _or(w.busy_pct),
    lambda w, t, now: _or(w.cpu_pct),
    lambda w, t, now: w.request_age or 0.0,
)


def worker_row(w: WorkerView, total_requests: int, now: float) -> Row:
    share = _share(w, total_requests)
    dim = "" if w.live else "dim"
    spawned = _spawned(w, now)
    texts_styles = (
        (str(w.id or w.slot + 1), dim),
        (f"{share:.1f}", ""),
        (str(w.pid) if w.pid else "-", ""),
        (str(w.requests), ""),
        (num(w.rps), ""),
        (str(w.exceptions), "red" if w.exceptions else ""),
        (str(w.signals), ""),
        (w.status, status_style(w.status)),
        (f"{w.avg_rt_us / 1000:.1f}ms" if w.avg_rt_us else "-", ""),
        (num(w.mean_rt_ms, ".1f") + ("ms" if w.mean_rt_ms is not None else ""), ""),
        (size(w.rss), ""),
        (size(w.vsz), ""),
        (size(w.tx), ""),
        (str(w.respawn_count), ""),
        (str(w.harakiri_count), "red" if w.harakiri_count else ""),
        (duration(w.running_time_us / 1e6), ""),
        (duration(spawned), ""),
        (num(w.busy_pct, ".0f"), ""),
        (num(w.cpu_pct, ".0f"), ""),
        (duration(w.request_age), "yellow" if w.request_age else ""),
    )
    cells = tuple(
        Cell(text, sort(w, total_requests, now), style, i != STATUS_COLUMN)
        for i, (text, style), sort in zip(COLUMN_INDEX, texts_styles, WORKER_SORT, strict=True)
    )
    return f"w{w.slot}", cells


def worker_table(f: Frame) -> Rows:
    """The worker rows of a frame, built lazily: sorted on any column without a cell built."""
    workers, now = f.workers, f.t
    total = sum(w.requests for w in workers)
    return Rows(
        tuple(f"w{w.slot}" for w in workers),
        lambda i: worker_row(workers[i], total, now)[1],
        lambda i, c: WORKER_SORT[c](workers[i], total, now),
        lambda c: [WORKER_SORT[c](w, total, now) for w in workers],
    )


def worker_rows(f: Frame) -> list[Row]:
    total = sum(w.requests for w in f.workers)
    return [worker_row(w, total, f.t) for w in f.workers]


CoreSlot = tuple[WorkerView, int, int, RequestView | None]  # worker, core, requests, request
CORE_SORT: tuple[Callable[[CoreSlot], float | str], ...] = (
    lambda c: c[0].slot,
    lambda c: c[1],
    lambda c: c[0].pid,
    lambda c: c[2],
    lambda c: "busy" if c[3] else "idle",
    lambda c: (c[3].age or 0.0) if c[3] else -1.0,
    lambda c: f"{c[3].method} {c[3].path}".strip() if c[3] else "",
)


def core_cells(c: CoreSlot) -> tuple[Cell, ...]:
    w, core, requests, r = c
    status, request = CORE_SORT[4](c), CORE_SORT[6](c)
    return (
        Cell(str(w.id), w.slot),
        _count(core),
        _count(w.pid),
        _count(requests),
        Cell(str(status), status, status_style(str(status)), right=False),
        Cell(duration(r.age) if r else "", CORE_SORT[5](c)),
        Cell(str(request), request, right=False),
    )


def core_table(f: Frame) -> Rows:
    """uwsgitop's cores view: one row per core of every live worker, built lazily."""
    slots: list[CoreSlot] = []
    for w in f.workers:
        if w.live:
            busy = {r.core: r for r in w.requests_in_flight}
            slots += [(w, i, n, busy.get(i)) for i, n in enumerate(w.cores_requests)]
    return Rows(
        tuple(f"c{w.slot}.{core}" for w, core, _, _ in slots),
        lambda i: core_cells(slots[i]),
        lambda i, c: CORE_SORT[c](slots[i]),
    )


def core_rows(f: Frame) -> list[Row]:
    table = core_table(f)
    return [(key, table.cells(i)) for i, key in enumerate(table.keys)]


def vassal_rows(f: Frame) -> list[Row]:
    rows: list[Row] = []
    for v in f.vassals:
        up = f.t - v.born if v.born > 0 else None
        cells = (
            Cell(v.name, v.name, "bold", right=False),
            _count(v.pid),
            Cell("yes" if v.ready else "no", int(v.ready), "green" if v.ready else "red"),
            Cell("yes" if v.accepting else "no", int(v.accepting)),
            _count(v.respawns, "yellow" if v.respawns else ""),
            Cell(duration(up), -1.0 if up is None else up),
        )
        rows.append((f"v{v.name}", cells))
    return rows


def sort_key(value: float | str) -> tuple[int, float | str]:
    """Sort key of a sort value: numbers before text, so mixed columns never raise."""
    return (0, value) if isinstance(value, int | float) else (1, value)


def sort_value(cell: object) -> tuple[int, float | str]:
    """Sort key of a cell: numbers before text, so mixed columns never raise."""
    if isinstance(cell, Cell):
        return sort_key(cell.sort)
    return (1, str(cell))
