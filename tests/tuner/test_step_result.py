"""`TuneLoop.step` returns a typed `StepResult`: notes with a level and whether they are new,
the stop carried in every result (and resumed from the audit log), no result without a
frame. No uWSGI: a fake watch over simulated frames."""

from __future__ import annotations

from pathlib import Path

from uwsgitune.actuate.loop import REPEAT_SECONDS, TuneLoop

from tests.tuner.plant import Plant
from tests.tuner.test_tui_advise import _Watch
from uwsgitune.actuate.audit import AuditLog
from uwsgitune.tuner import TunerSettings
from uwsgitune.tuner.result import AuditRecord, Note

ADDRESS = _Watch.address


def _loop(frames: list, audit: AuditLog | None = None, clock: list[float] | None = None):  # type: ignore[no-untyped-def,type-arg]
    watch = _Watch(frames)
    now = clock or [frames[-1].mono]
    loop = TuneLoop(watch, None, None, TunerSettings(max_workers=8), "observe", audit,  # type: ignore[arg-type]
                    mono=lambda: now[0], wall=lambda: 5000.0)  # fmt: skip
    return loop, watch


def test_a_steady_decision_is_fresh_once_then_again_after_a_while() -> None:
    frames = [Plant(live=2).frame(float(t)) for t in range(3)]
    clock = [frames[-1].mono]
    loop, watch = _loop(frames, clock=clock)
    first = loop.step(watch.frame, ())
    (note,) = first.notes
    assert isinstance(note, Note) and note.fresh and note.kind == "decision"
    assert note.level == "info" and note.text.startswith("observe: ")
    assert first.decision is not None and note.text == f"observe: {first.decision.line()}"
    again = loop.step(watch.frame, ())
    assert [n.fresh for n in again.notes] == [False] and again.notes[0].text == note.text
    clock[0] += REPEAT_SECONDS
    assert [n.fresh for n in loop.step(watch.frame, ()).notes] == [True]
    assert first.mode == "observe" and first.stopped is None and first.records == ()
    assert dict(first.moves) == {"fifo": 0, "reload": 0, "restart": 0}


def test_a_stop_in_the_audit_log_is_said_once_and_carried_in_every_result(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.append(AuditRecord("stop", 4000.0, ADDRESS, "apply", reason="reload failed: x"))
    frames = [Plant(live=2).frame(float(t)) for t in range(3)]
    loop, watch = _loop(frames, audit)
    first = loop.step(watch.frame, ())
    stop = [n for n in first.notes if n.kind == "stop"]
    assert [(n.level, n.text) for n in stop] == [
        ("warning", "APPLY STOPPED (from the audit log): reload failed: x")
    ]
    second = loop.step(watch.frame, ())
    assert not [n for n in second.notes if n.kind == "stop"]
    assert first.stopped == second.stopped == "reload failed: x"
    loop.resume_apply()
    third = loop.step(watch.frame, ())
    assert third.stopped is None and [r.event for r in third.records] == ["resume"]
    assert [r.event for r in audit.records()] == ["stop", "resume"]


def test_notes_said_on_start_can_be_taken_at_once(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    audit.append(AuditRecord("stop", 4000.0, ADDRESS, "apply", reason="setup: no FIFO"))
    loop, watch = _loop([Plant(live=2).frame(0.0)], audit)
    assert loop.take_notes() == ("APPLY STOPPED (from the audit log): setup: no FIFO",)
    assert not [n for n in loop.step(watch.frame, ()).notes if n.kind == "stop"]


def test_apply_now_without_a_frame_has_no_decision() -> None:
    loop, watch = _loop([Plant(live=2).frame(0.0)])
    watch.window.items = []  # no poll answered yet
    result = loop.apply_now(("up", 3))
    assert result.decision is None and result.outcome is None and not result.notes
