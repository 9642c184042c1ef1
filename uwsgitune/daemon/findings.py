"""The rules engine as the daemon uses it: findings per instance, raised and cleared.

The engine (`uwsgitune.rules.evaluate`) is pure and developed on its own; the daemon calls it
defensively: if it is missing or raises, the daemon logs that once and keeps monitoring
without findings rather than dying.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from uwsgitune.core.frame import Frame
from uwsgitune.daemon.logs import event

# Rules look back at most this far (idle and memory windows are 60 s by default).
LOOKBACK_SECONDS = 120.0


@dataclass(frozen=True)
class Active:
    """What the daemon keeps of a finding: enough for metrics and log lines."""

    id: str
    severity: str
    reason: str
    setting: str | None = None
    value: float | None = None  # the recommended value, when it is a number


def _engine() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    try:
        from uwsgitune.rules import Facts, evaluate
    except Exception:  # an engine under construction must not stop the daemon
        return None
    return evaluate, Facts


def _active(finding: Any) -> Active:
    rec = getattr(finding, "recommendation", None)
    value = getattr(rec, "value", None)
    number = (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    )
    return Active(
        id=str(finding.id),
        severity=str(finding.severity),
        reason=str(getattr(finding, "reason", "")),
        setting=str(rec.setting) if rec is not None and number is not None else None,
        value=number,
    )


class FindingsTracker:
    """Runs the engine on one instance's frames and reports what changed."""

    def __init__(
        self,
        instance: str,
        stats_kind: str,
        engine: tuple[Callable[..., Any], Callable[..., Any]] | None = None,
        settings: Any = None,  # RuleSettings ([instance.rules]); None: the defaults
    ) -> None:
        self.instance = instance
        self.settings = settings
        self.active: dict[str, Active] = {}
        self.found: tuple[Any, ...] = ()  # the engine's latest findings, for the tuner
        self._state: Any = None
        self._engine = engine or _engine()
        self._facts = self._engine[1](stats_kind=stats_kind) if self._engine else None
        self._failed = False

    def update(self, frames: Sequence[Frame]) -> None:
        if self._engine is None or self._failed or not frames:
            return
        try:
            found, self._state = self._engine[0](frames, self._facts, self.settings, self._state)
            now = {a.id: a for a in map(_active, found)}
            self.found = tuple(found)
        except Exception as exc:
            self._failed = True
            event("rules_failed", logging.ERROR, instance=self.instance, error=repr(exc))
            return
        for fid, a in now.items():
            if fid not in self.active:
                event("finding_raised", logging.WARNING, instance=self.instance, rule=fid,
                      severity=a.severity, reason=a.reason)  # fmt: skip
        for fid, a in self.active.items():
            if fid not in now:
                event("finding_cleared", instance=self.instance, rule=fid, severity=a.severity)
        self.active = now

    def pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple((a.id, a.severity) for a in self.active.values())

    def recommended(self) -> tuple[tuple[str, float], ...]:
        out: dict[str, float] = {}
        for a in self.active.values():
            if a.setting is not None and a.value is not None:
                out.setdefault(a.setting, a.value)  # findings come worst first
        return tuple(sorted(out.items()))
