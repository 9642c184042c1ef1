"""The daemon's tuner for one instance: a `TuneLoop`, built on the first good frame.

Everything here runs in the instance's poll thread, after a good frame. The step's notes
become structured events only when the decision changes (a steady `hold` logs once, not once
per poll); warnings, errors and listen advice (said once per value) always do. The step's
audit records are queued for the runner, which counts them on the event loop
(`uwsgitune_actions_total{kind,result}`). The audit log is
`<state_dir>/<instance>.audit.jsonl`, so a restarted daemon resumes its pacing and a stop.
In apply mode the instance's lock is taken (see `actuate.lock`); when another uwsgitune
holds it, this one observes and tries again every `LOCK_RETRY_SECONDS`. An audit log that
cannot be read is said once (`audit_unreadable`) and the tuner observes: applying without
its history would reset the hourly and listen limits.

`close` (the daemon stopping, or a new tuner after SIGHUP) never pulls the lock from under
an apply in flight: the poll thread that applies ends the apply (`halt`: verified within
the grace, else rolled back and audited), then releases the lock itself and sets `released`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from uwsgitune.actuate.audit import AuditError, AuditLog
from uwsgitune.actuate.build import Built, build_loop
from uwsgitune.actuate.listen import RestartCommand
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.core.frame import Frame
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.logs import event
from uwsgitune.rules.finding import Finding
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import TunerSettings
from uwsgitune.tuner.result import AuditRecord, Note, StepResult

LOCK_RETRY_SECONDS = 10.0


class EventAudit(AuditLog):
    """An audit log that never raises into the tuner: an action already taken must not
    crash the poll because the disk is full. A failure is logged once per kind."""

    def __init__(self, path: Path, instance: str) -> None:
        super().__init__(path)
        self.instance = instance
        self.failed: str | None = None

    def append(self, record: AuditRecord) -> None:
        """Logged once per kind of failure; an intent that cannot be written is raised (the
        change it announces is then refused: nothing was done yet)."""
        try:
            super().append(record)
            self.failed = None
        except AuditError as exc:
            if self.failed != str(exc):
                event("audit_failed", logging.ERROR, instance=self.instance, path=self.path,
                      error=str(exc))  # fmt: skip
            self.failed = str(exc)
            if record.event == "intent":
                raise


class InstanceTuner:
    def __init__(
        self,
        spec: InstanceConfig,
        watch: InstanceWatch,
        state_dir: Path,
        poll: Callable[[], Frame] | None = None,
    ) -> None:
        self.spec, self.watch, self.state_dir = spec, watch, state_dir
        self.poll = poll  # what a reload's wait polls through (the pipeline: it publishes)
        self.built: Built | None = None
        self.released = threading.Event()  # closed, and the lock let go by the last step
        self._key: tuple[object, ...] | None = None
        self._lock_retry = 0.0
        self._error: str | None = None
        self._guard = threading.Lock()
        self._busy = self._closed = False

    def step(self, frame: Frame, findings: Sequence[Finding]) -> StepResult | None:
        """The loop's step on a good frame (built on the first); None: no tuner here, it
        is closed, or it failed (logged once per kind)."""
        if not frame.ok or self.spec.fifo is None:
            return None
        with self._guard:
            if self._closed:
                return None
            self._busy = True
        try:
            return self._step(frame, findings)
        finally:
            with self._guard:
                self._busy = False
                if self._closed:
                    self._release()

    def _step(self, frame: Frame, findings: Sequence[Finding]) -> StepResult | None:
        try:
            if self.built is None:
                self.built = self._build(frame)
            self._retry_lock()
            result = self.built.loop.step(frame, findings)
        except Exception as exc:  # a bug must not stop the polls: log it once per kind
            if repr(exc) != self._error:
                event("tuner_error", logging.ERROR, instance=self.spec.name, error=repr(exc))
            self._error = repr(exc)
            return None
        self._log(result)
        return result

    def close(self, interrupt: bool = True) -> None:
        """No more steps. `interrupt`: an apply in flight ends within its grace (else it
        runs to its deadline: a SIGHUP). The lock is released now when no step runs, else
        by that step's thread when it ends; `released` says when."""
        if interrupt:
            self.halt()
        with self._guard:
            self._closed = True
            if not self._busy:
                self._release()

    def halt(self) -> None:
        if self.built is not None:
            self.built.loop.halt.set()

    def _release(self) -> None:
        if self.built is not None and self.built.lock is not None:
            self.built.lock.release()
        self.released.set()

    def _build(self, frame: Frame) -> Built:
        spec = self.spec
        assert spec.fifo is not None
        settings: TunerSettings = spec.tuner_settings(frame.workers_max)
        top = settings.max_workers
        path = self.state_dir / f"{spec.name}.audit.jsonl"
        audit = EventAudit(path, spec.name)
        readable = _readable(audit)  # else applying would start from no history
        mode = spec.mode if readable or spec.mode != "apply" else "observe"
        built = build_loop(self.watch, frame, fifo=spec.fifo, override=spec.override, ini=None,
                           settings=settings, mode=mode, audit=audit if readable else None,
                           role=f"uwsgitune daemon, instance {spec.name}",
                           restart=RestartCommand(spec.restart_command)
                           if spec.restart_command else None, peer=_peer(spec))  # fmt: skip
        if self.poll is not None:
            built.loop.poll = self.poll
        if built.fifo_problem:
            event("fifo_unusable", logging.WARNING, instance=spec.name, error=built.fifo_problem,
                  effect="every write is checked again; none goes to an unproven FIFO")  # fmt: skip
        if built.lock_problem:
            self._lock_retry = time.monotonic() + LOCK_RETRY_SECONDS
            event("apply_locked", logging.WARNING, instance=spec.name, holder=built.lock_problem,
                  effect="observing instead")  # fmt: skip
        event("tuner_started", instance=spec.name, mode=built.loop.mode, floor=spec.min_workers,
              ceiling=top, audit=path)  # fmt: skip
        return built

    def _retry_lock(self) -> None:
        b = self.built
        if b is None or b.lock_problem is None or time.monotonic() < self._lock_retry:
            return
        assert self.spec.fifo is not None
        lock = ApplyLock(self.spec.fifo, f"uwsgitune daemon, instance {self.spec.name}")
        problem = lock.acquire()
        if problem is None:
            b.lock, b.lock_problem, b.loop.mode, b.loop.lock = lock, None, "apply", lock
            event("apply_unlocked", instance=self.spec.name, effect="applying from now on")
        else:
            self._lock_retry = time.monotonic() + LOCK_RETRY_SECONDS

    def _log(self, result: StepResult) -> None:
        """Decision notes only when the decision changed; every warning, error and new
        listen advice. Repeats (notes that are not fresh) are not logged."""
        d = result.decision
        if d is None:
            return
        key = (d.action, d.code, d.desired, d.live, result.mode)
        changed, self._key = key != self._key, key
        for note in result.notes:
            if note.fresh and (_loud(note) or changed):
                level = logging.WARNING if _loud(note) else logging.INFO
                event("tuner", level, instance=self.spec.name, action=d.action, code=d.code,
                      live=d.live, desired=d.desired, line=note.text)  # fmt: skip


def _peer(spec: InstanceConfig) -> PeerCheck:
    """The stats' proof, and how a refusal names this instance's opt-in."""
    opt_in = f"set trust_tcp_stats = true for instance {spec.name} (--trust-tcp-stats)"
    return PeerCheck(trust_tcp=spec.trust_tcp_stats, opt_in=opt_in)


def _readable(audit: EventAudit) -> bool:
    try:
        list(audit.records())
    except AuditError as exc:
        event("audit_unreadable", logging.ERROR, instance=audit.instance, error=str(exc),
              effect="observing instead; fix the file, then restart uwsgitune")  # fmt: skip
        return False
    return True


def _loud(note: Note) -> bool:
    return note.level != "info" or note.kind == "listen"
