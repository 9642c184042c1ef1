"""The daemon's tuner for one instance: a `TuneLoop`, built on the first good frame.

Everything here runs in the instance's poll thread, after a good frame. The loop's log lines
become structured events only when the decision changes (a steady `hold` logs once, not
once per poll); warnings and errors always do. Audited actions are queued for the runner,
which counts them on the event loop (`uwsgitune_actions_total{kind,result}`). The audit log
is `<state_dir>/<instance>.audit.jsonl`, so a restarted daemon resumes its pacing and a stop.
In apply mode the instance's lock is taken (see `actuate.lock`); when another uwsgitune
holds it, this one observes and tries again every `LOCK_RETRY_SECONDS`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from uwsgitune.actuate.audit import AuditLog, Record
from uwsgitune.actuate.build import Built, build_loop
from uwsgitune.actuate.listen import RestartCommand
from uwsgitune.actuate.lock import ApplyLock
from uwsgitune.core.frame import Frame
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.logs import event
from uwsgitune.rules.finding import Finding
from uwsgitune.sources.watcher import InstanceWatch
from uwsgitune.tuner import Decision, TunerSettings

LOCK_RETRY_SECONDS = 10.0
Action = tuple[str, str, dict[str, Any]]


class EventAudit(AuditLog):
    """An audit log that also reports each record, and never raises into the tuner: an
    action already taken must not crash the poll because the disk is full."""

    def __init__(self, path: Path, instance: str, on_record: Callable[[Record], None]) -> None:
        super().__init__(path)
        self.instance, self.on_record = instance, on_record
        self.failed: str | None = None

    def append(self, record: Record) -> None:
        try:
            super().append(record)
            self.failed = None
        except OSError as exc:
            if self.failed != exc.strerror:
                fix = "free space or fix the permissions of state_dir"
                event("audit_failed", logging.ERROR, instance=self.instance, path=self.path,
                      error=exc.strerror, fix=fix)  # fmt: skip
            self.failed = exc.strerror
        self.on_record(record)


class InstanceTuner:
    def __init__(self, spec: InstanceConfig, watch: InstanceWatch, state_dir: Path) -> None:
        self.spec, self.watch, self.state_dir = spec, watch, state_dir
        self.built: Built | None = None
        self.actions: list[Action] = []  # drained by the runner (list.pop is atomic)
        self._key: tuple[object, ...] | None = None
        self._lines: list[str] = []
        self._lock_retry = 0.0
        self._error: str | None = None

    def step(self, frame: Frame, findings: Sequence[Finding] | None = None) -> Decision | None:
        if not frame.ok or self.spec.fifo is None:
            return None
        try:
            if self.built is None:
                self.built = self._build(frame)
            self._retry_lock()
            d = self.built.loop.step(frame, findings)
        except Exception as exc:  # a bug must not stop the polls: log it once per kind
            self._lines.clear()
            if repr(exc) != self._error:
                event("tuner_error", logging.ERROR, instance=self.spec.name, error=repr(exc))
            self._error = repr(exc)
            return None
        self._log(d)
        return d

    def decision(self) -> tuple[str, str, int] | None:
        """The last decision (action, code, desired), for `uwsgitune_tuner_desired_workers`."""
        d = self.built.loop.last if self.built is not None else None
        return None if d is None else (d.action, d.code, d.desired)

    def close(self) -> None:
        if self.built is not None and self.built.lock is not None:
            self.built.lock.release()

    def _build(self, frame: Frame) -> Built:
        spec = self.spec
        assert spec.fifo is not None
        settings: TunerSettings = spec.tuner_settings(frame.workers_max)
        top = settings.max_workers
        path = self.state_dir / f"{spec.name}.audit.jsonl"
        audit = EventAudit(path, spec.name, self._on_record)
        role = f"uwsgitune daemon, instance {spec.name}"
        built = build_loop(self.watch, frame, fifo=spec.fifo, override=spec.override, ini=None,
                           settings=settings, mode=spec.mode, audit=audit,
                           log=self._lines.append, role=role,
                           restart=RestartCommand(spec.restart_command)
                           if spec.restart_command else None)  # fmt: skip
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
            b.lock, b.lock_problem, b.loop.mode = lock, None, "apply"
            event("apply_unlocked", instance=self.spec.name, effect="applying from now on")
        else:
            self._lock_retry = time.monotonic() + LOCK_RETRY_SECONDS

    def _on_record(self, record: Record) -> None:
        if record.get("event") == "change":
            self.actions.append((str(record.get("via")), str(record.get("result")), record))
        elif record.get("event") == "verify":
            self.actions.append(("verify", str(record.get("result")), record))

    def _log(self, d: Decision) -> None:
        """Decision lines only when the decision changed; every warning and error."""
        key = (d.action, d.code, d.desired, d.live, self.built.loop.mode if self.built else "")
        changed, self._key = key != self._key, key
        for line in self._lines:
            loud = line.startswith(("WARNING", "ERROR", "APPLY STOPPED", "apply STOPPED"))
            loud = loud or ": listen " in line  # listen advice is said once per value
            if loud or changed:
                level = logging.WARNING if loud else logging.INFO
                event("tuner", level, instance=self.spec.name, action=d.action, code=d.code,
                      live=d.live, desired=d.desired, line=line)  # fmt: skip
        self._lines.clear()
