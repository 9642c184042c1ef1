"""Interrupted applies, pure: an intent without its change resumes as a change that may have
happened; a stop cuts a reload's or a restart's wait to its grace; a stopped driver never
lets go of its tuner's lock while its thread applies; polls made while an apply waits are
published at once; the audit log fails in one line, never a traceback or a silent reset."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.frames import failed, series
from tests.support.instances import Instance, Load
from uwsgitune.actuate import audit as audit_mod
from uwsgitune.actuate.audit import AuditError, AuditLog, interrupted, last_listen, resume
from uwsgitune.actuate.fifo import MasterFifo
from uwsgitune.actuate.override import Override
from uwsgitune.actuate.reload import Halt, Reloader
from uwsgitune.actuate.restart import ListenApplier, RestartCommand
from uwsgitune.core.frame import Frame
from uwsgitune.core.samples import Poll
from uwsgitune.exporter.metrics import Families, add_snapshot
from uwsgitune.pipeline import InstanceDriver, InstanceState, PollFn, poll_once
from uwsgitune.sources.recording import ReplaySource
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
    polls = _polls(halt, 2)
    fifo = MasterFifo(tmp_path / "fifo")
    reloader = Reloader(
        fifo, tmp_path / "o.ini", None, polls, sleep=clock.sleep, mono=clock, halt=halt
    )
    assert reloader._wait(Override(4, 1, 2), series(1)[0], until=100.0) is None
    assert 10.0 <= clock.now < 11.0  # 10 s of grace after the stop: not 100 s


def test_a_stop_cuts_the_restart_wait_to_its_grace(tmp_path: Path) -> None:
    clock = Clock()
    halt = Halt(grace=10.0, mono=clock)
    polls, restart = _polls(halt, 2), RestartCommand(("true",))
    applier = ListenApplier(
        tmp_path / "o.ini", None, restart, polls, sleep=clock.sleep, mono=clock, halt=halt
    )
    assert applier._wait(512, series(1)[0], until=100.0) is False
    assert 10.0 <= clock.now < 11.0


def _source(n: int, name: str = "fake") -> tuple[ReplaySource, list[Poll]]:
    """A source of `n` polls of a synthetic instance, read as fast as they come."""
    instance = Instance(name)
    polls = [instance.poll(float(i), Load(rps=10.0)) for i in range(n)]
    source = ReplaySource(name)
    for poll in polls:
        source.feed(poll)
    return source, polls


class Blocking:
    """A tuner whose step blocks (an apply waiting) until `go` is set: a `TunerStage`."""

    mode = "apply"

    def __init__(self, _poll: PollFn) -> None:
        self.halted = threading.Event()
        self.stepping = threading.Event()
        self.go = threading.Event()
        self.closed_by: threading.Thread | None = None  # where `close` released the lock

    def step(self, state: InstanceState) -> StepResult | None:
        self.stepping.set()
        assert self.go.wait(10)
        return StepResult(None, "apply")

    def request(self, action: str, desired: int) -> None:
        pass

    def halt(self) -> None:
        self.halted.set()

    def close(self) -> None:
        self.closed_by = threading.current_thread()


@pytest.mark.parametrize("interrupt", [True, False])  # a stop; a SIGHUP's
def test_the_tuner_is_closed_by_the_applying_thread_after_its_step(interrupt: bool) -> None:
    """The daemon stops an instance from its event loop while the driver's thread applies:
    the lock (released by the tuner's `close`) is never pulled from under the apply."""
    source, _ = _source(3)
    driver = InstanceDriver(source, tuner=Blocking)
    tuner = driver.tuner
    assert isinstance(tuner, Blocking)
    thread = driver.start()
    try:
        assert tuner.stepping.wait(10)
        driver.stop(interrupt)  # from the event loop, while the driver's thread applies
        assert tuner.halted.is_set() == interrupt  # a stop ends the apply; a SIGHUP lets it run
        assert not driver.join(0.2) and tuner.closed_by is None  # not pulled from under it
    finally:
        tuner.go.set()
        assert driver.join(10)
    assert tuner.closed_by is thread  # closed by the applying thread, after its step
    assert driver.tuner is None and not source.exhausted  # closed: no step acts again


class Waits:
    """A tuner whose step polls twice, as a reload's wait does; what the subscribers had
    been told right after each poll."""

    mode = "apply"
    waiting = None

    def __init__(self, poll: PollFn) -> None:
        self.poll = poll
        self.told: list[InstanceState] = []  # set by the test: the subscriber's list
        self.seen: list[tuple[float | None, int]] = []

    def step(self, state: InstanceState) -> StepResult | None:
        for _ in range(2):
            self.poll()
            last = self.told[-1]
            frame_t = last.frame.t if last.frame is not None else None
            self.seen.append((frame_t, last.counts.polls if last.counts else 0))
        return None

    def request(self, action: str, desired: int) -> None:
        pass

    def halt(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_polls_during_an_apply_are_published_at_once() -> None:
    source, polls = _source(3)
    driver = InstanceDriver(source, tuner=Waits)
    tuner = driver.tuner
    assert isinstance(tuner, Waits)
    driver.subscribe(tuner.told.append)
    driver.run(until=lambda _state: True)  # one step of the tuner
    assert tuner.seen == [(polls[1].t, 2), (polls[2].t, 3)]
    state = driver.state
    assert state.frame is not None and state.frame.t == polls[2].t  # the latest poll's
    assert state.counts is not None and state.counts.polls == 3
    assert state.counts.last_t == polls[2].t
    out = Families()
    add_snapshot(out, state)
    (family,) = [m for m in out if m.name == "uwsgitune_last_poll_timestamp_seconds"]
    assert family.samples[0].value == polls[2].t
    assert family.samples[0].labels == {"stats_uri": source.uri}


def test_a_failed_poll_moves_the_timestamp_too() -> None:
    source = ReplaySource("fake")
    bad = Poll("fake", 1_700_000_003.0, 1003.0, error="fake: connection refused")
    source.feed(bad)
    state = poll_once(source)
    assert state.counts is not None and state.counts.last_t == bad.t and bad.t > 0
