"""The daemon's log lines from one state to the next: findings raised and cleared once each,
a failing rules engine said once, the tuner's audited actions counted for the metrics."""

from __future__ import annotations

import io
import logging
from typing import Any

import pytest

from tests.states import change, finding
from tests.support.frames import frame
from uwsgitune.daemon import logs
from uwsgitune.daemon.findings import log_actions, log_findings
from uwsgitune.pipeline import InstanceState, RulesRunner
from uwsgitune.pipeline.state import count_actions
from uwsgitune.tuner.result import StepResult

FRAMES = [frame(1)]


@pytest.fixture
def lines() -> Any:
    buf = io.StringIO()
    logs.setup("text", stream=buf)
    yield lambda: [ln for ln in buf.getvalue().splitlines() if "event=" in ln]
    logging.getLogger(logs.LOGGER).handlers.clear()


def _walk(*found: tuple[Any, ...], errors: tuple[str | None, ...] = ()) -> list[InstanceState]:
    states = [InstanceState("u")]
    for i, f in enumerate(found):
        error = errors[i] if i < len(errors) else None
        states.append(InstanceState("u", findings=f, rules_error=error))
        log_findings("app", states[-2], states[-1])
    return states


def test_raised_and_cleared_once_each(lines: Any) -> None:
    listen = finding("listen_queue.capacity_short", "critical", "processes", 12)
    listen = listen.__class__(**{**listen.__dict__, "reason": "queue full"})
    memory = finding("memory.rss_growth", "warning", "reload-on-rss", "512")
    states = _walk((listen,), (listen, memory), (memory,), ())
    assert states[2].finding_pairs() == (
        ("listen_queue.capacity_short", "critical"),
        ("memory.rss_growth", "warning"),
    )
    assert states[2].recommended() == (("processes", 12.0),)  # a string value is no metric
    got = lines()
    raised, cleared = "finding_raised", "finding_cleared"
    assert [ln.split("event=")[1].split()[0] for ln in got] == [raised, raised, cleared, cleared]
    assert 'reason="queue full"' in got[0] and "rule=listen_queue.capacity_short" in got[0]
    assert states[-1].finding_pairs() == ()


def test_a_broken_engine_is_logged_once(lines: Any) -> None:
    _walk((), (), (), errors=("rules engine failed: KeyError('bug')",) * 3)
    got = lines()
    assert len(got) == 1 and "event=rules_failed" in got[0]


def test_the_real_engine_runs() -> None:
    runner = RulesRunner()
    assert runner.run(FRAMES) == () and runner.error is None  # one frame: nothing yet


def test_actions_are_counted_for_the_metrics(lines: Any) -> None:
    step = StepResult(None, "apply", records=(change("fifo", "sent", "wrote '+'"),))
    actions = count_actions(count_actions((), step), step)
    assert actions == (("fifo", "sent", 2),)
    log_actions("app", InstanceState("u", tuning=step))
    assert "event=action instance=app kind=fifo result=sent detail=\"wrote '+'\"" in lines()[0]
