"""The daemon's log lines for what changed between two states of an instance: findings
raised and cleared, a failing rules engine, the tuner's audited actions."""

from __future__ import annotations

import logging

from uwsgitune.daemon.logs import event
from uwsgitune.pipeline import InstanceState


def log_findings(instance: str, old: InstanceState, new: InstanceState) -> None:
    """One line per finding raised or cleared, and one when the rules engine starts failing."""
    before = {f.id: f for f in old.findings}
    now = {f.id: f for f in new.findings}
    for fid, f in now.items():
        if fid not in before:
            event(
                "finding_raised",
                logging.WARNING,
                instance=instance,
                rule=fid,
                severity=f.severity,
                reason=f.reason,
            )
    for fid, f in before.items():
        if fid not in now:
            event("finding_cleared", instance=instance, rule=fid, severity=f.severity)
    if new.rules_error is not None and new.rules_error != old.rules_error:
        event("rules_failed", logging.ERROR, instance=instance, error=new.rules_error)


def log_actions(instance: str, state: InstanceState) -> None:
    """One line per change or verification the tuner audited at this poll."""
    for rec in state.tuning.records if state.tuning is not None else ():
        key = rec.counted()
        if key is not None:
            event("action", instance=instance, kind=key[0], result=key[1], detail=rec.detail)
