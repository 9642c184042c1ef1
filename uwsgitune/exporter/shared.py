"""One render in flight per kind of answer, shared by every scrape that asks while it runs.

Fifty scrapes arriving together cost one render (one thread, one transient peak of the
registry's objects) and hold one body between them, not fifty. A scrape that arrives after
a render finished starts a new one: nothing is cached past the render itself.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class InFlight(Generic[T]):
    def __init__(self) -> None:
        self._running: dict[Hashable, asyncio.Future[T]] = {}

    def __len__(self) -> int:
        """Works running, abandoned by their waiters or not: threads taken."""
        return len(self._running)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._running

    async def run(self, key: Hashable, work: Callable[[], T]) -> T:
        """`work()` in a thread, or the result of the same `key`'s work already running.
        Cancelling a waiter (its deadline) leaves the shared work to the others."""
        future = self._running.get(key)
        if future is None:
            future = asyncio.ensure_future(asyncio.to_thread(work))
            self._running[key] = future
            future.add_done_callback(lambda done: self._finished(key, done))
        return await asyncio.shield(future)

    def _finished(self, key: Hashable, done: asyncio.Future[T]) -> None:
        if self._running.get(key) is done:
            del self._running[key]
        if not done.cancelled():
            with contextlib.suppress(Exception):
                done.exception()  # retrieved: a failure nobody waits for is not logged twice
