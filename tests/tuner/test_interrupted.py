"""Interrupted applies, pure: an intent without its change resumes as a change that may have
happened; a stop cuts a reload's or a restart's wait to its grace; the daemon's tuner never
lets go of the lock while its thread applies; polls made while an apply waits are
published at once; the audit log fails in one line, never a traceback or a silent reset."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.rules.frames import failed, series
from tests.tui.fakes import FakeWatch
from uwsgitune.actuate import audit as audit_mod
from uwsgitune.actuate.audit import AuditError, AuditLog, interrupted, last_listen, resume
from uwsgitune.actuate.build import Built
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.halt import Halt
from uwsgitune.actuate.listen import ListenApplier, RestartCommand
from uwsgitune.actuate.override import Override
from uwsgitune.actuate.reload import Reloader
from uwsgitune.core.frame import Frame
from uwsgitune.daemon.config import InstanceConfig
from uwsgitune.daemon.tuning import InstanceTuner
from uwsgitune.exporter.metrics import Families, add_snapshot
from uwsgitune.pipeline import InstancePipeline
from uwsgitune.tuner import TunerState
from uwsgitune.tuner.result import AuditRecord, StepResult


def rec(event: str, t: float, **kw: Any) -> AuditRecord:
    return AuditRecord(event, t, "a", "apply", **kw)  # type: ignore[arg-type]


INTENT = rec("intent", 1300.0, action="down", via="reload", before=4, after=2, pid=77)
DONE = rec("change", 1330.0, action="down", via="reload", before=4, after=2, result="verified")


def test_an_intent_without_its_change_counts_as_a_change_and_is_reported() -> None:
    st, stopped = resume([INTENT], TunerState(), now_wall=1400.0, now_mono=500.0)
    assert stopped is None  # not a failure: nothing to resume by hand
    assert st.changes == (400.0,) and st.last_reload == 400.0  # the hourly limit, the settle
    assert interrupted([INTENT]) == INTENT
    # Finished: only its change counts, and nothing was interrupted.
    st, _ = resume([INTENT, DONE], TunerState(), 1400.0, 500.0)
    assert st.changes == (430.0,) and interrupted([INTENT, DONE]) is None
    listen = rec("intent", 1350.0, action="listen", via="restart", before=100, after=512)
    assert interrupted([INTENT, DONE, listen]) == listen
    assert last_listen([INTENT, DONE, listen], 1400.0, 500.0) == 450.0  # the listen pacing


def test_an_intent_round_trips_through_the_log(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(INTENT)
    line = json.loads(log.path.read_text())
    assert line["event"] == "intent" and line["pid"] == 77
    assert list(log.records("a")) == [INTENT]


def test_an_unreadable_audit_log_is_one_line_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    (tmp_path / "audit.jsonl").mkdir()
    with pytest.raises(AuditError) as exc:
        list(AuditLog(tmp_path / "audit.jsonl").records())
    msg = str(exc.value)
    assert "\n" not in msg and str(tmp_path / "audit.jsonl") in msg
    assert "Is a directory" in msg and "hourly and listen limits" in msg
    with pytest.raises(AuditError, match="cannot write"):
        AuditLog(tmp_path / "audit.jsonl").append(INTENT)


def test_a_line_that_is_not_utf8_costs_only_itself(tmp_path: Path) -> None:
    path = tmp_path / "audit.jsonl"
    good = json.dumps(INTENT.to_json(), sort_keys=True).encode()
    path.write_bytes(b"\xff\xfe garbage \x80\n" + good + b"\n")
    assert list(AuditLog(path).records()) == [INTENT]


def test_a_short_write_is_completed_and_no_progress_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = audit_mod.os.write
    monkeypatch.setattr(audit_mod.os, "write", lambda fd, data: real(fd, bytes(data)[:7]))
    log = AuditLog(tmp_path / "audit.jsonl")
    log.append(INTENT)
    log.append(DONE)
    assert list(log.records()) == [INTENT, DONE]
    monkeypatch.setattr(audit_mod.os, "write", lambda fd, data: 0)
    with pytest.raises(AuditError, match=r"cannot write .*no progress"):
        log.append(INTENT)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def _polls(halt: Halt, stop_at: int) -> Callable[[], Frame]:
    """Polls that never show the change; the stop comes at poll `stop_at`. Until then the
    wait sleeps on the stop (real time, a few polls), then on the fake clock."""
    polls = [0]

    def poll() -> Frame:
        polls[0] += 1
        if polls[0] == stop_at:
            halt.set()
        return failed(1)  # never back

    return poll


def test_a_stop_cuts_the_reload_wait_to_its_grace(tmp_path: Path) -> None:
    clock = Clock()
    halt = Halt(grace=10.0, mono=clock)
    reloader = Reloader(MasterFifo(tmp_path / "fifo"), tmp_path / "o.ini", None,
                        _polls(halt, 2), sleep=clock.sleep, mono=clock,
                        halt=halt)  # fmt: skip
    assert reloader._wait(Override(4, 1, 2), series(1)[0], until=100.0) is None
    assert 10.0 <= clock.now < 11.0  # 10 s of grace after the stop: not 100 s


def test_a_stop_cuts_the_restart_wait_to_its_grace(tmp_path: Path) -> None:
    clock = Clock()
    halt = Halt(grace=10.0, mono=clock)
    applier = ListenApplier(tmp_path / "o.ini", None, RestartCommand(("true",)),
                            _polls(halt, 2), sleep=clock.sleep, mono=clock,
                            halt=halt)  # fmt: skip
    assert applier._wait(512, series(1)[0], until=100.0) is False
    assert 10.0 <= clock.now < 11.0


class BlockingLoop:
    """A tuner loop whose step blocks (an apply waiting) until `go` is set."""

    def __init__(self) -> None:
        self.halt = Halt()
        self.go = threading.Event()
        self.mode = "apply"

    def step(self, frame: Frame, findings: object) -> StepResult:
        assert self.go.wait(10)
        return StepResult(None, "apply")


class Lock:
    held = True

    def release(self) -> None:
        self.held = False


@pytest.mark.parametrize("interrupt", [True, False])  # a stop; a SIGHUP's new tuner
def test_the_daemon_tuner_releases_the_lock_from_the_applying_thread(
    tmp_path: Path, interrupt: bool
) -> None:
    spec = InstanceConfig(name="a", stats="/tmp/none.sock", fifo=tmp_path / "fifo", mode="apply")
    tuner = InstanceTuner(spec, FakeWatch(), tmp_path)  # type: ignore[arg-type]
    loop, lock = BlockingLoop(), Lock()
    tuner.built = Built(loop, None, lock, None)  # type: ignore[arg-type]
    applying = threading.Thread(target=tuner.step, args=(series(1)[0], ()))
    applying.start()
    try:
        tuner.close(interrupt)  # from the event loop, while the poll thread applies
        assert loop.halt.is_set() == interrupt  # a stop ends the apply; a SIGHUP lets it run
        assert lock.held and not tuner.released.is_set()  # not pulled from under it
    finally:
        loop.go.set()
        applying.join(10)
    assert not lock.held and tuner.released.is_set()  # released by the applying thread
    assert tuner.step(series(1)[0], ()) is None  # closed: no step acts again


def test_polls_during_an_apply_are_published_at_once() -> None:
    frames = series(4)
    watch = FakeWatch(frames)
    seen: list[tuple[Frame | None, int]] = []

    def tuner(frame: Frame, findings: object) -> None:
        for _ in range(2):  # a reload's wait polls twice
            pipeline.poll()
            counts = pipeline.state.counts
            seen.append((pipeline.state.frame, counts.polls if counts else 0))

    pipeline = InstancePipeline(watch, "fake", tuner=tuner)
    pipeline.step()
    assert seen == [(frames[1], 2), (frames[2], 3)]
    state = pipeline.state
    assert state.frame is frames[2]  # the step ends on the latest poll, not its first
    assert state.counts is not None and state.counts.polls == 3
    assert state.counts.last_t == frames[2].t
    out = Families()
    add_snapshot(out, state)
    (family,) = [m for m in out if m.name == "uwsgitune_last_poll_timestamp_seconds"]
    assert family.samples[0].value == frames[2].t and family.samples[0].labels == {
        "stats_uri": "fake"
    }


def test_a_failed_poll_moves_the_timestamp_too() -> None:
    bad = failed(3)
    pipeline = InstancePipeline(FakeWatch([bad]), "fake")
    state = pipeline.step()
    assert state.counts is not None and state.counts.last_t == bad.t and bad.t > 0
