"""One watched instance inside the daemon: poll on schedule, log changes, publish a snapshot.

Each instance runs as its own asyncio task. A poll (and the rules after it) runs in a fresh
daemon thread, so a hung stats socket delays only its own instance, and a poll still in
flight never holds the process at exit. Each poll runs the instance's pipeline (rules and
tuner included) and publishes one frozen `InstanceState`; the metrics endpoint and the log
lines read only that.

Stopping never abandons an apply: `stop` asks the tuner to end it (verified within the
grace, else rolled back; daemon/tuning.py), then waits, up to `STOP_WAIT_SECONDS`, for the
poll thread to release the lock. A SIGHUP's new tuner for the same instance runs in the same
poll thread, after the old tuner's step: two tuners never act at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from uwsgitune.core.address import parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.core.window import WHOLE_FRAMES
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.findings import log_actions, log_findings
from uwsgitune.daemon.logs import event
from uwsgitune.daemon.tuning import InstanceTuner
from uwsgitune.pipeline import LOOKBACK_SECONDS, InstanceState, RulesRunner, pipeline_for
from uwsgitune.rules.facts import Facts
from uwsgitune.rules.finding import Finding
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner.result import StepResult

T = TypeVar("T")
# Frames kept per instance: the rules look back at most LOOKBACK_SECONDS. Only the newest
# WHOLE_FRAMES keep their worker views; older frames are compact (core/history.py: ~1.5 KB a
# frame whatever the workers, where a whole one holds ~0.6 KB a worker, 40 KB at 64).
WINDOW_SECONDS = LOOKBACK_SECONDS + 30
# The longest a stop waits for an apply in flight: its grace (actuate/halt.py, 10 s), the
# rollback and a poll in flight. systemd's TimeoutStopSec must be longer (30 s).
STOP_WAIT_SECONDS = 20.0


class PollThread:
    """One long-lived daemon thread per instance that runs its polls, one at a time.

    A hung poll delays only its own instance, and a daemon thread never holds the process at
    exit. The thread is reused: a fresh thread per poll (10 a second at 10 Hz) made glibc's
    per-thread malloc arenas grow RSS steadily in the soak.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._jobs: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()

    def close(self) -> None:
        """Let the thread end once the poll it may be running returns."""
        if self._thread is not None:
            self._jobs.put(None)
            self._thread = None

    async def run(self, fn: Callable[[], T]) -> T:
        """Run `fn` in this instance's thread and await its result."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()

        def deliver(apply: Callable[[], None]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                loop.call_soon_threadsafe(lambda: None if fut.done() else apply())

        def job() -> None:
            try:
                result = fn()
            except BaseException as exc:  # handed to the awaiting task
                error = exc
                deliver(lambda: fut.set_exception(error))
            else:
                deliver(lambda: fut.set_result(result))

        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
        self._jobs.put(job)
        return await fut


async def in_thread(fn: Callable[[], T], name: str = "uwsgitune-poll") -> T:
    """Run `fn` in a new daemon thread and await its result (one-off work)."""
    return await PollThread(name).run(fn)


def same_watch(a: InstanceConfig, b: InstanceConfig) -> bool:
    """Whether a runner for `a` can carry on as `b` (the poll itself is unchanged)."""
    return (a.stats, a.interval, a.timeout) == (b.stats, b.interval, b.timeout)


class InstanceRunner:
    def __init__(self, spec: InstanceConfig, state_dir: Path = Path("/var/lib/uwsgitune")) -> None:
        self.spec = spec
        address = parse_address(spec.stats)
        self.watch = InstanceWatch(
            address,
            interval=spec.interval,
            timeout=spec.timeout,
            window_seconds=WINDOW_SECONDS,
            whole_frames=WHOLE_FRAMES,
        )
        self.state_dir = state_dir
        self.tuner = InstanceTuner(spec, self.watch, state_dir, self._poll_in_apply)
        self.rules = RulesRunner(Facts(stats_kind=address.kind), spec.rule_settings())
        self.pipeline = pipeline_for(
            self.watch, name=spec.name, mode=spec.mode, tuner=self._tune, rules=self.rules
        )
        self.pipeline.republish(spec.mode, recommend=spec.mode != "observe")
        self.task: asyncio.Task[None] | None = None
        self._old: list[InstanceTuner] = []  # replaced by a SIGHUP, maybe still applying
        self._poller = PollThread(f"poll:{spec.name}")

    @property
    def snapshot(self) -> InstanceState:
        """The state published at the last poll: what the metrics endpoint reads."""
        return self.pipeline.state

    def _poll_in_apply(self) -> Frame:
        return self.pipeline.poll()  # published at once, while the apply waits

    def _tune(self, frame: Frame, findings: tuple[Finding, ...]) -> StepResult | None:
        return self.tuner.step(frame, findings)  # the tuner of the current spec

    def start(self) -> None:
        self.task = asyncio.create_task(self.run(), name=f"instance:{self.spec.name}")

    def respec(self, spec: InstanceConfig) -> None:
        """New mode/bounds/FIFO for the same poll: keep tracker, window and findings; a new
        tuner (built on the next good frame) when its settings changed."""
        if spec != self.spec:
            self.tuner.close(interrupt=False)  # an apply in flight runs to its end
            self._old = [t for t in (*self._old, self.tuner) if not t.released.is_set()]
            self.tuner = InstanceTuner(spec, self.watch, self.state_dir, self._poll_in_apply)
        self.rules.settings = spec.rule_settings()
        self.spec = spec
        self.pipeline.republish(spec.mode, recommend=spec.mode != "observe")

    async def run(self) -> None:
        while True:
            old = self.pipeline.state
            new = await self._poller.run(self.pipeline.step)
            self._after(old, new)
            await asyncio.sleep(max(0.0, self.watch.next_due - time.monotonic()))

    def _after(self, old: InstanceState, new: InstanceState) -> None:
        if new.frame is not None:
            self._log_change(old.frame, new.frame)
        log_findings(self.spec.name, old, new)
        log_actions(self.spec.name, new)

    def _log_change(self, prev: Frame | None, cur: Frame) -> None:
        name = self.spec.name
        if not cur.ok:
            if prev is None or prev.ok:
                event("disconnected", logging.WARNING, instance=name, stats=self.spec.stats,
                      error=cur.error)  # fmt: skip
            return
        if cur.stats_repairs and not (prev and prev.stats_repairs):
            event("stats_repaired", logging.WARNING, instance=name, stats=self.spec.stats,
                  strings=cur.stats_repairs)  # fmt: skip
        if prev is None or not prev.ok:
            down = None if prev is None else round(cur.t - (prev.disconnected_since or prev.t), 1)
            event("connected", instance=name, stats=self.spec.stats, version=cur.version,
                  master_pid=cur.master_pid, workers=cur.live, slots=cur.workers_max,
                  down_seconds=down)  # fmt: skip
        elif cur.kind in ("reload", "restart"):
            event(f"uwsgi_{cur.kind}", instance=name, master_pid=cur.master_pid,
                  workers=cur.live, slots=cur.workers_max)  # fmt: skip

    def halt(self) -> None:
        """End an apply in flight now (verified within the grace, else rolled back)."""
        for tuner in (*self._old, self.tuner):
            tuner.halt()

    async def stop(self, wait: float = STOP_WAIT_SECONDS, interrupt: bool = True) -> None:
        """End the polls; an apply in flight ends in its own thread (`interrupt`: within
        its grace, else it runs to its end: a SIGHUP), which releases the lock: waited for
        up to `wait` seconds."""
        tuners = [*self._old, self.tuner]
        for tuner in tuners:
            tuner.close(interrupt)
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
            self.task = None
        self._poller.close()
        end = time.monotonic() + wait
        while not all(t.released.is_set() for t in tuners) and time.monotonic() < end:
            await asyncio.sleep(0.05)
        if not all(t.released.is_set() for t in tuners):
            fate = "its intent record stays in the audit log; the next start counts it"
            event("apply_abandoned", logging.ERROR, instance=self.spec.name, waited=wait,
                  effect=fate)  # fmt: skip
