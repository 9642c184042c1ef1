"""The daemon's tuner log (`TunerLog`) turns a step's typed notes into `tuner` events, and
its audit records count as actions: decision lines only when the decision changed,
warnings, errors and new listen advice always, repeats never. No uWSGI: results are built
by hand."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from uwsgitune.daemon import tuning
from uwsgitune.daemon.config import validate
from uwsgitune.daemon.tuning import TunerLog
from uwsgitune.pipeline.state import count_actions
from uwsgitune.tuner import Decision
from uwsgitune.tuner.result import AuditRecord, Note, StepResult

HOLD = Decision("hold", "steady", 2, 2, "steady")
UP = Decision("up", "saturated", 3, 2, "all busy", "fifo")


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, dict[str, Any]]]:
    seen: list[tuple[str, int, dict[str, Any]]] = []

    def record(name: str, level: int = logging.INFO, **fields: Any) -> None:
        seen.append((name, level, fields))

    monkeypatch.setattr(tuning, "event", record)
    return seen


def _tuner(tmp_path: Path) -> TunerLog:
    spec = validate({"instance": [{"name": "app", "stats": "/run/app.sock"}]}, "t").instance[0]
    return TunerLog(spec, tmp_path)


def _said(events: list[tuple[str, int, dict[str, Any]]]) -> list[tuple[int, str]]:
    out = [(level, f["line"]) for name, level, f in events if name == "tuner"]
    events.clear()
    return out


def test_decisions_are_logged_when_they_change_and_loud_notes_always(
    tmp_path: Path, events: list[tuple[str, int, dict[str, Any]]]
) -> None:
    t = _tuner(tmp_path)
    hold = Note("info", "decision", "apply: hold 2->2 [steady] steady")
    t.log(StepResult(HOLD, "apply", (hold,)))
    assert _said(events) == [(logging.INFO, hold.text)]
    t.log(StepResult(HOLD, "apply", (hold,)))  # the same decision, said again: not logged
    warn = Note("warning", "verify", "WARNING: change not seen within 6s: live 2")
    listen = Note("info", "listen", "apply: listen 100 -> 512 [held] 3 changes in the last hour")
    stale = Note("info", "listen", listen.text, fresh=False)
    t.log(StepResult(HOLD, "apply", (hold, warn, listen)))
    assert _said(events) == [(logging.WARNING, warn.text), (logging.WARNING, listen.text)]
    t.log(StepResult(HOLD, "apply", (stale,)))  # listen advice once per value
    assert _said(events) == []
    quiet = Note("info", "decision", "apply: up 2->3", fresh=False)
    t.log(StepResult(UP, "apply", (quiet,)))  # a repeat is never logged, changed or not
    assert _said(events) == []


def test_actions_are_counted_from_the_records() -> None:
    sent = AuditRecord("change", 1.0, "app", "apply", action="up", via="fifo", before=2, after=3)
    sent = replace(sent, result="sent", detail="wrote '+'")
    verified = AuditRecord("verify", 2.0, "app", "apply", result="verified", after=3)
    stop = AuditRecord("stop", 3.0, "app", "apply", reason="x")
    actions = count_actions((), StepResult(HOLD, "apply", records=(sent, verified, stop)))
    assert [(k, r) for k, r, _ in actions] == [("fifo", "sent"), ("verify", "verified")]
