"""`TunerService.step` returns a typed `StepResult`: notes with a level and whether they
are new, the stop carried in every result (and resumed from the audit log, said in the
result of the step that opened the tuner), no result before the first good poll. No uWSGI:
the service over simulated frames (offline.py)."""

from __future__ import annotations

from pathlib import Path

from tests.actuate.offline import at, offline
from tests.support.frames import failed
from tests.tuner.plant import Plant
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.actuate.service import REPEAT_SECONDS, TunerService
from uwsgitune.core.frame import Frame
from uwsgitune.tuner.result import AuditRecord, Note, StepResult


def _tuner(
    frames: list[Frame], audit: AuditLog | None = None, clock: list[float] | None = None
) -> TunerService:
    now = clock or [frames[-1].mono]
    return offline(audit=audit, mono=lambda: now[0], wall=lambda: 5000.0)


def _step(tuner: TunerService, frames: list[Frame]) -> StepResult:
    result = tuner.step(at(frames))
    assert result is not None
    return result


def test_a_steady_decision_is_fresh_once_then_again_after_a_while() -> None:
    frames = [Plant(live=2).frame(float(t)) for t in range(3)]
    clock = [frames[-1].mono]
    tuner = _tuner(frames, clock=clock)
    first = _step(tuner, frames)
    (note,) = first.notes
    assert isinstance(note, Note) and note.fresh and note.kind == "decision"
    assert note.level == "info" and note.text.startswith("observe: ")
    assert first.decision is not None and note.text == f"observe: {first.decision.line()}"
    again = _step(tuner, frames)
    assert [n.fresh for n in again.notes] == [False] and again.notes[0].text == note.text
    clock[0] += REPEAT_SECONDS
    assert [n.fresh for n in _step(tuner, frames).notes] == [True]
    assert first.mode == "observe" and first.stopped is None and first.records == ()
    assert dict(first.moves) == {"fifo": 0, "reload": 0, "restart": 0}


def test_a_stop_in_the_audit_log_is_said_once_and_carried_in_every_result(tmp_path: Path) -> None:
    frames = [Plant(live=2).frame(float(t)) for t in range(3)]
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.append(AuditRecord("stop", 4000.0, frames[-1].source, "apply", reason="reload failed: x"))
    tuner = _tuner(frames, audit)
    first = _step(tuner, frames)
    stop = [n for n in first.notes if n.kind == "stop"]
    assert [(n.level, n.text) for n in stop] == [
        ("warning", "APPLY STOPPED (from the audit log): reload failed: x")
    ]
    second = _step(tuner, frames)
    assert not [n for n in second.notes if n.kind == "stop"]
    assert first.stopped == second.stopped == "reload failed: x"
    tuner.resume_apply()
    third = _step(tuner, frames)
    assert third.stopped is None and [r.event for r in third.records] == ["resume"]
    assert [r.event for r in audit.records()] == ["stop", "resume"]


def test_notes_said_on_opening_come_with_the_opening(tmp_path: Path) -> None:
    """What the tuner finds when it opens (a stop in the audit log) is in the result of the
    step that opened it, beside `opened`, for a caller that says it at once (`tune`, the
    daemon's log); never again after."""
    frames = [Plant(live=2).frame(0.0)]
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.append(AuditRecord("stop", 4000.0, frames[0].source, "apply", reason="setup: no FIFO"))
    tuner = _tuner(frames, audit)
    first = _step(tuner, frames)
    assert first.opened is not None and first.opened.mode == "observe"
    stops = [n.text for n in first.notes if n.kind == "stop"]
    assert stops == ["APPLY STOPPED (from the audit log): setup: no FIFO"]
    second = _step(tuner, frames)
    assert second.opened is None and not [n for n in second.notes if n.kind == "stop"]


def test_no_result_before_the_first_good_poll_and_no_apply_without_stats() -> None:
    frames = [Plant(live=2).frame(0.0)]
    tuner = _tuner(frames)
    assert tuner.step(at([])) is None  # no poll answered yet
    down = [failed(1)]
    assert tuner.step(at(down)) is None  # the first poll failed: nothing to open on
    tuner.request("up", 3)
    assert _step(tuner, frames).requested is not None  # opened: the request is served
    tuner.request("up", 3)
    result = _step(tuner, down)  # unreachable since
    assert result.requested is not None and result.requested.kind == "no-stats"
    assert result.requested.text == "not applied: no stats yet"
    assert result.outcome is None and not result.records
