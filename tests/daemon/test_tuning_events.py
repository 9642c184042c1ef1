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
from uwsgitune.pipeline.state import InstanceState, count_actions
from uwsgitune.tuner import Decision
from uwsgitune.tuner.result import AuditRecord, Note, Opened, StepResult

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


def test_each_opening_problem_is_its_own_event_with_its_effect(
    tmp_path: Path, events: list[tuple[str, int, dict[str, Any]]]
) -> None:
    t = _tuner(tmp_path)
    opened = Opened(
        "observe",
        1,
        8,
        fifo_problem="/run/app.fifo: no such file",
        lock_problem="held by pid 7 (uwsgitune tune)",
        audit_problem="audit log /x: cannot read (Is a directory)",
    )
    t(InstanceState("unix:///run/app.sock", tuning=StepResult(HOLD, "observe", opened=opened)))
    by_name = {name: (level, fields) for name, level, fields in events}
    assert by_name["fifo_unusable"] == (
        logging.WARNING,
        {
            "instance": "app",
            "error": "/run/app.fifo: no such file",
            "effect": "every write is checked again; none goes to an unproven FIFO",
        },
    )
    level, fields = by_name["audit_unreadable"]
    assert level == logging.ERROR and fields["error"].startswith("audit log /x: cannot read")
    assert list(fields) == ["instance", "error", "effect"]
    level, fields = by_name["apply_locked"]
    assert (level, fields["holder"], fields["effect"]) == (
        logging.WARNING,
        "held by pid 7 (uwsgitune tune)",
        "observing instead",
    )
    assert by_name["tuner_started"][1]["mode"] == "observe"
    events.clear()
    t(
        InstanceState(
            "unix:///run/app.sock", tuning=StepResult(HOLD, "observe", opened=Opened("apply"))
        )
    )
    assert [name for name, _, _ in events] == ["apply_unlocked"]  # opened again: the lock came free
