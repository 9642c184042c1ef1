"""`uwsgitune sweep`'s hold on the instance: one actor at a time, on the master's own stats.

Like every actor (`uwsgitune.actuate.lock`), a sweep takes the instance's apply lock before it
changes anything, or exits 1 naming the holder (a daemon, `tune`, the TUI). Once it holds the
lock, and before anything else, it resumes a pool the lock's mark says a reload cut short left
paused (`uwsgitune.actuate.leftpaused`, as the daemon and `tune` do), and exits 1 when that
cannot be done: the mark then stays for the next holder. Every write is refused while the
stats are not proved to be the master's (`uwsgitune.actuate.peer`: a unix socket another uid
serves, a TCP or HTTP listener the master does not hold, unless --trust-tcp-stats).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.leftpaused import LeftPaused, Resume
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.core.address import StatsAddress
from uwsgitune.errors import UserError
from uwsgitune.pipeline import InstanceDriver
from uwsgitune.sweep.live import Poll


def refusal(
    args: argparse.Namespace, address: StatsAddress, driver: InstanceDriver
) -> Callable[[], str | None]:
    """Why acting is refused now (the latest poll's stats not proved the master's), or None."""
    check = PeerCheck(trust_tcp=args.trust_tcp_stats)
    return lambda: check.refusal(address, driver.state.poll)


def take(
    args: argparse.Namespace, refused: Callable[[], str | None], poll: Poll, lock: ApplyLock
) -> None:
    """The apply lock, then a pool a killed holder left paused resumed; else exit 1."""
    problem = lock.acquire()
    if problem is not None:
        raise UserError(f"{problem}; not sweeping")
    left = LeftPaused(MasterFifo(args.fifo), refusal=refused)
    said = left.settle(lock, poll, say=_say)
    failed = next((r for r in said if r.kind == "refused"), None)
    if failed is not None:
        raise UserError(f"{failed.text}; not sweeping")


def _say(r: Resume) -> None:
    if r.kind != "refused":  # that one ends the sweep, in one line
        print(f"sweep: {r.text}", flush=True)
