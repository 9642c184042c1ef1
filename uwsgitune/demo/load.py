"""The demo's built-in load: the phases of `phases.py` on their own thread and event loop.

Bounded three ways: each phase by its duration, the whole run by `total` seconds, and every
request by a timeout. `stop()` cancels the running phase at once (open connections close).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Sequence

from uwsgitune.demo.phases import CLIENT_TIMEOUT, PHASES, Phase
from uwsgitune.loadgen import LoadRun


class DemoLoad:
    def __init__(
        self,
        base_url: str,
        total: float,
        phases: Sequence[Phase] = PHASES,
        mono: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.total = total
        self.phases = tuple(phases)
        self.phase: Phase | None = None
        self.phase_ends = 0.0
        self.sent = 0
        self.errors = 0
        self.finished = False
        self._mono = mono
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._thread = threading.Thread(target=self._thread_main, name="demo-load", daemon=True)

    def start(self) -> DemoLoad:
        self._thread.start()
        return self

    def _thread_main(self) -> None:
        with contextlib.suppress(asyncio.CancelledError):
            asyncio.run(self._main())
        self.finished = True

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        end = self._mono() + self.total
        while self._mono() < end:
            for phase in self.phases:
                left = end - self._mono()
                if left <= 0:
                    break
                await self._run_phase(phase, min(phase.seconds, left))
        self.phase = None

    async def _run_phase(self, phase: Phase, seconds: float) -> None:
        self.phase, self.phase_ends = phase, self._mono() + seconds
        if phase.clients <= 0:
            await asyncio.sleep(seconds)
            return
        # stamped as a front proxy stamps them: the TUI splits queue wait from service
        run = LoadRun(
            self.base_url + phase.path, duration=seconds, timeout=CLIENT_TIMEOUT, stamp=True
        )
        try:
            await run.closed_loop(phase.clients)
        finally:
            self.sent += run.result.sent
            self.errors += run.result.errors

    def status(self) -> str:
        if self.phase is None:
            return "demo load finished" if self.finished else "demo load starting"
        left = max(0.0, self.phase_ends - self._mono())
        return f"demo phase {self.phase.name} ({left:.0f}s left): {self.phase.what}"

    def stop(self, timeout: float = 5.0) -> None:
        loop, task = self._loop, self._task
        if loop is not None and task is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(task.cancel)
        if self._thread.is_alive():
            self._thread.join(timeout)
