"""The daemon's side of an instance's tuner: its setup from the config, its audit log, and
the log lines its results make.

The tuner itself is the driver's (actuate/service.py), built the way `tune` and the TUI
build theirs, from the instance's `[[instance]]` table: its audit log is
`<state_dir>/<instance>.audit.jsonl`, so a restarted daemon resumes its pacing and a stop;
in apply mode, when another uwsgitune holds the instance's lock, it observes and tries
again every `LOCK_RETRY_SECONDS`.

`TunerLog` turns each step's result into structured events: how the tuner opened (or
could not apply), its notes only when the decision changed (a steady `hold` logs once, not
once per poll), warnings, errors and listen advice (said once per value) always. An audit
log that fails is said once per kind (`EventAudit`) and never raises into the tuner, but
for an intent: the change it announces is then refused, nothing having been done yet.
"""

from __future__ import annotations

import logging
from pathlib import Path

from uwsgitune.actuate.audit import AuditError, AuditLog
from uwsgitune.actuate.peer import PeerCheck
from uwsgitune.actuate.restart import RestartCommand
from uwsgitune.actuate.service import TunerSetup, tuner_factory
from uwsgitune.core.address import parse_address
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.logs import event
from uwsgitune.pipeline import InstanceState, TunerFactory
from uwsgitune.tuner.result import AuditRecord, Note, Opened, StepResult

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
                event(
                    "audit_failed",
                    logging.ERROR,
                    instance=self.instance,
                    path=self.path,
                    error=str(exc),
                )
            self.failed = str(exc)
            if record.event == "intent":
                raise


def audit_path(spec: InstanceConfig, state_dir: Path) -> Path:
    return state_dir / f"{spec.name}.audit.jsonl"


def daemon_tuner(spec: InstanceConfig, state_dir: Path) -> TunerFactory | None:
    """The instance's tuner, as the driver builds it; None without a FIFO (nothing to act
    on: the instance is only watched)."""
    if spec.fifo is None:
        return None
    restart = RestartCommand(spec.restart_command) if spec.restart_command else None
    setup = TunerSetup(
        stats=parse_address(spec.stats),
        fifo=spec.fifo,
        settings=spec.tuner_settings,
        mode=spec.mode,
        override=spec.override,
        audit=EventAudit(audit_path(spec, state_dir), spec.name),
        restart=restart,
        role=f"uwsgitune daemon, instance {spec.name}",
        peer=PeerCheck(trust_tcp=spec.trust_tcp_stats, opt_in=_opt_in(spec)),
        lock_retry=LOCK_RETRY_SECONDS,
    )
    return tuner_factory(setup)


def _opt_in(spec: InstanceConfig) -> str:
    return f"set trust_tcp_stats = true for instance {spec.name} (--trust-tcp-stats)"


class TunerLog:
    """A driver's subscriber: the events of the tuner's results, each result once."""

    def __init__(self, spec: InstanceConfig, state_dir: Path) -> None:
        self.spec = spec
        self.audit = audit_path(spec, state_dir)
        self._seen: StepResult | None = None
        self._started = False
        self._key: tuple[object, ...] | None = None
        self._error: str | None = None

    def __call__(self, state: InstanceState) -> None:
        if state.tuner_error is not None and state.tuner_error != self._error:
            event("tuner_error", logging.ERROR, instance=self.spec.name, error=state.tuner_error)
        self._error = state.tuner_error
        result = state.tuning
        if result is None or result is self._seen:  # a poll mid-apply: the same result
            return
        self._seen = result
        if result.opened is not None:
            self._opened(result.opened)
        self.log(result)

    def _opened(self, opened: Opened) -> None:
        name = self.spec.name
        for problem, kind, level, key, effect in (
            (
                opened.fifo_problem,
                "fifo_unusable",
                logging.WARNING,
                "error",
                "every write is checked again; none goes to an unproven FIFO",
            ),
            (
                opened.audit_problem,
                "audit_unreadable",
                logging.ERROR,
                "error",
                "observing instead; fix the file, then restart uwsgitune",
            ),
            (opened.lock_problem, "apply_locked", logging.WARNING, "holder", "observing instead"),
        ):
            if problem:
                event(kind, level, instance=name, **{key: problem}, effect=effect)
        if self._started:  # opened again: the lock came free
            event("apply_unlocked", instance=name, effect="applying from now on")
            return
        self._started = True
        event(
            "tuner_started",
            instance=name,
            mode=opened.mode,
            floor=opened.floor,
            ceiling=opened.ceiling,
            audit=self.audit,
        )

    def log(self, result: StepResult) -> None:
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
                event(
                    "tuner",
                    level,
                    instance=self.spec.name,
                    action=d.action,
                    code=d.code,
                    live=d.live,
                    desired=d.desired,
                    line=note.text,
                    evidence=dict(d.evidence),  # raw units, for --log-format json
                )


def _loud(note: Note) -> bool:
    return note.level != "info" or note.kind == "listen"
