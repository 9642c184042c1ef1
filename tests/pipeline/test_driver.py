"""The one poll loop (pipeline/driver.py): every state to every subscriber, in order, the
polls a tuner makes mid-step included; the schedule and its backoff; a tuner replaced only
between two steps. Scripted sources and fake tuners: no sockets, no uWSGI."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from tests.support.instances import Instance
from tests.tui.fakes import ScriptedSource
from tests.tui.frames import history_polls, load
from uwsgitune.core.samples import Poll
from uwsgitune.pipeline import InstanceDriver, InstanceState, RulesRunner, run_replay
from uwsgitune.pipeline.driver import backoff_delay
from uwsgitune.sources.recording import ReplaySource
from uwsgitune.tuner import Decision
from uwsgitune.tuner.result import StepResult


@dataclass
class FakeTuner:
    """A tuner that records what it saw; `polls_mid_step` polls it makes in a step."""

    poll: Callable[[], InstanceState]
    polls_mid_step: int = 0
    mode: str = "observe"
    seen: list[InstanceState] = field(default_factory=list)
    closed: bool = False
    halted: bool = False
    waiting: None = None

    def step(self, state: InstanceState) -> StepResult:
        self.seen.append(state)
        for _ in range(self.polls_mid_step):
            self.poll()
        d = Decision("hold", "steady", state.frame.live if state.frame else 0, 0, "steady")
        return StepResult(d, self.mode)

    def request(self, action: str, desired: int) -> None:
        pass

    def halt(self) -> None:
        self.halted = True

    def close(self) -> None:
        self.closed = True


def _driver(polls: int = 5, **kw: object) -> tuple[InstanceDriver, list[InstanceState]]:
    driver = InstanceDriver(ScriptedSource(history_polls(polls)), **kw)  # type: ignore[arg-type]
    seen: list[InstanceState] = []
    driver.subscribe(seen.append)
    return driver, seen


def test_every_subscriber_gets_every_state_in_order() -> None:
    driver, first = _driver(5)
    second: list[InstanceState] = []
    driver.subscribe(second.append)
    driver.run()
    assert [s.frame.t for s in first if s.frame] == [p.t for p in history_polls(5)]
    assert first == second and first[-1] is driver.state
    assert [s.counts.polls for s in first if s.counts] == [1, 2, 3, 4, 5]


def test_a_failing_subscriber_is_said_once_and_the_polls_go_on(
    capsys: pytest.CaptureFixture[str],
) -> None:
    driver, seen = _driver(4)

    def broken(_state: InstanceState) -> None:
        raise RuntimeError("a sink's bug")

    driver.subscribe(broken)
    driver.run()
    assert len(seen) == 4
    assert capsys.readouterr().err.count("a subscriber failed") == 1


def test_the_rules_run_once_per_good_poll_and_their_findings_are_published() -> None:
    driver, seen = _driver(40, rules=RulesRunner())
    driver.run()
    again = RulesRunner()  # the same rules, run on each poll's window: the same hysteresis
    assert [s.findings for s in seen] == [again.run(s.frames) for s in seen]
    assert seen[-1].findings and all(s.rules_error is None for s in seen)


def test_polls_a_tuner_makes_mid_step_are_published_with_that_steps_results() -> None:
    tuners: list[FakeTuner] = []

    def factory(poll: Callable[[], InstanceState]) -> FakeTuner:
        tuners.append(FakeTuner(poll, polls_mid_step=2))
        return tuners[-1]

    driver, seen = _driver(9, tuner=factory)
    driver.run()
    (tuner,) = tuners
    assert len(tuner.seen) == 3  # 9 polls: 3 steps, each polling twice more
    assert len(seen) == 9  # every poll published, the mid-step ones at once
    for step in range(3):
        mid = seen[3 * step : 3 * step + 2]  # published while the step ran
        end = seen[3 * step + 2]
        assert all(s.tuning is mid[0].tuning for s in mid)  # the step before's result
        assert end.tuning is not None and end.tuning is not mid[0].tuning
        assert end.frame is mid[-1].frame  # the step ends on the latest poll
    assert tuners[0].seen[1].frames[-1] is tuners[0].seen[1].frame  # the window moved on


def test_a_bug_in_the_tuner_never_stops_the_polls() -> None:
    def factory(poll: Callable[[], InstanceState]) -> FakeTuner:
        tuner = FakeTuner(poll)
        tuner.step = lambda state: 1 / 0  # type: ignore[assignment, method-assign]
        return tuner

    driver, seen = _driver(3, tuner=factory)
    driver.run()
    assert len(seen) == 3 and all("ZeroDivisionError" in (s.tuner_error or "") for s in seen)


def test_a_replaced_tuner_takes_over_between_two_steps_and_the_old_one_closes_first() -> None:
    made: list[FakeTuner] = []

    def factory(poll: Callable[[], InstanceState]) -> FakeTuner:
        made.append(FakeTuner(poll))
        return made[-1]

    driver, _seen = _driver(6, tuner=factory)
    driver.run(until=lambda s: s.counts is not None and s.counts.polls == 3)
    driver.replace_tuner(factory, "apply", recommend=False)
    assert len(made) == 1 and not made[0].closed  # nothing happens outside the loop
    driver.run()
    old, new = made
    assert old.closed and len(old.seen) == 3 and len(new.seen) == 3
    assert driver.state.mode == "apply" and not driver.state.recommend
    driver.close()
    assert new.closed


def test_the_schedule_backs_off_while_unreachable_and_comes_back_at_once() -> None:
    assert [backoff_delay(1.0, n) for n in range(7)] == [1.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert backoff_delay(60.0, 5) == 60.0  # never shorter than the interval
    now = [100.0]
    polls = [*history_polls(1), *_errors(3), *history_polls(2)]
    driver = InstanceDriver(_Paced(polls), interval=1.0, mono=lambda: now[0])
    due = []
    for _ in polls:
        now[0] = max(now[0], driver.next_due)  # the clock at the poll that is due
        driver.run(until=lambda _s: True)
        due.append(driver.next_due - now[0])
    assert due == [1.0, 1.0, 2.0, 4.0, 1.0, 1.0]


def _errors(n: int) -> list[Poll]:
    return [Poll("/tmp/demo/stats.sock", 0.0, 0.0, error="connection refused")] * n


class _Paced(ScriptedSource):
    paced = True


def test_stop_from_another_thread_ends_the_loop_and_halts_the_tuner() -> None:
    made: list[FakeTuner] = []

    def factory(poll: Callable[[], InstanceState]) -> FakeTuner:
        made.append(FakeTuner(poll))
        return made[-1]

    source = _Paced(history_polls(1000))
    driver = InstanceDriver(source, interval=0.05, tuner=factory)
    driver.start()
    assert driver.next_state(None, 10.0) is not None
    driver.stop()
    assert driver.join(10.0)
    assert made[0].halted and made[0].closed and source.polls < 1000


def test_fresh_asks_for_a_poll_and_waits_for_it() -> None:
    source = _Paced(history_polls(1000))
    driver = InstanceDriver(source, interval=3600.0)  # would wait an hour for its next poll
    driver.start()
    first = driver.next_state(None, 10.0)
    assert first is not None
    started = time.monotonic()
    fresh = driver.fresh(10.0)
    assert fresh is not None and fresh is not first and time.monotonic() - started < 5.0
    driver.stop()
    assert driver.join(10.0)


class _Held(_Paced):
    """A source whose poll, while `hold` is set, waits for `release`: a poll in flight."""

    def __init__(self, polls: Sequence[Poll]) -> None:
        super().__init__(polls)
        self.hold = False
        self.entered = threading.Event()
        self.release = threading.Event()

    def poll(self) -> Poll:
        if self.hold:
            self.entered.set()
            self.release.wait(30.0)
        return super().poll()


def test_fresh_never_answers_with_a_poll_that_started_before_it() -> None:
    source = _Held(history_polls(1000))
    driver = InstanceDriver(source, interval=3600.0)
    published: list[InstanceState] = []
    driver.subscribe(published.append)
    driver.start()
    assert driver.next_state(None, 10.0) is not None  # poll 1
    source.hold = True
    driver.poll_now()
    assert source.entered.wait(10.0)  # poll 2 is in flight, started before `fresh`
    asked, ask = threading.Event(), driver.poll_now

    def poll_now() -> None:  # `fresh` asks through it
        ask()
        asked.set()

    driver.poll_now = poll_now  # type: ignore[method-assign]
    answer: list[InstanceState | None] = []
    asking = threading.Thread(target=lambda: answer.append(driver.fresh(30.0)))
    asking.start()
    assert asked.wait(10.0)  # `fresh` asked while poll 2 is still in flight
    source.hold = False
    source.release.set()
    asking.join(30.0)
    driver.stop()
    assert driver.join(10.0)
    assert answer and answer[0] is not None
    assert source.polls >= 3 and answer[0] is published[2]  # poll 3's state, not poll 2's


def test_calls_from_other_threads_run_between_polls_in_the_drivers_thread() -> None:
    source = _Paced(history_polls(1000))
    driver = InstanceDriver(source, interval=0.05)
    ran_in: list[threading.Thread] = []
    driver.start(name="the-driver")
    driver.call_soon(lambda: ran_in.append(threading.current_thread()))
    assert driver.fresh(10.0) is not None
    driver.stop()
    assert driver.join(10.0)
    assert [t.name for t in ran_in] == ["the-driver"]


def test_a_replay_drives_each_recorded_instance_in_the_recorded_order() -> None:
    a, b = Instance("/a.sock"), Instance("/b.sock")
    polls = [
        a.poll(0, load()),
        b.poll(0, load()),
        a.poll(1, load()),
        a.poll(2, load()),
        b.poll(1, load()),
    ]
    order: list[str] = []

    def make(source: ReplaySource) -> InstanceDriver:
        driver = InstanceDriver(source)
        driver.subscribe(lambda s: order.append(s.frame.source if s.frame else "?"))
        return driver

    drivers = run_replay(polls, make)
    assert order == ["/a.sock", "/b.sock", "/a.sock", "/a.sock", "/b.sock"]
    assert [d.source.name for d in drivers] == ["/a.sock", "/b.sock"]
    assert [len(d.state.frames) for d in drivers] == [3, 2]


@dataclass
class _FixedStage:
    """A request log stage that answers one view: how often the driver asked, and when."""

    view_of: object
    asked: int = 0

    def start(self) -> None:
        pass

    def close(self) -> None:
        pass

    def view(self, frame: object, frames: object = ()) -> object:
        self.asked += 1
        return self.view_of


def test_the_rules_see_the_polls_latency_view_read_once_per_poll() -> None:
    from tests.support.latency import lognormal_view
    from uwsgitune.rules import RuleSettings

    view = lognormal_view(median_us=20_000, sigma=0.3, wait_median_us=150_000)
    stage = _FixedStage(view)
    rules = RulesRunner(settings=RuleSettings(latency_target="p99=250ms"))
    driver, seen = _driver(40, rules=rules, latency=stage)
    driver.run()
    assert stage.asked == len(seen) == 40  # one view per poll, read before the rules
    assert all(s.latency is view for s in seen)
    assert any(f.id == "latency.queue_over_target" for f in seen[-1].findings)
