"""SIGINT, SIGTERM and SIGHUP (the terminal closed) as a request to stop, not an exception
or a death in the middle of an action.

`tune` (an apply in flight ends in its own thread) and `sweep` (the instance is restored)
both check a flag their handler sets; the handlers before are put back after. Outside the
main thread (tests, embedding), signals cannot be handled and nothing changes.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def stop_signals(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, old in before.items():
            signal.signal(s, old)
