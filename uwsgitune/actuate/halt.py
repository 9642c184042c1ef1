"""A stop asked of an apply in flight (SIGTERM, SIGINT, Ctrl-C in `tune`, a daemon stopping).

The waits of a reload (actuate/reload.py) and of a listen restart (actuate/listen.py) sleep
on it: once it is set, a wait has `grace` more seconds to see the change through, then the
change is rolled back as on a failure and reported as `interrupted` (audited; applying is
not stopped: nothing was wrong with the change). The thread that applies always ends the
apply itself, so the audit record is written and the apply lock released by that thread,
never abandoned half-way.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

# Seconds a wait in flight still has after a stop, before it rolls back. With the rollback
# itself (restore the file, send `r`) and a poll in flight, a stop ends well within 20 s:
# what the daemon waits for (daemon/runtime.py), below the unit's TimeoutStopSec.
STOP_GRACE_SECONDS = 10.0


class Halt:
    def __init__(
        self, grace: float = STOP_GRACE_SECONDS, mono: Callable[[], float] = time.monotonic
    ) -> None:
        self.grace = grace
        self._mono = mono
        self._event = threading.Event()
        self._at: float | None = None

    def set(self) -> None:
        """Ask the apply in flight (and every later one) to end: from any thread, or a
        signal handler."""
        if self._at is None:
            self._at = self._mono()
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def pause(self, seconds: float, sleep: Callable[[float], None]) -> None:
        """Wait `seconds` between polls, woken at once by the stop (then `sleep` as usual)."""
        if self._event.is_set():
            sleep(seconds)
        else:
            self._event.wait(seconds)

    def until(self, deadline: float) -> float:
        """A wait's deadline, cut to `grace` seconds after the stop once one came."""
        return deadline if self._at is None else min(deadline, self._at + self.grace)
