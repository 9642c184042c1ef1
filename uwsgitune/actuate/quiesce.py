"""Pause the workers before a reload, so that none holds a connection it has not read.

uWSGI 2.0's SIGHUP handler in a one-thread worker (`gracefully_kill`, core/uwsgi.c) exits
at once unless the worker's core is `in_request`, and a worker sets that only when it starts
to read a connection `accept()` has returned. A reload that lands in between closes that
connection unread: the client gets a reset (unbit/uwsgi#1375). The window is widest when the
workers wait for a CPU, which is when the tuner reloads: to shrink a saturated pool
(bench/results/reload_race.md).

`p` has every worker finish the request it holds and then wait at the top of its loop
(`wsgi_req_setup`), before it accepts another. A worker waiting there holds no connection,
so the reload's SIGHUP costs nothing; new connections wait in the listen queue for the new
workers. `r` re-executes the master, and the workers it forks are not paused.

The stats read `pause` for a worker that is paused and not in a request, which a worker
that accepted just before the pause also reads until it starts to read. So the pool counts
as paused after two reads in a row, `INTERVAL` apart, in which every live worker reads
`pause`: once the others are paused, the CPUs are free and that window closes at once.
Those reads are of the statuses alone (`statuses_at`), not polls of the instance: a poll's
frame would go into the tuner's window, and its rates would count a pause the tuner made.
If that does not come within `LONGEST` seconds (a long request), `r` goes anyway, as it
would have without the pause.

Not for threads: a threaded worker's handler waits for its requests (no race), and a
paused threaded pool does not reload at all (measured: 4 x 4 threads, not reloaded in
30 s). Not under `lazy` (not `lazy-apps`): `r` then only respawns the workers, and they
start paused (measured). Not for an instance subscribed to a router: a pause unsubscribes
it, and the router would have no node for it meanwhile. Not for a pool someone else
paused (a worker reads `pause`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from uwsgitune.actuate.fifo import FifoError, MasterFifo
from uwsgitune.actuate.options import PROC, master_options
from uwsgitune.core.address import StatsAddress
from uwsgitune.core.frame import Frame
from uwsgitune.core.model import parse_stats
from uwsgitune.sources.stats import StatsError, read_stats

Statuses = Callable[[], Sequence[str] | None]  # the live workers' statuses; None: unread

LONGEST = 3.0  # seconds to wait for every worker to pause; `r` goes anyway after
INTERVAL = 0.05  # between stats reads while waiting (a read of 64 workers costs ~1 ms)


def _unsafe(key: str) -> bool:
    """An option under which a pause harms: `lazy` (not `lazy-apps`), a subscription."""
    return key in ("lazy", "st") or key.startswith("subscribe")


UNDONE = "; the pause sent before it was undone"  # what `undo` says when it did


def pause_unsafe(config: Mapping[str, str] | None, master_pid: int, proc: Path = PROC) -> bool:
    """Such an option in the ini, on the master's command line or in its environment (as
    `UWSGI_<KEY>`); True when that cannot be read, so no pause."""
    if config is None or any(_unsafe(k) for k in config):
        return True
    given = master_options(master_pid, proc)
    return given is None or any(_unsafe(k) for k in given)


def can_pause(frame: Frame) -> bool:
    """A pool the pause protects, and that nobody else has paused."""
    return (
        frame.kind != "error"
        and frame.threads == 1
        and frame.live > 0
        and not frame.paused
        and all(len(w.cores_requests) <= 1 for w in frame.workers if w.live)
    )


def statuses_at(address: StatsAddress, timeout: float = 1.0) -> Statuses:
    def read() -> Sequence[str] | None:
        try:
            doc = parse_stats(read_stats(address, timeout=timeout))
        except (StatsError, ValueError):
            return None
        return [w.status for w in doc.live_workers]

    return read


def live_statuses(frame: Frame) -> Sequence[str] | None:
    return None if frame.kind == "error" else [w.status for w in frame.workers if w.live]


def statuses_of(poll: Callable[[], Frame]) -> Statuses:
    """The same from full polls (for a caller that has no address)."""
    return lambda: live_statuses(poll())


def all_paused(statuses: Sequence[str] | None) -> bool:
    return bool(statuses) and all(s == "pause" for s in statuses or ())


@dataclass(frozen=True)
class Quiesced:
    settled: bool  # every live worker read `pause` twice in a row
    seconds: float

    def line(self) -> str:
        if self.settled:
            return f"workers paused first ({self.seconds:.1f}s)"
        return f"not every worker paused within {self.seconds:.1f}s; reloaded anyway"


def quiesce(
    fifo: MasterFifo,
    before: Frame,
    statuses: Statuses,
    wait: Callable[[float], None],
    mono: Callable[[], float] = time.monotonic,
) -> Quiesced | None:
    """Send `p` and wait until every worker is paused. None: not paused (the pool is not
    one the pause protects, or `p` could not be sent), so the reload goes as before.
    Whoever calls this must send `r` next, or `resume` when it cannot."""
    if not can_pause(before):
        return None
    try:
        fifo.send("p", before.master_pid)
    except FifoError:
        return None
    start, streak = mono(), 0
    while mono() - start < LONGEST:
        wait(INTERVAL)
        streak = streak + 1 if all_paused(statuses()) else 0
        if streak == 2:
            return Quiesced(True, mono() - start)
    return Quiesced(False, mono() - start)


def resume(fifo: MasterFifo, master_pid: int) -> str | None:
    """A second `p`, which resumes (it toggles). None once sent, else why not."""
    try:
        fifo.send("p", master_pid)
    except FifoError as exc:
        return str(exc)
    return None


def undo(fifo: MasterFifo, master_pid: int) -> str:
    """After `p` and no `r`: resume, and what to say of it."""
    why = resume(fifo, master_pid)
    if why is None:
        return UNDONE
    return f"; the workers are still PAUSED ({why}): send `p` to {fifo.path} to resume"
