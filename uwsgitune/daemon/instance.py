"""One watched instance inside the daemon: its driver, and the log lines of what changed.

Each instance is one driver (pipeline/driver.py) polling in a daemon thread of its own, so
a hung stats socket delays only its own instance, and a poll in flight never holds the
process at exit. Each poll publishes one frozen `InstanceState`; the metrics endpoint reads
the latest, and the driver's subscriber logs what changed (connections, reloads, findings,
the tuner's events).

Stopping never abandons an apply: `stop` halts the tuner (an apply in flight is verified
within its grace, else rolled back; with `interrupt=False`, a SIGHUP's, it runs to its end),
then waits, up to `STOP_WAIT_SECONDS`, for the driver's thread, which releases the lock as
it ends. A SIGHUP's new tuner for the same instance takes over in the same thread, after
the old tuner's step (`InstanceDriver.replace_tuner`): two tuners never act at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from pathlib import Path

from uwsgitune.core.address import parse_address
from uwsgitune.core.frame import Frame
from uwsgitune.core.window import WHOLE_FRAMES
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.findings import log_actions, log_findings
from uwsgitune.daemon.logs import event
from uwsgitune.daemon.tuning import TunerLog, daemon_tuner
from uwsgitune.pipeline import (
    LOOKBACK_SECONDS,
    InstanceState,
    LatencyStage,
    RulesRunner,
    live_driver,
)
from uwsgitune.rules.facts import Facts
from uwsgitune.sources.reqlog import ReqlogAddressError

# Frames kept per instance: the rules look back at most LOOKBACK_SECONDS. Only the newest
# WHOLE_FRAMES keep their worker views; older frames are compact (core/compact.py: ~1.5 KB a
# frame whatever the workers, where a whole one holds ~0.6 KB a worker, 40 KB at 64).
WINDOW_SECONDS = LOOKBACK_SECONDS + 30
# The longest a stop waits for an apply in flight: its grace (actuate/reload.py, 10 s), the
# rollback and a poll in flight. systemd's TimeoutStopSec must be longer (30 s).
STOP_WAIT_SECONDS = 20.0
# How often a request log address that could not be bound is tried again.
LATENCY_RETRY_SECONDS = 5.0


def same_watch(a: InstanceConfig, b: InstanceConfig) -> bool:
    """Whether a runner for `a` can carry on as `b` (the poll itself is unchanged)."""
    return (a.stats, a.interval, a.timeout, a.latency) == (
        b.stats,
        b.interval,
        b.timeout,
        b.latency,
    )


class InstanceRunner:
    def __init__(
        self,
        spec: InstanceConfig,
        state_dir: Path = Path("/var/lib/uwsgitune"),
    ) -> None:
        self.spec = spec
        self.state_dir = state_dir
        address = parse_address(spec.stats)
        self.rules = RulesRunner(Facts(stats_kind=address.kind), spec.rule_settings())
        self._latency_tried = -math.inf
        self._latency_said: str | None = None  # the last problem logged (logged once)
        self.driver = live_driver(
            address,
            interval=spec.interval,
            timeout=spec.timeout,
            window_seconds=WINDOW_SECONDS,
            whole_frames=WHOLE_FRAMES,
            rules=self.rules,
            tuner=daemon_tuner(spec, state_dir),
            name=spec.name,
            mode=spec.mode,
            recommend=spec.mode != "observe",
            latency=self._open_latency(),
        )
        self._tuner_log = TunerLog(spec, state_dir)
        self._last = self.driver.state
        self.driver.subscribe(self._changed)
        self.stopping = False

    @property
    def snapshot(self) -> InstanceState:
        """The state published at the last poll: what the metrics endpoint reads."""
        return self.driver.state

    @property
    def alive(self) -> bool:
        return not self.driver.join(0)

    def start(self) -> None:
        self.driver.start(name=f"poll:{self.spec.name}")

    def restart(self) -> None:
        """The driver's thread ended by a bug: poll again, with a new tuner."""
        self.driver.replace_tuner(
            daemon_tuner(self.spec, self.state_dir), self.spec.mode, self.spec.mode != "observe"
        )
        self.start()

    def respec(self, spec: InstanceConfig) -> None:
        """New mode/bounds/FIFO for the same poll: keep tracker, window and findings; a new
        tuner (opened on its first good poll) when its settings changed."""
        if spec != self.spec:
            self.driver.replace_tuner(
                daemon_tuner(spec, self.state_dir), spec.mode, spec.mode != "observe"
            )
            self._tuner_log = TunerLog(spec, self.state_dir)
        self.rules.settings = spec.rule_settings()
        self.spec = spec

    def _open_latency(self) -> LatencyStage | None:
        """The request log's stage (`latency = ADDR`); None, logged once, when its address
        cannot be bound now (another process, or the runner this one replaces, still holds
        it): tried again every `LATENCY_RETRY_SECONDS` while the polls go on."""
        if self.spec.latency is None:
            return None
        self._latency_tried = time.monotonic()
        try:
            stage = LatencyStage(self.spec.latency)
        except ReqlogAddressError as exc:
            if str(exc) != self._latency_said:
                self._latency_said = str(exc)
                event(
                    "latency_unavailable",
                    logging.WARNING,
                    instance=self.spec.name,
                    latency=self.spec.latency,
                    error=str(exc),
                    retry_seconds=LATENCY_RETRY_SECONDS,
                )
            return None
        self._latency_said = None
        event("latency_listening", instance=self.spec.name, latency=stage.address)
        return stage

    def _retry_latency(self) -> None:
        """In the driver's thread: the stage bound at last, from the next poll on."""
        if (
            self.spec.latency is None
            or self.driver.latency is not None
            or self.stopping
            or time.monotonic() - self._latency_tried < LATENCY_RETRY_SECONDS
        ):
            return
        stage = self._open_latency()
        if stage is not None:
            self.driver.latency = stage
            stage.start()

    def _changed(self, new: InstanceState) -> None:
        """In the driver's thread, after each published state: what changed, logged."""
        old, self._last = self._last, new
        self._retry_latency()
        self._log_latency(old, new)
        if new.frame is not None:
            self._log_change(old.frame, new.frame)
        log_findings(self.spec.name, old, new)
        if new.tuning is not old.tuning:  # a poll mid-apply carries the step's result
            log_actions(self.spec.name, new)
        self._tuner_log(new)

    def _log_change(self, prev: Frame | None, cur: Frame) -> None:
        name = self.spec.name
        if not cur.ok:
            if prev is None or prev.ok:
                event(
                    "disconnected",
                    logging.WARNING,
                    instance=name,
                    stats=self.spec.stats,
                    error=cur.error,
                )
            return
        if cur.stats_repairs and not (prev and prev.stats_repairs):
            event(
                "stats_repaired",
                logging.WARNING,
                instance=name,
                stats=self.spec.stats,
                strings=cur.stats_repairs,
            )
        if prev is None or not prev.ok:
            down = None if prev is None else round(cur.t - (prev.disconnected_since or prev.t), 1)
            event(
                "connected",
                instance=name,
                stats=self.spec.stats,
                version=cur.version,
                master_pid=cur.master_pid,
                workers=cur.live,
                slots=cur.workers_max,
                down_seconds=down,
            )
        elif cur.kind in ("reload", "restart") and cur is not prev:
            event(
                f"uwsgi_{cur.kind}",
                instance=name,
                master_pid=cur.master_pid,
                workers=cur.live,
                slots=cur.workers_max,
            )

    def _log_latency(self, old: InstanceState, new: InstanceState) -> None:
        """The request log's problems, logged when they begin and end."""
        a, b = old.latency, new.latency
        if b is None:
            return
        name = self.spec.name
        if b.mismatch != (a.mismatch if a is not None else None):
            if b.mismatch is not None:
                event("latency_format_mismatch", logging.WARNING, instance=name, fix=b.mismatch)
            else:
                event("latency_format_ok", instance=name)
        if b.trusted != (a.trusted if a is not None else True):
            if b.trusted:
                event("latency_trusted", instance=name)
            else:
                event("latency_untrusted", logging.WARNING, instance=name, reason=b.trust_note)

    def halt(self) -> None:
        """End an apply in flight now (verified within the grace, else rolled back)."""
        tuner = self.driver.tuner
        if tuner is not None:
            tuner.halt()

    async def stop(self, wait: float = STOP_WAIT_SECONDS, interrupt: bool = True) -> None:
        """End the polls; an apply in flight ends in its own thread (`interrupt`: within
        its grace, else it runs to its end: a SIGHUP), which releases the lock: waited for
        up to `wait` seconds. A poll in flight (a hung stats socket) is not waited for when
        interrupting: the process is ending, and the kernel lets the lock go with it."""
        self.stopping = True
        self.driver.stop(interrupt)
        end = time.monotonic() + wait
        while not self.driver.join(0) and time.monotonic() < end:
            if interrupt and not self.driver.stepping:  # a poll in flight: abandoned
                break
            await asyncio.sleep(0.05)
        if not self.driver.join(0) and self.driver.stepping:
            fate = "its intent record stays in the audit log; the next start counts it"
            event(
                "apply_abandoned",
                logging.ERROR,
                instance=self.spec.name,
                waited=wait,
                effect=fate,
            )
